"""The HTTP surface: a pure ASGI application (no coupling to the server under it) that serves
the route table (web/routes/table.py) through its router (web/router.py).

This is the one place where domain errors (`queen_trio.errors`) become HTTP statuses.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from urllib.parse import parse_qsl

import trio
from hypercorn.typing import (
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    HTTPScope,
    Scope,
)

from .. import wire
from ..broker import Broker
from ..errors import (
    BadRequest,
    Conflict,
    DatabaseUnavailable,
    NotFound,
    Overloaded,
    QueenError,
    TooLarge,
    Unavailable,
)
from .access import access_log, log_request
from .auth import Authenticator
from .http import HTTPError, Response, cors_headers, error_response, foreign_origin
from .request import Request
from .router import Handler, Route, Router

log = logging.getLogger("queen_trio.http")

# Domain errors and the status each one answers with.
STATUS_OF: dict[type[QueenError], int] = {
    BadRequest: 400,
    TooLarge: 413,
    NotFound: 404,
    Conflict: 409,
    DatabaseUnavailable: 503,
    Overloaded: 503,
    Unavailable: 503,
}

# Query parameters that carry a name: capped like every name (wire.name), on every route.
NAME_PARAMETERS = ("queue", "partition", "consumerGroup", "namespace", "task", "traceName")

# Told of every answer: (method, route template, status, seconds).
Observer = Callable[[str, str, int, float], None]
UNMATCHED = "unmatched"  # the route of an answer no route gave (404, 405, OPTIONS)
# The methods an observer is told by name; any other token a client sends is "OTHER", so
# what is counted per method stays bounded whatever arrives.
METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"})
OTHER_METHOD = "OTHER"


class App:
    """The ASGI callable: routing, authentication, the body, errors. `web/routes/table.py`
    builds it; each route's handler is called with `broker`."""

    def __init__(self, router: Router, broker: Broker, auth: Authenticator, *,
                 max_body_bytes: int, cors_origins: tuple[str, ...] = (),
                 observe: Observer | None = None) -> None:
        self.router = router
        self.cors_origins = cors_origins
        self.broker = broker
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        # Told once a request is read (or given up on): the server stops its read clock
        # (web/connections.py).
        self.on_request_read: Callable[[HTTPScope], None] = lambda scope: None
        # The event set once this request's client hangs up, if the server knows its
        # connection (web/connections.py); otherwise only a watched request learns it.
        self.hung_up: Callable[[HTTPScope], trio.Event | None] = lambda scope: None
        # Cancels a request that waits once its client hangs up, if the server knows its
        # connection (web/connections.py): then no watcher task is needed (`_handle_watched`).
        self.cancel_on_hang_up: Callable[[HTTPScope, trio.CancelScope],
                                         Callable[[], None] | None] = lambda scope, s: None
        self.observe = observe

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable,
                       send: ASGISendCallable) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        gone = self.hung_up(scope)
        if gone is None:
            gone = trio.Event()
        resolved = self._resolve(scope)
        response = await self._respond_once(scope, receive, gone, resolved)
        if response is None:
            return  # the client hung up: nobody to answer
        if response.route is None and isinstance(resolved, tuple):
            # The route that matched, whatever the answer (a 400 or a 503 included).
            response.route = resolved[0].path
            response.queue = resolved[1].get("queue")
        origin = next((v for k, v in scope["headers"] if k == b"origin"), None)
        response.headers.extend(cors_headers(self.cors_origins, origin))
        await self._send(send, response, gone, head=scope["method"] == "HEAD")
        seconds = time.perf_counter() - started
        if self.observe is not None:
            # The route is a registered template (or UNMATCHED), never the raw path.
            self.observe(observed_method(scope["method"]), response.route or UNMATCHED,
                         response.status, seconds)
        if access_log.isEnabledFor(logging.INFO):
            log_request(scope["method"], response, seconds)

    @staticmethod
    async def _send(send: ASGISendCallable, response: Response, gone: trio.Event, *,
                    head: bool) -> None:
        """The response; to a HEAD, its headers only (the length is the GET's)."""
        headers = response.headers
        if response.status != 204:
            headers = [*headers, (b"content-length", str(len(response.body)).encode())]
        try:
            # hypercorn drops what is sent after a disconnect without a word: look first.
            if gone.is_set():
                raise _Undelivered
            # `trailers: False` is hypercorn's default; its NotRequired is lost to mypy at
            # python_version 3.10 (a try/except import), so the key is given.
            start: HTTPResponseStartEvent = {"type": "http.response.start",
                                             "status": response.status, "headers": headers,
                                             "trailers": False}
            await send(start)
            body: HTTPResponseBodyEvent = {"type": "http.response.body",
                                           "body": b"" if head else response.body,
                                           "more_body": False}
            await send(body)
        except BaseException as exc:
            if response.undelivered is not None:
                await response.undelivered()
            if not isinstance(exc, _Undelivered):
                raise

    def _resolve(self, scope: HTTPScope) -> tuple[Route, dict[str, str]] | HTTPError | None:
        """The route and its parameters; the HTTPError (404, 405) to answer; None for
        OPTIONS."""
        if scope["method"] == "OPTIONS":
            return None
        try:
            return self.router.resolve(scope["method"], _path(scope))
        except HTTPError as exc:
            return exc

    async def _respond_once(self, scope: HTTPScope, receive: ASGIReceiveCallable, gone: trio.Event,
                            resolved: tuple[Route, dict[str, str]] | HTTPError | None
                            ) -> Response | None:
        """The response; None when the client left before its request was read, or hung up
        on a request that waits."""
        try:
            return await self._respond(scope, receive, gone, resolved)
        except _ClientGone:
            return None
        finally:
            self.on_request_read(scope)

    async def _respond(self, scope: HTTPScope, receive: ASGIReceiveCallable, gone: trio.Event,
                       resolved: tuple[Route, dict[str, str]] | HTTPError | None) -> Response:
        method = scope["method"]
        if resolved is None:  # a preflight: the CORS headers, if any, are the answer
            return Response(204, b"", [])
        path = _path(scope)
        try:
            if isinstance(resolved, HTTPError):
                raise resolved
            route, params = resolved
            headers = dict(scope["headers"])
            if (origin := foreign_origin(self.cors_origins, headers)) is not None:
                raise HTTPError(403, f"cross-origin request refused: {origin} is not in "
                                     "QUEEN_CORS_ORIGINS (docs/decisions.md#cross-site)")
            subject = await self.auth.authenticate(headers, route.access)
            body = await self._read_body(headers, receive, gone)
            self.on_request_read(scope)
            query = dict(parse_qsl(scope.get("query_string", b"").decode("utf-8", "replace"),
                                   keep_blank_values=True))
            _check_parameters(params, query)
            request = Request(method, path, params, query, headers, body, route.path, self.auth,
                              subject, gone)
            if route.waits.watched(request):
                response = await _handle_watched(route.handler, self.broker, request,
                                                 partial(self.cancel_on_hang_up, scope),
                                                 partial(_disconnect, receive))
            else:
                response = await route.handler(self.broker, request)
            response.route = route.path
            if response.queue is None:
                response.queue = params.get("queue")
            return response
        except _ClientGone:
            raise
        except Exception as exc:
            return _error_answer(exc, method, path)

    async def relayed(self, method: str, target: str, headers: dict[bytes, bytes],
                      body: bytes,
                      cancel_on_hang_up: Callable[[trio.Event, trio.CancelScope],
                                                  Callable[[], None]]
                      ) -> Response | None:
        """A request another broker process relayed over the peer channel (web/peer.py):
        routed, authorised as its original caller and answered as over HTTP, without h11
        or ASGI. The channel passes only the ephemeral routes here (web/peer.py); a request
        that waits is cancelled (None) when the relaying process hangs up: the channel sets
        the request's `gone` and cancels the scope it is given through `cancel_on_hang_up`."""
        path, _, query_string = target.partition("?")
        try:
            route, params = self.router.resolve(method, path)
            subject = await self.auth.authenticate(headers, route.access)
            query = dict(parse_qsl(query_string, keep_blank_values=True))
            _check_parameters(params, query)
            gone = trio.Event()
            request = Request(method, path, params, query, headers, body, route.path,
                              self.auth, subject, gone)
            if route.waits.watched(request):
                response = await _handle_watched(route.handler, self.broker, request,
                                                 partial(cancel_on_hang_up, gone))
            else:
                response = await route.handler(self.broker, request)
        except _ClientGone:
            return None
        except Exception as exc:
            return _error_answer(exc, method, path)
        response.route = route.path
        return response

    async def _read_body(self, headers: dict[bytes, bytes], receive: ASGIReceiveCallable,
                         gone: trio.Event) -> bytes:
        declared = headers.get(b"content-length")
        # bytes.isdigit() is ASCII digits; thousands of them int() refuses to read.
        if declared is not None and declared.isdigit() and (
                len(declared) > wire.MAX_DIGITS or int(declared) > self.max_body_bytes):
            raise HTTPError(413, f"Request body exceeds {self.max_body_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                # Gone (or cut off by the read deadline) mid-body: nothing to act on.
                gone.set()
                raise _ClientGone
            if message["type"] != "http.request":
                break  # nothing else comes on an http scope
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise HTTPError(413, f"Request body exceeds {self.max_body_bytes} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def observed_method(method: str) -> str:
    """`method` when it is one of METHODS, else OTHER_METHOD."""
    return method if method in METHODS else OTHER_METHOD


def _check_parameters(params: dict[str, str], query: dict[str, str]) -> None:
    """Every path parameter is a name or an id, and no parameter may carry a NUL: a 400
    naming it, before any handler runs."""
    for key, value in params.items():
        wire.name(value, key)
    for key, value in query.items():
        if key in NAME_PARAMETERS:
            wire.name(value, key)
        elif "\x00" in value:
            raise BadRequest(f"{key} must not contain NUL characters")


def _path(scope: HTTPScope) -> str:
    raw_path = scope.get("raw_path") or scope["path"].encode()
    return str(raw_path.decode("utf-8", "replace").split("?", 1)[0])


def _error_answer(exc: Exception, method: str, path: str) -> Response:
    """The answer to a request whose handling raised `exc`."""
    if isinstance(exc, HTTPError):
        response = error_response(exc.status, str(exc))
        response.headers.extend(exc.headers)
        return response
    if isinstance(exc, QueenError):
        status = next((code for kind, code in STATUS_OF.items() if isinstance(exc, kind)), 500)
        response = error_response(status, str(exc), exc.fields)
        if status == 503:  # the database is back, or the broker caught up: come back
            response.headers.append((b"retry-after", b"1"))
        return response
    log.exception("request failed", extra={"method": method, "path": path}, exc_info=exc)
    return error_response(500, f"internal error: {type(exc).__name__}")


class _ClientGone(Exception):
    """The client left before its request was read in full, or while it waited."""


class _Undelivered(Exception):
    """The client left before its reply could be sent."""


async def _handle_watched(handler: Handler, broker: Broker, request: Request,
                          cancel_on_hang_up: Callable[[trio.CancelScope],
                                                      Callable[[], None] | None],
                          hung_up: Callable[[], Awaitable[None]] | None = None
                          ) -> Response:
    """The handler's response, cancelled once the client hangs up (an HTTP disconnect, or
    the relaying process leaving the peer channel); `request.gone` is set first.

    When the connection itself can cancel the handler at its hang-up (`cancel_on_hang_up`
    gives a callable to forget it by), it does: no task. Otherwise (a connection the server
    does not know) a watcher task cancels it once `hung_up` returns. That task costs its
    answer a scheduler round on the way out (the nursery waits for the cancelled watcher),
    which a long poll's answer pays on every hop of a relayed round trip
    (docs/performance.md)."""
    with trio.CancelScope() as handling:
        forget = cancel_on_hang_up(handling)
        if forget is not None:
            try:
                response = await handler(broker, request)
            finally:
                forget()
    if forget is not None:
        if handling.cancelled_caught:
            raise _ClientGone
        return response
    assert hung_up is not None, "no hang-up to watch for"
    async with trio.open_nursery() as watchers:
        with trio.CancelScope() as handling:
            watchers.start_soon(_watch, hung_up, request.gone, handling)
            response = await handler(broker, request)
        watchers.cancel_scope.cancel()
    if handling.cancelled_caught:
        raise _ClientGone
    return response


async def _watch(hung_up: Callable[[], Awaitable[None]], gone: trio.Event,
                 handling: trio.CancelScope) -> None:
    await hung_up()
    gone.set()
    handling.cancel()


async def _disconnect(receive: ASGIReceiveCallable) -> None:
    """Once the body is read, the only message left is the disconnect."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _lifespan(receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
