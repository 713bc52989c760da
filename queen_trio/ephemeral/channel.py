"""The peer channel: how a broker process relays an ephemeral request to the rings' owner
(docs/ephemeral.md#the-peer-channel).

A relay used to be a second HTTP request, served by hypercorn at the owner: h11, the ASGI
events and an app task on both ends, about 2.5 times the CPU of the request served where it
arrived (docs/performance.md). On the peer channel a relay is one frame each way on a
kept-alive TCP connection to the owner's peer listener (the address it already advertises):
a 4-byte big-endian length, then a msgpack array. A connection opens with MAGIC, which no
HTTP request starts with, so the peer listener still answers HTTP (`/health`, the ephemeral
routes) on the same port. One request is in flight per connection; a relay that is
cancelled (its client hung up, its deadline passed) closes its connection, which is how the
owner learns that a relayed long poll lost its caller.

What a relay carries is what the HTTP relay carried: the method, the path and query, the
caller's credentials and the member's secret (checked by the owner as before), the body.
"""

from __future__ import annotations

import struct

import msgspec
import trio

MAGIC = b"QUEEN-TRIO-PEER/1\n"
LENGTH = struct.Struct(">I")
# A reply frame's ceiling on the relaying side. The owner's side reads request frames under
# QUEEN_MAX_BODY_BYTES plus FRAME_OVERHEAD_BYTES (web/peer.py): a frame is read before its
# sender is known, so its size must not exceed what an HTTP body may.
MAX_FRAME_BYTES = 1 << 30
# The method, the target and the headers around a relayed body.
FRAME_OVERHEAD_BYTES = 1 << 16
MAX_IDLE_PER_PEER = 32
RECEIVE_BYTES = 65536


class PeerUnreachable(Exception):
    """The peer could not be reached, or hung up before it answered."""


class ChannelError(Exception):
    """The other end broke the channel's framing."""


class RelayRequest(msgspec.Struct, array_like=True, frozen=True):
    method: str
    target: str  # the path and query, as the client sent them
    headers: dict[str, str]
    body: bytes


class RelayReply(msgspec.Struct, array_like=True, frozen=True):
    status: int
    retry_after: bytes | None
    body: bytes


_encode = msgspec.msgpack.Encoder().encode
_requests = msgspec.msgpack.Decoder(RelayRequest)
_replies = msgspec.msgpack.Decoder(RelayReply)


def encode(message: RelayRequest | RelayReply) -> bytes:
    payload = _encode(message)
    return LENGTH.pack(len(payload)) + payload


def decode_request(frame: bytes) -> RelayRequest:
    try:
        return _requests.decode(frame)
    except msgspec.DecodeError as exc:
        raise ChannelError(f"not a relay request: {exc}") from None


def decode_reply(frame: bytes) -> RelayReply:
    try:
        return _replies.decode(frame)
    except msgspec.DecodeError as exc:
        raise ChannelError(f"not a relay reply: {exc}") from None


class Frames:
    """Length-prefixed frames over a stream (bytes already read from it come first)."""

    def __init__(self, stream: trio.abc.Stream, buffered: bytes = b"", *,
                 limit: int = MAX_FRAME_BYTES) -> None:
        self.stream = stream
        self._buffer = bytearray(buffered)
        self._limit = limit

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def receive(self) -> bytes | None:
        """The next frame; None when the other end closed between frames."""
        buffer = self._buffer
        while len(buffer) < LENGTH.size:
            if not await self._fill():
                if buffer:
                    raise ChannelError("the connection closed mid-frame")
                return None
        (size,) = LENGTH.unpack_from(buffer)
        if size > self._limit:
            raise ChannelError(f"a frame of {size} bytes, over {self._limit}")
        end = LENGTH.size + size
        while len(buffer) < end:
            if not await self._fill():
                raise ChannelError("the connection closed mid-frame")
        frame = bytes(buffer[LENGTH.size:end])
        del buffer[:end]
        return frame

    async def _fill(self) -> bool:
        chunk = await self.stream.receive_some(RECEIVE_BYTES)
        if not chunk:
            return False
        self._buffer += chunk
        return True

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.stream.aclose()


class ChannelPool:
    """The relaying side: idle connections to each peer (`host:port`), one request in flight
    on each."""

    def __init__(self) -> None:
        self._idle: dict[str, list[Frames]] = {}
        self.connects = 0
        self.requests = 0
        self.failures = 0

    def idle(self) -> int:
        return sum(len(idle) for idle in self._idle.values())

    async def request(self, address: str, request: RelayRequest, *,
                      within: float) -> RelayReply:
        data = encode(request)
        with trio.move_on_after(within) as deadline:
            idle = self._idle.get(address)
            while idle:
                conn = idle.pop()
                try:
                    reply = await _exchange(conn, data)
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                        ChannelError):
                    # An idle connection the peer closed meanwhile: try another.
                    await conn.aclose()
                    continue
                except BaseException:
                    await conn.aclose()  # cancelled mid-request: never reused
                    raise
                await self._keep(address, conn)
                self.requests += 1
                return reply
            conn = await self._connect(address)
            try:
                reply = await _exchange(conn, MAGIC + data)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                    ChannelError) as exc:
                await conn.aclose()
                self.failures += 1
                raise PeerUnreachable(str(exc) or type(exc).__name__) from None
            except BaseException:
                await conn.aclose()
                raise
            await self._keep(address, conn)
            self.requests += 1
            return reply
        assert deadline.cancelled_caught
        self.failures += 1
        raise PeerUnreachable(f"no answer from {address} within {within:g} s")

    async def _connect(self, address: str) -> Frames:
        host, _, port = address.rpartition(":")
        try:
            stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        except (OSError, ValueError) as exc:
            self.failures += 1
            raise PeerUnreachable(f"cannot reach {address}: {exc}") from None
        self.connects += 1
        return Frames(stream)

    async def _keep(self, address: str, conn: Frames) -> None:
        idle = self._idle.setdefault(address, [])
        if len(idle) < MAX_IDLE_PER_PEER and not conn.buffered:
            idle.append(conn)
        else:  # over the cap, or holding bytes nobody asked for
            await conn.aclose()

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                await conn.aclose()
        self._idle = {}


async def _exchange(conn: Frames, data: bytes) -> RelayReply:
    await conn.send(data)
    frame = await conn.receive()
    if frame is None:
        raise ChannelError("the peer closed the connection")
    return decode_reply(frame)
