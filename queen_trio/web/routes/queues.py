"""The queue routes: POST /api/v1/configure and DELETE /api/v1/resources/queues/:queue."""

from __future__ import annotations

from ... import wire
from ...broker import Broker
from ...queues.queues import parse_configure
from ..http import Response, json_response
from ..request import Request


async def configure(broker: Broker, request: Request) -> Response:
    req = parse_configure(request.json())
    reply = await broker.queues.configure(req, encryption_usable=broker.cipher.enabled)
    return json_response(200, reply, queue=req.queue)


async def delete(broker: Broker, request: Request) -> Response:
    name = wire.name(request.params["queue"], "queue")
    reply = await broker.queues.delete(name)
    broker.consumer.forget_queue(name)
    return json_response(200, reply)
