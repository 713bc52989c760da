"""Relays to the owner: keep-alive HTTP/1.1 connections to peer listeners.

A relay is one request and its answer between two broker processes, both ours, both served
by hypercorn, whose replies always carry a Content-Length. A general client (httpx) spends
about a millisecond of CPU a request on what this does in tens of microseconds, and the
relay sits on the ephemeral round trip's hot path (bench/ephemeral.py).
"""

from __future__ import annotations

import attrs
import trio

MAX_IDLE_PER_PEER = 32
MAX_HEAD_BYTES = 64 * 1024


class PeerUnreachable(Exception):
    """The peer could not be reached, or hung up before it answered."""


@attrs.frozen
class PeerReply:
    status: int
    headers: dict[bytes, bytes]
    body: bytes


class _Connection:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def exchange(self, request: bytes) -> tuple[PeerReply, bool]:
        """The reply, and whether the connection may be used again."""
        await self.stream.send_all(request)
        while b"\r\n\r\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise PeerUnreachable("the peer closed the connection")
            self.buffer += chunk
            if len(self.buffer) > MAX_HEAD_BYTES:
                raise PeerUnreachable("the peer's reply head is too large")
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        try:
            status = int(lines[0].split(b" ", 2)[1])
        except (IndexError, ValueError):
            raise PeerUnreachable("the peer's reply is not HTTP/1.1") from None
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get(b"content-length", b"0") or b"0")
        while len(rest) < length:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise PeerUnreachable("the peer closed the connection mid-reply")
            rest += chunk
        self.buffer = rest[length:]
        reusable = headers.get(b"connection", b"").lower() != b"close"
        return PeerReply(status, headers, rest[:length]), reusable


class PeerPool:
    """Idle keep-alive connections per peer address (`host:port`)."""

    def __init__(self) -> None:
        self._idle: dict[str, list[_Connection]] = {}
        self.connects = 0

    async def request(self, address: str, method: str, target: str,
                      headers: dict[str, str], body: bytes, *, within: float) -> PeerReply:
        head = [f"{method} {target} HTTP/1.1", f"host: {address}",
                f"content-length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        with trio.move_on_after(within) as deadline:
            idle = self._idle.get(address)
            while idle:
                conn = idle.pop()
                try:
                    reply, reusable = await conn.exchange(request)
                except (OSError, trio.BrokenResourceError, PeerUnreachable):
                    # An idle connection the peer closed meanwhile: try another.
                    await _close(conn)
                    continue
                except BaseException:
                    await _close(conn)
                    raise
                await self._keep(address, conn, reusable)
                return reply
            conn = await self._connect(address)
            try:
                reply, reusable = await conn.exchange(request)
            except (OSError, trio.BrokenResourceError) as exc:
                await _close(conn)
                raise PeerUnreachable(str(exc) or type(exc).__name__) from None
            except BaseException:
                await _close(conn)
                raise
            await self._keep(address, conn, reusable)
            return reply
        assert deadline.cancelled_caught
        raise PeerUnreachable(f"no answer from {address} within {within:g} s")

    async def _connect(self, address: str) -> _Connection:
        host, _, port = address.rpartition(":")
        try:
            stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        except (OSError, ValueError) as exc:
            raise PeerUnreachable(f"cannot reach {address}: {exc}") from None
        self.connects += 1
        return _Connection(stream)

    async def _keep(self, address: str, conn: _Connection, reusable: bool) -> None:
        idle = self._idle.setdefault(address, [])
        if reusable and len(idle) < MAX_IDLE_PER_PEER:
            idle.append(conn)
        else:
            await _close(conn)

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                await _close(conn)
        self._idle = {}


async def _close(conn: _Connection) -> None:
    with trio.CancelScope(shield=True):
        await conn.stream.aclose()
