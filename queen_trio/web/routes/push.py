"""The push routes: POST /api/v1/push and POST /api/v1/transaction (docs/api.md)."""

from __future__ import annotations

from ...broker import Broker
from ...push.binary import binary_form, is_binary, parse_binary_push, split_binary_transaction
from ...push.parse import parse_push_body
from ...push.transactions import parse_transaction
from ..http import Response, json_response
from ..request import Request


async def push(broker: Broker, request: Request) -> Response:
    if is_binary(request.headers, request.body):
        # The 2.6 client's binary body: the same items, through the same publisher.
        items = parse_binary_push(request.body, broker.settings.max_body_bytes)
        broker.activity.record_binary(binary_form(request.body))
    else:
        items = parse_push_body(request.body)
    status, results = await broker.publisher.push(items, request.subject)
    broker.activity.record_push(results)
    queues = {item.queue for item in items}
    response = json_response(status, results, items=len(items),
                             queue=queues.pop() if len(queues) == 1 else None)
    if status in (429, 503):
        # The clients back off on Retry-After: consumers free the space, the broker catches
        # up, the database comes back.
        response.headers.append((b"retry-after", b"1"))
    return response


async def transaction(broker: Broker, request: Request) -> Response:
    if is_binary(request.headers, request.body):
        head, pushed = split_binary_transaction(request.body, broker.settings.max_body_bytes)
        parsed = parse_transaction(head, pushed)
        broker.activity.record_binary("transaction")
    else:
        parsed = parse_transaction(request.body)
    reply = await broker.transactions.run(parsed, request.subject)
    broker.activity.record_transaction(
        [op.ack[1].status for op in parsed.ops if op.ack is not None], reply)
    return json_response(200, reply, items=len(parsed.ops))
