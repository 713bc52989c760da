"""The HTTP connections: at most QUEEN_MAX_CONNECTIONS open, and each request read within
QUEEN_REQUEST_READ_TIMEOUT of its first byte.

hypercorn's own `read_timeout` bounds each read, so a request trickling one byte every few
seconds is read forever. Here every accepted stream carries a clock: the first byte of a
request starts it, the app stops it once it has read the request (`request_read`), and a
clock that runs out answers 408 and closes the connection. Past the connection cap the
listener stops accepting, so new clients wait in the kernel's backlog. A stream also knows
when its client hung up (end of file): the app's requests on it read that (`hung_up`), so a
request that does not wait needs no watcher task to learn it.

`serve` is hypercorn's trio `worker_serve` with these listeners in place of plain ones
(hypercorn has no hook for its listeners), and each connection served by `_Connection`:
hypercorn's `TCPServer` with three costs of every request taken off.

- A response goes out in one write. hypercorn writes a response's head, its body and its
  (empty, with a content-length) end as three sends, each under a lock and a shielded cancel
  scope: here the head waits for the body, the two leave in one `send`, and an empty write
  costs nothing.
- The keep-alive clock is one task per connection, which a request does not touch: it notes
  when its connection went idle, and the task looks when its deadline passes. hypercorn stops
  its idle task when a request starts and starts a new one (a task, a nursery handshake, a
  lock) once the request is answered.
- A read enters no cancel scope of its own: hypercorn wraps each in `fail_after(read_timeout
  or inf)`, while here the stream's clock times a request and no read_timeout is set.

That one idle task must end with its connection, or the connection's task group waits for it:
it ends as soon as the connection is closed (by either side) or its client is gone (the read
side ended), so a connection never outlives its client by the keep-alive timeout and a stop
never waits for a connection that nobody is on. On shutdown an idle connection is closed at
once; a busy one when its request is answered (hypercorn then closes rather than recycles);
a connection to the peer listener that has not yet said what it is (`_sniff`), at once.

The rest of hypercorn (h11, its HTTP stream, the app task per request) is used as is.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import msgspec
import trio
from hypercorn.config import Config
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ASGIFramework, ConnectionState, HTTPScope, LifespanState
from hypercorn.utils import ShutdownError, raise_shutdown, repr_socket_addr, wrap_app

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

from ..ephemeral.channel import MAGIC, RECEIVE_BYTES

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger("queen_trio.connections")

WARN_EVERY_SECONDS = 60.0
LINGER_SECONDS = 1.0


def _timeout_response(seconds: float) -> bytes:
    body = msgspec.json.encode({"error": f"Request not received within {seconds:g} s "
                                         "(QUEEN_REQUEST_READ_TIMEOUT)"})
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)) + body


@attrs.frozen
class ConnectionStatistics:
    open: int          # connections open now
    timed_out: int     # requests answered 408
    waited: int        # accepts that waited for a free slot


class ConnectionGate:
    """The cap on open connections and the per-request read clock, shared by the listeners
    and the app (which calls `request_read`)."""

    def __init__(self, *, max_connections: int, read_timeout: float) -> None:
        self._limiter = trio.CapacityLimiter(max_connections)
        self._read_timeout = read_timeout
        self._streams: dict[Any, _TimedStream] = {}  # by the peer's address
        self._timed_out = 0
        self._waited = 0
        self._warned_at = -math.inf

    def statistics(self) -> ConnectionStatistics:
        return ConnectionStatistics(open=len(self._streams), timed_out=self._timed_out,
                                    waited=self._waited)

    def attach(self, app: App) -> None:
        """The app tells the gate when a request is read, and asks it whether its client
        hung up."""
        app.on_request_read = self.request_read
        app.hung_up = self.hung_up
        app.cancel_on_hang_up = self.cancel_on_hang_up

    def hung_up(self, scope: HTTPScope) -> trio.Event | None:
        """Set once the client of this request's connection hangs up (None: not ours)."""
        client = scope.get("client")
        stream = self._streams.get(tuple(client)) if client else None
        return None if stream is None else stream.hung_up

    def cancel_on_hang_up(self, scope: HTTPScope, handling: trio.CancelScope
                          ) -> Callable[[], None] | None:
        """`handling` cancelled once this request's client hangs up, with no task watching
        for it; the callable returned forgets it. None: not our connection (the app watches
        with a task instead)."""
        client = scope.get("client")
        stream = self._streams.get(tuple(client)) if client else None
        return None if stream is None else stream.cancel_on_hang_up(handling)

    def request_read(self, scope: HTTPScope) -> None:
        """The app has read (or given up on) the request of this connection: stop its clock."""
        client = scope.get("client")
        stream = self._streams.get(tuple(client)) if client else None
        if stream is not None:
            stream.stop_clock()

    def listener(self, inner: trio.SocketListener) -> trio.abc.Listener[trio.abc.Stream]:
        return _GatedListener(self, inner)

    async def _admit(self, borrower: object) -> None:
        if not self._limiter.available_tokens:
            self._waited += 1
            now = trio.current_time()
            if now - self._warned_at >= WARN_EVERY_SECONDS:
                self._warned_at = now
                log.warning("connection limit reached; new connections wait in the backlog",
                            extra={"max_connections": int(self._limiter.total_tokens)})
        await self._limiter.acquire_on_behalf_of(borrower)

    def _opened(self, stream: _TimedStream) -> None:
        self._streams[stream.peer] = stream

    def _closed(self, stream: _TimedStream) -> None:
        if self._streams.get(stream.peer) is stream:
            del self._streams[stream.peer]
        self._limiter.release_on_behalf_of(stream)


