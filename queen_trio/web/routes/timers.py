"""The timer routes (docs/timers.md): schedule/reschedule/cancel in one transaction, the
cancel that no gate blocks, peek, a queue's list, and the per-queue summary the dashboard
and the CLI read."""

from __future__ import annotations

from ...broker import Broker
from ...timers.ops import TimerOp, parse_body
from ...timers.service import LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT
from ..http import Response, json_response
from ..request import Request


async def apply(broker: Broker, request: Request) -> Response:
    ops = parse_body(request.body, max_body_bytes=broker.settings.max_body_bytes)
    results = await broker.timers.apply(ops, request.subject)
    return json_response(200, {"results": results}, items=len(ops))


def _key(request: Request) -> tuple[str, str]:
    # The router split the raw path at the first "/" after the queue and then decoded each
    # part: the JS client's %2F and the Python and Go clients' raw "/" in a key both arrive.
    return request.params["queue"], request.params["timerKey"]


async def cancel(broker: Broker, request: Request) -> Response:
    queue, key = _key(request)
    txn = request.query.get("txn") or None
    [result] = await broker.timers.apply([TimerOp("cancel", queue, key, txn=txn)],
                                         request.subject)
    return json_response(200, result, queue=queue)


async def peek(broker: Broker, request: Request) -> Response:
    queue, key = _key(request)
    return json_response(200, await broker.timers.peek(queue, key), queue=queue)


def _limit(raw: str | None) -> int:
    """Clamped, never refused (the client's promise)."""
    try:
        value = int(raw) if raw is not None else LIST_DEFAULT_LIMIT
    except ValueError:
        value = LIST_DEFAULT_LIMIT
    return min(max(value, 1), LIST_MAX_LIMIT)


async def list_timers(broker: Broker, request: Request) -> Response:
    queue = request.params["queue"]
    page = await broker.timers.list_page(queue, request.query.get("after", ""),
                                    _limit(request.query.get("limit")))
    return json_response(200, page, queue=queue)


async def summary(broker: Broker, request: Request) -> Response:
    queues = await broker.timers.queues()
    return json_response(200, {"queues": queues,
                               "pending": sum(q["pending"] for q in queues)})
