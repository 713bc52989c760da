"""The HTTP vocabulary of the web layer: requests, responses, and errors that carry a status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import msgspec
import trio

from .. import wire

CORS_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, POST, PUT, DELETE, OPTIONS"),
    (b"access-control-allow-headers", b"Content-Type, Authorization"),
    (b"access-control-max-age", b"86400"),
]
JSON_HEADERS = [(b"content-type", b"application/json"), *CORS_HEADERS]


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or []


@attrs.define(slots=True)
class Request:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    headers: dict[bytes, bytes]
    body: bytes
    # The authenticated subject (JWT `sub`), stamped as producerSub; None while auth is off.
    subject: str | None = None
    # Set when the client hangs up (watched on routes that ask for it: long polls).
    gone: trio.Event = attrs.Factory(trio.Event)

    def json(self) -> Any:
        """The body as strict JSON; an empty body is {} (routes whose fields are optional)."""
        return wire.decode_object(self.body)


@attrs.define(slots=True)
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[bytes, bytes]] = attrs.Factory(lambda: list(JSON_HEADERS))
    # Called (instead of sending) when the client is gone before the reply goes out, or if
    # sending fails: a pop gives its lease back.
    undelivered: Callable[[], Awaitable[None]] | None = None
    # For the access log: the route template (set by the app), how many items the request
    # carried or the reply delivered, and the queue when there is one.
    route: str | None = None
    items: int | None = None
    queue: str | None = None


def json_response(status: int, value: Any, *, items: int | None = None,
                  queue: str | None = None) -> Response:
    return Response(status, msgspec.json.encode(value), items=items, queue=queue)


def error_response(status: int, message: str,
                   fields: dict[str, object] | None = None) -> Response:
    """`{"error": message}`, plus any machine-readable `fields` (a code, a reason)."""
    return json_response(status, {"error": message, **(fields or {})})
