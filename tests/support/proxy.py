"""A TCP proxy in front of PostgreSQL that can lose a commit's reply, for real.

Armed with `drop_next_reply()`, it forwards the next client message batch that executes a
statement (an Execute message: extended protocol), waits until the server has answered it in
full (ReadyForQuery, so the implicit transaction has committed), and then drops that answer and
closes both sides. The client sees its connection die after COMMIT: the ambiguity a lost reply
leaves.
"""

from __future__ import annotations

import struct

import trio

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104


class ReplyDroppingProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self._target = (target_host, target_port)
        self._armed = False
        self._skip = 0
        self.dropped = trio.Event()

    def drop_next_reply(self, *, after: int = 0) -> None:
        """Lose the reply to the next statement, or to the one `after` statements later."""
        self._skip = after
        self._armed = True

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        server = await trio.open_tcp_stream(*self._target)
        async with client, server, trio.open_nursery() as nursery:
            connection = _Connection()
            nursery.start_soon(self._upstream, client, server, connection, nursery)
            nursery.start_soon(self._downstream, server, client, connection, nursery)

    async def _upstream(self, client: trio.SocketStream, server: trio.SocketStream,
                        connection: _Connection, nursery: trio.Nursery) -> None:
        while data := await _receive(client):
            executes = connection.client_messages(data)
            if self._armed and executes:
                if self._skip:
                    self._skip -= 1
                else:
                    self._armed = False
                    connection.dropping = True
            await server.send_all(data)
        nursery.cancel_scope.cancel()

    async def _downstream(self, server: trio.SocketStream, client: trio.SocketStream,
                          connection: _Connection, nursery: trio.Nursery) -> None:
        while data := await _receive(server):
            if connection.dropping:
                if connection.server_ready(data):
                    # Committed and answered in full: lose the answer, cut both sides.
                    self.dropped.set()
                    nursery.cancel_scope.cancel()
                    return
                continue
            await client.send_all(data)
        nursery.cancel_scope.cancel()


async def _receive(stream: trio.SocketStream) -> bytes:
    try:
        return bytes(await stream.receive_some(65536))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b""


class _Connection:
    """Just enough of the wire protocol to find message boundaries."""

    def __init__(self) -> None:
        self._client = b""
        self._server = b""
        self._started = False  # past the untyped startup messages
        self.dropping = False

    def client_messages(self, data: bytes) -> bool:
        """Feed client bytes; whether they held an Execute message."""
        self._client += data
        executes = False
        while True:
            if not self._started:
                if len(self._client) < 8:
                    return executes
                length, code = struct.unpack_from(">II", self._client)
                if len(self._client) < length:
                    return executes
                self._client = self._client[length:]
                if code not in (_SSL_REQUEST, _GSS_REQUEST):
                    self._started = True
                continue
            if len(self._client) < 5:
                return executes
            kind = self._client[:1]
            (length,) = struct.unpack_from(">I", self._client, 1)
            if len(self._client) < 1 + length:
                return executes
            executes = executes or kind == b"E"
            self._client = self._client[1 + length:]

    def server_ready(self, data: bytes) -> bool:
        """Feed server bytes; whether a ReadyForQuery arrived."""
        self._server += data
        while len(self._server) >= 5:
            kind = self._server[:1]
            (length,) = struct.unpack_from(">I", self._server, 1)
            if len(self._server) < 1 + length:
                break
            self._server = self._server[1 + length:]
            if kind == b"Z":
                return True
        return False