class _GatedListener(trio.abc.Listener[trio.abc.Stream]):
    def __init__(self, gate: ConnectionGate, inner: trio.SocketListener) -> None:
        self._gate = gate
        self._inner = inner
        self.socket = inner.socket

    async def accept(self) -> trio.abc.Stream:
        slot = _Slot()
        await self._gate._admit(slot)
        try:
            stream = await self._inner.accept()
        except BaseException:
            self._gate._limiter.release_on_behalf_of(slot)
            raise
        timed = _TimedStream(self._gate, stream)
        # The slot passes to the stream: released when the stream closes.
        self._gate._limiter.release_on_behalf_of(slot)
        self._gate._limiter.acquire_on_behalf_of_nowait(timed)
        self._gate._opened(timed)
        return timed

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Slot:
    """Holds a connection slot while the listener waits for the connection itself."""


class _TimedStream(trio.abc.HalfCloseableStream):
    """A socket stream whose reads stop at the current request's deadline."""

    def __init__(self, gate: ConnectionGate, stream: trio.SocketStream) -> None:
        self._gate = gate
        self._stream = stream
        self.socket = stream.socket
        try:
            self.peer = tuple(stream.socket.getpeername())
        except OSError:
            self.peer = (id(self),)
        self.deadline: float | None = None
        # The read under way while a request's clock runs: hypercorn reads on (for the next
        # request, or a hang-up) before its app has read the request, so stopping the clock
        # must also disarm that read, or a long poll would be answered 408 mid-wait.
        self._clocked_read: trio.CancelScope | None = None
        self._closed = False
        self.hung_up = trio.Event()
        # Requests that wait, cancelled when the client hangs up (`cancel_on_hang_up`).
        self._cancelled_on_hang_up: set[trio.CancelScope] = set()
        self._unread = b""  # read by the peer listener's sniff, for hypercorn to read again

    def _hang_up(self) -> None:
        self.hung_up.set()
        for scope in self._cancelled_on_hang_up:
            scope.cancel()

    def cancel_on_hang_up(self, handling: trio.CancelScope) -> Callable[[], None]:
        """`handling` is cancelled once the client hangs up (at once if it has); the
        returned callable forgets it."""
        if self.hung_up.is_set():
            handling.cancel()
        self._cancelled_on_hang_up.add(handling)
        return partial(self._cancelled_on_hang_up.discard, handling)

    def unread(self, data: bytes) -> None:
        self._unread = data + self._unread

    @property
    def raw(self) -> trio.SocketStream:
        """The socket stream itself, with no read clock (the peer channel's)."""
        return self._stream

    def stop_clock(self) -> None:
        self.deadline = None
        if self._clocked_read is not None:
            self._clocked_read.deadline = math.inf

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._unread:
            data, self._unread = self._unread, b""
            return data
        try:
            return await self._receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._hang_up()
            raise

    async def _receive_some(self, max_bytes: int | None) -> bytes | bytearray:
        if self.deadline is None:
            data = await self._stream.receive_some(max_bytes)
            if data:  # a request's first byte: its clock starts
                self.deadline = trio.current_time() + self._gate._read_timeout
            else:
                self._hang_up()
            return data
        with trio.move_on_at(self.deadline) as self._clocked_read:
            try:
                data = await self._stream.receive_some(max_bytes)
            finally:
                self._clocked_read = None
            if not data:
                self._hang_up()
            return data
        self._gate._timed_out += 1
        try:
            await self._stream.send_all(_timeout_response(self._gate._read_timeout))
            await self._stream.send_eof()
            # A lingering close: what the client still sends is read and dropped for a
            # moment, so closing does not reset the connection under its 408.
            with trio.move_on_after(LINGER_SECONDS):
                while await self._stream.receive_some(65536):
                    pass
        except (trio.BrokenResourceError, trio.BusyResourceError, trio.ClosedResourceError):
            pass
        # hypercorn ends the connection on TooSlowError, as on its own read timeout.
        raise trio.TooSlowError

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        self._hang_up()
        if not self._closed:
            self._closed = True
            self._gate._closed(self)
        await self._stream.aclose()


