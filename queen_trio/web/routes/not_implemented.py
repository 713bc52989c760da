"""The answer to a route of the official 2.6 client that this broker does not have (kv,
locks, timers, offset reads, ephemeral queues, streams): 404 with code not_implemented, never
a 5xx (which the client retries and counts against the broker's health). The 2.6 client reads
a 404 on the ephemeral routes as "unsupported"."""

from __future__ import annotations

from ...broker import Broker
from ..http import Response, json_response
from ..request import Request


async def not_implemented(broker: Broker, request: Request) -> Response:
    return json_response(404, {"error": f"{request.method} {request.route} is not implemented "
                                        "by this broker", "code": "not_implemented"})
