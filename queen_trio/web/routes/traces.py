"""The trace routes: record an event, list trace names, read a trace or a message's."""

from __future__ import annotations

from ...broker import Broker
from ...ops import traces
from ..http import Response, json_response
from ..request import Request


async def record(broker: Broker, request: Request) -> Response:
    return json_response(201, await traces.record(broker.db, request.json(),
                                                  worker_id=broker.identity.worker_id))


async def names(broker: Broker, request: Request) -> Response:
    return json_response(200, await traces.names(broker.db, request.query))


async def by_name(broker: Broker, request: Request) -> Response:
    return json_response(200, await traces.by_name(
        broker.db, broker.cipher, request.params["traceName"], request.query))


async def of_message(broker: Broker, request: Request) -> Response:
    return json_response(200, await traces.by_message(
        broker.db, request.params["partitionId"], request.params["transactionId"]))