# A final response's head (h11 writes HTTP/1.1 only); an interim one (100 Continue) goes out
# at once, since the client waits for it before it sends the body.
_FINAL_HEAD = b"HTTP/1.1 "
_INTERIM = b"HTTP/1.1 1"


class _Connection(TCPServer):
    """hypercorn's connection, writing each response in one send and keeping one idle task."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._head = b""  # a response head waiting for its body
        self._idle_at = math.inf  # the keep-alive deadline while idle; inf while serving
        self._idle_scope: trio.CancelScope | None = None
        # True once the connection is over (closed, or its client gone): the idle task ends.
        self._over = False

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, RawData):
            data = event.data
            if not self._head and data.startswith(_FINAL_HEAD) and not data.startswith(
                    _INTERIM):
                self._head = data  # the body (or the end of a bodiless reply) follows
                return
            if not data and not self._head:
                return  # the end of a body whose length was given: nothing to send
            data, self._head = self._head + data, b""
            await self._write(data)
        elif isinstance(event, Updated):
            # Only noted: the idle task looks at it when its deadline passes.
            self._idle_at = (trio.current_time() + self.config.keep_alive_timeout
                             if event.idle else math.inf)
        else:
            if isinstance(event, Closed) and self._head:
                head, self._head = self._head, b""
                await super().protocol_send(RawData(data=head))
            await super().protocol_send(event)

    async def _write(self, data: bytes) -> None:
        """hypercorn's write of `data`, without the scheduler round its lock's `acquire`
        takes before the bytes leave when nobody holds the lock (the usual case: one
        response at a time per connection). A long poll's answer would otherwise wait
        behind every task its process has ready, on each hop of a relayed round trip."""
        try:
            self.send_lock.acquire_nowait()
        except trio.WouldBlock:
            await super().protocol_send(RawData(data=data))
            return
        try:  # as hypercorn's protocol_send, under the lock
            try:
                with trio.CancelScope(shield=True):
                    await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await self.protocol.handle(Closed())
        finally:
            self.send_lock.release()

    async def _read_data(self) -> None:
        try:
            if self.config.read_timeout is None:
                await self._read_untimed()
            else:
                await super()._read_data()
        finally:
            # The client is gone (end of file, a reset, a 408) or the stream was closed: no
            # keep-alive left to time. A request still running ends on its own (its client's
            # hang-up is known to it), and the connection closes with it.
            self._end_idle_task()

    async def _read_untimed(self) -> None:
        """hypercorn's read loop without its `fail_after(read_timeout or inf)` around each
        read: with no read_timeout (the server sets none; the stream's own clock times a
        request) that is a cancel scope entered and left per read for nothing."""
        while True:
            try:
                data = await self.stream.receive_some(MAX_RECV)
            except (trio.ClosedResourceError, trio.BrokenResourceError, trio.TooSlowError):
                break
            await self.protocol.handle(RawData(bytes(data)))
            if not data:
                break
        await self.protocol.handle(Closed())

    async def _close(self) -> None:
        self._end_idle_task()
        await super()._close()

    def _end_idle_task(self) -> None:
        self._over = True
        if self._idle_scope is not None:
            self._idle_scope.cancel()

    async def _idle_timeout(self) -> None:
        """Started once per connection (by `run`): closes the connection once it has been
        idle for the keep-alive timeout, or, once the server stops, if it is idle then. A
        request only notes when its connection went idle (`_idle_at`, never while it is
        served): no task, no wake-up and no deadline moved per request. When this task's
        deadline passes it looks: a connection idle since before it closes; one answered
        since is waited on to its new deadline; one busy now is looked at again a keep-alive
        timeout later. It returns as soon as the connection is over.

        A request answered after the server began to stop is not followed by an idle spell:
        hypercorn closes its connection instead of recycling it (which sets `_over`)."""
        keep_alive = self.config.keep_alive_timeout
        deadline = self._idle_at = trio.current_time() + keep_alive
        while True:
            with trio.CancelScope(deadline=deadline) as self._idle_scope:
                if not self._over:
                    await self.context.terminated.wait()
            self._idle_scope = None
            if self._over:
                return
            if self.context.terminated.is_set():
                if self._idle_at == math.inf:
                    return  # the server stops with a request running: its answer closes
                break
            now = trio.current_time()
            if self._idle_at == math.inf:
                deadline = now + keep_alive
            elif now < self._idle_at:
                deadline = self._idle_at
            else:
                break
        with trio.CancelScope(shield=True):
            await self._initiate_server_close()


class PeerChannelServer(Protocol):
    """What serves the peer channel's connections (web/peer.py's PeerChannel)."""

    async def serve(self, stream: trio.abc.Stream, buffered: bytes) -> None: ...

    def close_idle(self) -> None: ...


@attrs.define(eq=False)
class _Sniffing:
    """The peer listener's connections still waiting for the bytes that tell what they are:
    closed at a stop, like an idle keep-alive connection (nothing is in flight on them)."""

    waiting: set[trio.CancelScope] = attrs.Factory(set)
    stopping: bool = False

    def stop(self) -> None:
        self.stopping = True
        for scope in self.waiting:
            scope.cancel()


async def _sniff(http: Callable[[trio.abc.Stream], Awaitable[None]],
                 channel: PeerChannelServer, idle_seconds: float, sniffing: _Sniffing,
                 stream: _TimedStream) -> None:
    """A connection to the peer listener: the peer channel when it opens with MAGIC,
    else HTTP (what was read to tell is read again by hypercorn). A connection that says
    nothing for `idle_seconds` (the keep-alive timeout) is closed, as hypercorn would, and
    so is one still saying nothing when the server stops."""
    first = b""
    try:
        with trio.move_on_after(idle_seconds) as waited:
            sniffing.waiting.add(waited)
            if sniffing.stopping:
                waited.cancel()
            try:
                while len(first) < len(MAGIC) and MAGIC.startswith(first):
                    chunk = await stream.receive_some(RECEIVE_BYTES)
                    if not chunk:
                        break
                    first += chunk
            finally:
                sniffing.waiting.discard(waited)
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError):
        waited.cancel()
    if waited.cancel_called:
        with trio.CancelScope(shield=True):
            await stream.aclose()
        return
    if first.startswith(MAGIC):
        stream.stop_clock()
        try:
            await channel.serve(stream.raw, first[len(MAGIC):])
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()
        return
    stream.unread(first)
    await http(stream)


async def serve(app: ASGIFramework, config: Config, gate: ConnectionGate, *,
                shutdown_trigger: Callable[..., Awaitable[None]],
                peer: tuple[int, PeerChannelServer] | None = None,
                task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """hypercorn (plain HTTP) on `config.bind`, through `gate`'s listeners. With `peer`
    (a port and its channel), connections to that port may be the peer channel's
    (web/peer.py)."""
    wrapped = wrap_app(app, config.wsgi_max_body_size, "asgi")
    lifespan_state: LifespanState = {}
    lifespan = Lifespan(wrapped, config, lifespan_state)
    context = WorkerContext(None)
    async with trio.open_nursery() as lifespan_nursery:
        await lifespan_nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        async with trio.open_nursery() as server_nursery:
            sockets = config.create_sockets()
            listeners = []
            peer_listeners = []
            binds = []
            for sock in sockets.insecure_sockets:
                sock.listen(config.backlog)
                listener = gate.listener(
                    trio.SocketListener(trio.socket.from_stdlib_socket(sock)))
                if peer is not None and sock.getsockname()[1] == peer[0]:
                    peer_listeners.append(listener)
                else:
                    listeners.append(listener)
                binds.append(f"http://{repr_socket_addr(sock.family, sock.getsockname())}")
            http = partial(_Connection, wrapped, config, context,
                           ConnectionState(lifespan_state.copy()))
            sniffing = _Sniffing()
            task_status.started(binds)
            try:
                async with trio.open_nursery(strict_exception_groups=True) as nursery:
                    nursery.start_soon(raise_shutdown, shutdown_trigger)
                    nursery.start_soon(raise_shutdown, context.terminate.wait)
                    nursery.start_soon(partial(trio.serve_listeners, http, listeners,
                                               handler_nursery=server_nursery))
                    if peer is not None and peer_listeners:
                        nursery.start_soon(partial(
                            trio.serve_listeners,
                            partial(_sniff, http, peer[1], config.keep_alive_timeout, sniffing),
                            peer_listeners, handler_nursery=server_nursery))
                    await trio.sleep_forever()
            except BaseExceptionGroup as error:
                _, other_errors = error.split((ShutdownError, KeyboardInterrupt))
                if other_errors is not None:
                    raise other_errors from None
            finally:
                await context.terminated.set()
                if peer is not None:
                    peer[1].close_idle()
                    sniffing.stop()
                server_nursery.cancel_scope.deadline = (trio.current_time()
                                                        + config.graceful_timeout)
        await lifespan.wait_for_shutdown()
        lifespan_nursery.cancel_scope.cancel()
