"""The HTTP vocabulary of the web layer: responses, and errors that carry a status (what a
handler is given is web/request.py's `Request`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import msgspec

# The reference's CORS headers (contract.md), beside `Access-Control-Allow-Origin`; given only
# to the origins QUEEN_CORS_ORIGINS lists (docs/decisions.md#cors), by the app (`cors_headers`).
CORS_HEADERS = [
    (b"access-control-allow-methods", b"GET, POST, PUT, DELETE, OPTIONS"),
    (b"access-control-allow-headers", b"Content-Type, Authorization"),
    (b"access-control-max-age", b"86400"),
]
JSON_HEADERS = [(b"content-type", b"application/json")]
ANY_ORIGIN = "*"


def cors_headers(allowed: tuple[str, ...], origin: bytes | None) -> list[tuple[bytes, bytes]]:
    """The CORS headers of a reply to a request from `origin` (its `Origin` header): all of
    them, with `*` as the reference has it, when `allowed` holds `*`; the origin itself when
    `allowed` lists it; none otherwise. A reply that depends on the origin says so (`Vary`),
    so that no cache hands one origin's answer to another."""
    if not allowed:
        return []
    if ANY_ORIGIN in allowed:
        return [(b"access-control-allow-origin", b"*"), *CORS_HEADERS]
    vary = [(b"vary", b"Origin")]
    if origin is None or origin.decode("latin-1").lower() not in allowed:
        return vary
    return [(b"access-control-allow-origin", origin), *CORS_HEADERS, *vary]


def foreign_origin(allowed: tuple[str, ...], headers: dict[bytes, bytes]) -> str | None:
    """The origin of a request a page on another origin sent (docs/decisions.md#cross-site),
    when QUEEN_CORS_ORIGINS does not list it; None for a request to answer. CORS keeps such a
    page from reading an answer, not from sending the request: a form's POST, or a fetch in
    no-cors mode, would still push, pop or delete. Clients that are not browsers send neither
    header; the dashboard is same-origin."""
    if ANY_ORIGIN in allowed:
        return None
    origin = headers.get(b"origin")
    if origin is not None:
        text = origin.decode("latin-1").lower()
        own = headers.get(b"host", b"").decode("latin-1").lower()
        if text.partition("://")[2] == own or text in allowed:
            return None
        return text
    # A browser's GET without an Origin (no-cors, an <img>): its fetch metadata says where
    # it came from. A navigation (a link the user follows, the address bar) is answered.
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1").lower()
    if site in ("cross-site", "same-site") and headers.get(b"sec-fetch-mode") != b"navigate":
        return f"a {site} page"
    return None


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or []


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
