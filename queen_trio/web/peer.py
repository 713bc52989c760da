"""The peer listener: the socket other broker processes relay ephemeral requests to
(docs/ephemeral.md#the-owner).

A connection that opens with the peer channel's MAGIC (ephemeral/channel.py) is served here
by `PeerChannel`, frame by frame, straight into the app's ephemeral routes. Any other
connection is HTTP, served by hypercorn through `PeerGuard`: only the ephemeral routes and
`/health`; every other path is a 404 there, whatever the token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio
from hypercorn.typing import (
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Scope,
)

from ..ephemeral.channel import (
    FRAME_OVERHEAD_BYTES,
    ChannelError,
    Frames,
    RelayReply,
    RelayRequest,
    decode_request,
    encode,
)
from ..ephemeral.service import PEER_HEADER
from .app import App

log = logging.getLogger("queen_trio.peer")

NOT_A_RELAY = (b'{"error":"the peer channel carries relays from members only",'
               b'"code":"ephemeral_forbidden"}')

EPHEMERAL_PREFIX = "/api/v1/ephemeral/"  # what the peer channel serves
ALLOWED_PREFIXES = (EPHEMERAL_PREFIX, "/health")  # what HTTP on the peer port serves
NOT_EPHEMERAL = b'{"error":"the peer channel serves only the ephemeral routes"}'
REFUSAL = b'{"error":"the peer listener serves only the ephemeral routes and /health"}'


class PeerGuard:
    """The app, with requests that arrive on `peer_port` held to ALLOWED_PREFIXES."""

    def __init__(self, app: App, peer_port: int) -> None:
        self.app = app
        self.peer_port = peer_port

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable,
                       send: ASGISendCallable) -> None:
        if (scope["type"] == "http" and scope["server"] is not None
                and scope["server"][1] == self.peer_port
                and not scope["path"].startswith(ALLOWED_PREFIXES)):
            self.app.on_request_read(scope)
            start: HTTPResponseStartEvent = {
                "type": "http.response.start", "status": 404, "trailers": False, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(REFUSAL)).encode())]}
            await send(start)
            body: HTTPResponseBodyEvent = {"type": "http.response.body", "body": REFUSAL,
                                           "more_body": False}
            await send(body)
            return
        await self.app(scope, receive, send)


class PeerChannel:
    """The owner's side of the peer channel: one request in flight per connection, each
    answered by the app as a relayed request (`App.relayed`)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.counts = app.broker.ephemeral.served  # what /metrics shows
        self._idle: set[trio.CancelScope] = set()  # connections waiting for a request
        self._closing = False

    def close_idle(self) -> None:
        """The server stops: idle connections close now, busy ones after their answer."""
        self._closing = True
        for scope in self._idle:
            scope.cancel()

    async def serve(self, stream: trio.abc.Stream, buffered: bytes) -> None:
        """One connection, after its MAGIC; returns when it is done (the caller closes it)."""
        frames = Frames(stream, buffered,
                        limit=self.app.max_body_bytes + FRAME_OVERHEAD_BYTES)
        self.counts.open += 1
        try:
            async with trio.open_nursery() as watchers:
                # Errors are caught inside the nursery: out of it they would come as a group.
                await self._serve(frames, _HangUpWatch(frames.stream, watchers))
        finally:
            self.counts.open -= 1

    async def _serve(self, frames: Frames, watching: _HangUpWatch) -> None:
        try:
            while not self._closing:
                # The last request's watcher (a long poll's) is gone before the stream is
                # read again: waited for here, after its answer left.
                await watching.done()
                with trio.CancelScope() as idle:
                    self._idle.add(idle)
                    try:
                        frame = await frames.receive()
                    finally:
                        self._idle.discard(idle)
                if frame is None:  # closed, or the server stops
                    return
                if not await self._answer(frames, decode_request(frame), watching):
                    return
        except (ChannelError, trio.BrokenResourceError, trio.ClosedResourceError,
                OSError) as exc:
            log.debug("peer channel connection ended", extra={"error": str(exc)})

    async def _answer(self, frames: Frames, request: RelayRequest,
                      watching: _HangUpWatch) -> bool:
        """Whether the connection may carry another request."""
        headers = {k.encode("latin-1"): v.encode("latin-1")
                   for k, v in request.headers.items()}
        if PEER_HEADER not in headers:  # the channel carries members' relays only
            await frames.send(encode(RelayReply(403, None, NOT_A_RELAY)))
            return True
        if not request.target.startswith(EPHEMERAL_PREFIX):
            await frames.send(encode(RelayReply(404, None, NOT_EPHEMERAL)))
            return True
        response = await self.app.relayed(request.method, request.target, headers,
                                          request.body, watching.cancel_on_hang_up)
        if response is None:
            self.counts.abandoned += 1
            return False
        retry_after = next((v for k, v in response.headers if k == b"retry-after"), None)
        try:
            await frames.send(encode(RelayReply(response.status, retry_after,
                                                response.body)))
        except BaseException:
            self.counts.abandoned += 1
            if response.undelivered is not None:
                await response.undelivered()
            raise
        self.counts.served += 1
        return True


class _HangUpWatch:
    """A relayed request that waits is cancelled when its relaying process hangs up: nothing
    comes on the connection while a request is in flight but its end, so a task reads it.

    The task runs in the connection's nursery, not the request's: when the request is
    answered it is cancelled and not waited for, so its teardown (a scheduler round) comes
    after the answer has left instead of before (`serve` waits for it before it reads the
    next frame, as two readers may not share the stream)."""

    def __init__(self, stream: trio.abc.Stream, nursery: trio.Nursery) -> None:
        self._stream = stream
        self._nursery = nursery
        self._gone: trio.Event | None = None  # set when the last watcher has ended

    async def done(self) -> None:
        if self._gone is not None:
            await self._gone.wait()
            self._gone = None

    def cancel_on_hang_up(self, hung_up: trio.Event, handling: trio.CancelScope
                          ) -> Callable[[], None]:
        """Once the connection ends, `hung_up` is set (the request's `gone`: a claim that
        lands after it is given back) and `handling` cancelled; the callable returned stops
        the watching without waiting for it."""
        watch = trio.CancelScope()
        gone = self._gone = trio.Event()
        self._nursery.start_soon(self._watch, watch, hung_up, handling, gone)
        return watch.cancel

    async def _watch(self, watch: trio.CancelScope, hung_up: trio.Event,
                     handling: trio.CancelScope, gone: trio.Event) -> None:
        try:
            with watch:
                try:
                    await self._stream.receive_some(1)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
                hung_up.set()
                handling.cancel()
        finally:
            gone.set()
