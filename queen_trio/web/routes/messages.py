"""The message routes: list, read, delete and retry one message; a queue's messages."""

from __future__ import annotations

from ...broker import Broker
from ...ops import messages
from ..http import Response, json_response
from ..request import Request


async def list_messages(broker: Broker, request: Request) -> Response:
    return json_response(200, await messages.list_messages(
        broker.db, messages.parse_list(request.query)))


async def get(broker: Broker, request: Request) -> Response:
    return json_response(200, await messages.get_message(
        broker.db, broker.cipher, request.params["partitionId"],
        request.params["transactionId"]))


async def delete(broker: Broker, request: Request) -> Response:
    return json_response(200, await messages.delete_message(
        broker.db, broker.wakeups, request.params["partitionId"],
        request.params["transactionId"]))


async def retry(broker: Broker, request: Request) -> Response:
    return json_response(200, await messages.retry_message(
        broker.db, broker.cipher, broker.wakeups, request.params["partitionId"],
        request.params["transactionId"], request.query))


async def of_queue(broker: Broker, request: Request) -> Response:
    return json_response(200, await messages.queue_messages(
        broker.db, request.params["queue"], request.query))
