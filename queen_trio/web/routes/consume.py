"""The consuming routes: pops (long polls), acks, lease extension, the dead letters."""

from __future__ import annotations

from ... import wire
from ...broker import Broker
from ...consume import acks
from ...consume.dlq import read_dead_letters
from ...consume.pop import parse_pop
from ..http import Response, json_response
from ..request import Request


async def pop(broker: Broker, request: Request) -> Response:
    """Every pop route: a queue, a queue's partition, or a namespace and task (the query)."""
    queue, partition = request.params.get("queue"), request.params.get("partition")
    req = parse_pop(request.query, broker.settings,
                    queue=None if queue is None else wire.name(queue, "queue"),
                    partition=None if partition is None else wire.name(partition, "partition"))
    delivery = await broker.consumer.pop(req, request.gone)
    broker.activity.record_pop(req.queue, None if delivery is None else delivery.reply,
                               superseded=0 if delivery is None else delivery.superseded)
    if delivery is None:
        return Response(204, b"", [], items=0)
    response = json_response(200, delivery.reply, items=len(delivery.reply["messages"]),
                             queue=delivery.reply["queue"])
    response.undelivered = lambda: broker.consumer.release(delivery)
    return response


async def ack_one(broker: Broker, request: Request) -> Response:
    group, ack = acks.parse_single_ack(request.json())
    results = await broker.ack_lane.settle(group, [ack])
    broker.activity.record_acks([ack.status], results)
    return json_response(200, results, items=1)


async def ack_batch(broker: Broker, request: Request) -> Response:
    group, items = acks.parse_ack_batch(request.json())
    results = await broker.ack_lane.settle(group, items)
    broker.activity.record_acks([a.status for a in items], results)
    return json_response(200, results, items=len(items))


async def extend_lease(broker: Broker, request: Request) -> Response:
    lease_id = wire.parse_uuid(request.params["leaseId"], "leaseId")
    seconds = acks.parse_extend(request.json())
    return json_response(200, await acks.extend_lease(broker.db, lease_id, seconds))


async def dead_letters(broker: Broker, request: Request) -> Response:
    return json_response(200, await read_dead_letters(broker.db, broker.cipher, request.query))
