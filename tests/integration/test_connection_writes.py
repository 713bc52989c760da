"""The connection layer's two savings (web/connections.py): a response leaves in one write,
and the keep-alive clock is one task per connection whose deadline moves. What a client sees
must not change: keep-alive, its timeout, long polls, 100 Continue, HEAD, errors."""

from __future__ import annotations

from contextlib import asynccontextmanager
from functools import partial

import trio

from queen_trio.broker import open_broker
from tests.support.brokers import make_settings, serve_on_port


@asynccontextmanager
async def served(database_url, keep_alive_timeout=None):
    settings = make_settings(database_url)
    async with open_broker(settings, database_url) as broker, trio.open_nursery() as nursery:
        (url,) = await nursery.start(partial(serve_on_port, broker,
                                             keep_alive_timeout=keep_alive_timeout))
        host, port = url.removeprefix("http://").split(":")
        yield host, int(port)
        nursery.cancel_scope.cancel()


async def read_reply(stream: trio.abc.Stream, buffer: bytearray) -> bytes:
    """One response (the server always gives a content-length) off a keep-alive stream."""
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some(65536)
        assert chunk, "closed before a reply"
        buffer += chunk
    head_end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:head_end]).lower()
    length = 0
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    if head.startswith(b"http/1.1 204") or b"\r\nx-head: 1" in head:
        length = 0
    while len(buffer) < head_end + length:
        chunk = await stream.receive_some(65536)
        assert chunk
        buffer += chunk
    reply = bytes(buffer[:head_end + length])
    del buffer[:head_end + length]
    return reply


def request(method: str, path: str, body: bytes = b"", extra: str = "") -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}"
            "\r\n").encode() + body


async def test_each_response_leaves_in_one_write(database_url, monkeypatch):
    writes: list[bytes] = []
    clients: list[trio.SocketStream] = []
    real = trio.SocketStream.send_all

    async def recorded(self, data):  # type: ignore[no-untyped-def]
        if self not in clients:  # the server's side of the connection
            writes.append(bytes(data))
        await real(self, data)

    monkeypatch.setattr(trio.SocketStream, "send_all", recorded)
    async with served(database_url) as (host, port):
        stream = await trio.open_tcp_stream(host, port)
        clients.append(stream)
        buffer = bytearray()
        replies = []
        for method, path, body in [
                ("POST", "/api/v1/push", b'{"items":[{"queue":"w","payload":{"n":1}}]}'),
                ("GET", "/api/v1/pop/queue/w?wait=false&autoAck=true", b""),
                ("GET", "/api/v1/pop/queue/w?wait=false", b""),   # 204, no body
                ("GET", "/no/such/route", b""),
                ("POST", "/api/v1/push", b"not json")]:
            writes.clear()
            await stream.send_all(request(method, path, body))
            replies.append(await read_reply(stream, buffer))
            assert writes == [replies[-1]], (path, writes)
        assert [r.split(b" ", 2)[1] for r in replies] == [b"201", b"200", b"204", b"404", b"400"]
        await stream.aclose()


async def test_100_continue_is_sent_before_the_body(database_url):
    async with served(database_url) as (host, port):
        stream = await trio.open_tcp_stream(host, port)
        body = b'{"items":[{"queue":"c","payload":1}]}'
        await stream.send_all(request("POST", "/api/v1/push", b"",
                                      "Expect: 100-continue\r\n").replace(
            b"Content-Length: 0", b"Content-Length: %d" % len(body)))
        with trio.fail_after(5):
            interim = await stream.receive_some(65536)
        assert interim.startswith(b"HTTP/1.1 100")
        await stream.send_all(body)
        buffer = bytearray(interim[interim.index(b"\r\n\r\n") + 4:])
        assert (await read_reply(stream, buffer)).startswith(b"HTTP/1.1 201")
        await stream.aclose()


async def test_keep_alive_timeout_closes_an_idle_connection_but_not_a_busy_one(database_url):
    async with served(database_url, keep_alive_timeout=0.5) as (host, port):
        # Idle from the start: closed after the timeout.
        idle = await trio.open_tcp_stream(host, port)
        with trio.fail_after(10):
            assert await idle.receive_some(1) == b""
        # A long poll outlasts the timeout: answered, then the connection idles out.
        stream = await trio.open_tcp_stream(host, port)
        buffer = bytearray()
        started = trio.current_time()
        await stream.send_all(request("GET", "/api/v1/pop/queue/lp?wait=true&timeout=1500"))
        reply = await read_reply(stream, buffer)
        assert reply.startswith(b"HTTP/1.1 204")
        assert trio.current_time() - started >= 1.4
        # Kept alive between requests that come faster than the timeout.
        for _ in range(4):
            await trio.sleep(0.3)
            await stream.send_all(request("GET", "/health"))
            assert (await read_reply(stream, buffer)).startswith(b"HTTP/1.1 200")
        with trio.fail_after(10):
            assert await stream.receive_some(1) == b""
        await stream.aclose()
        await idle.aclose()


async def test_a_head_request_gets_its_headers_alone(database_url):
    async with served(database_url) as (host, port):
        stream = await trio.open_tcp_stream(host, port)
        await stream.send_all(request("HEAD", "/health") + request("GET", "/health"))
        data = b""
        with trio.fail_after(5):
            while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"}"):
                data += await stream.receive_some(65536)
        head, rest = data.split(b"\r\n\r\n", 1)
        assert rest.startswith(b"HTTP/1.1 200")
        await stream.aclose()


class _Spawned(trio.abc.Instrument):
    def __init__(self) -> None:
        self.names: list[str] = []

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.names.append(task.name)


async def test_a_long_poll_is_cancelled_at_its_hang_up_by_the_connection_with_no_task(
        database_url):
    """A request that waits (an ephemeral or a durable long poll) on a connection the server
    knows is cancelled by that connection when its client hangs up: no watcher task per
    long poll, whose teardown cost each answer a scheduler round (docs/performance.md). The
    hang-up still cancels it: a message pushed after it is not taken by the poll that left."""
    settings = make_settings(database_url)
    spawned = _Spawned()
    async with open_broker(settings, database_url) as broker, trio.open_nursery() as nursery:
        (url,) = await nursery.start(serve_on_port, broker)
        host, port = url.removeprefix("http://").split(":")
        with trio.fail_after(30):
            while not broker.ephemeral.owner:
                await trio.sleep(0.05)
        pusher = await trio.open_tcp_stream(host, int(port))
        pushed = bytearray()
        trio.lowlevel.add_instrument(spawned)
        try:
            # Answered: a parked ephemeral long poll, woken by a push.
            poll = await trio.open_tcp_stream(host, int(port))
            await poll.send_all(request(
                "GET", "/api/v1/ephemeral/pop?queue=hq&wait=true&timeout=60000&autoAck=true"))
            while broker.ephemeral.statistics().waiting < 1:
                await trio.sleep(0.01)
            await pusher.send_all(request("POST", "/api/v1/ephemeral/push",
                                          b'{"queue":"hq","messages":[{"payload":1}]}'))
            assert (await read_reply(pusher, pushed)).startswith(b"HTTP/1.1 201")
            answer = await read_reply(poll, bytearray())
            assert answer.startswith(b"HTTP/1.1 200") and b'"payload":1' in answer
            await poll.aclose()
            # Left: a parked long poll (ephemeral, then durable) whose client hangs up.
            for target, parked in [
                    ("/api/v1/ephemeral/pop?queue=hq&wait=true&timeout=60000",
                     lambda: broker.ephemeral.statistics().waiting),
                    ("/api/v1/pop/queue/hd?wait=true&timeout=60000",
                     lambda: broker.consumer.statistics().parked)]:
                gone = await trio.open_tcp_stream(host, int(port))
                await gone.send_all(request("GET", target))
                while parked() < 1:
                    await trio.sleep(0.01)
                await gone.aclose()
                with trio.fail_after(10):
                    while parked():
                        await trio.sleep(0.01)
        finally:
            trio.lowlevel.remove_instrument(spawned)
        assert not [name for name in spawned.names if "_watch" in name], spawned.names
        # The ephemeral poll that left took nothing: a message pushed now is there to pop.
        await pusher.send_all(request("POST", "/api/v1/ephemeral/push",
                                      b'{"queue":"hq","messages":[{"payload":2}]}'))
        assert (await read_reply(pusher, pushed)).startswith(b"HTTP/1.1 201")
        await pusher.send_all(request("GET", "/api/v1/ephemeral/pop?queue=hq&autoAck=true"))
        assert b'"payload":2' in await read_reply(pusher, pushed)
        await pusher.aclose()
        nursery.cancel_scope.cancel()


async def test_a_response_is_written_without_waiting_on_a_free_send_lock(database_url,
                                                                       monkeypatch):
    """hypercorn takes its connection's send lock with `async with`, a scheduler round
    before the bytes leave even when nobody holds it; here a free lock is taken at once
    (web/connections.py, its connection's `_write`). What the client reads is unchanged."""
    from hypercorn.trio.tcp_server import TCPServer

    send_locks: set[int] = set()
    waited: list[object] = []
    init, acquire = TCPServer.__init__, trio.Lock.acquire

    def recorded_init(self, *args):  # type: ignore[no-untyped-def]
        init(self, *args)
        send_locks.add(id(self.send_lock))

    async def recorded_acquire(self):  # type: ignore[no-untyped-def]
        if id(self) in send_locks:
            waited.append(self)
        await acquire(self)

    monkeypatch.setattr(TCPServer, "__init__", recorded_init)
    monkeypatch.setattr(trio.Lock, "acquire", recorded_acquire)
    async with served(database_url) as (host, port):
        stream = await trio.open_tcp_stream(host, port)
        buffer = bytearray()
        for method, path, body in [
                ("POST", "/api/v1/ephemeral/push", b'{"queue":"l","messages":[{"payload":1}]}'),
                ("GET", "/api/v1/ephemeral/pop?queue=l&wait=true&timeout=5000&autoAck=true",
                 b""),
                ("GET", "/api/v1/pop/queue/none?wait=false", b"")]:
            await stream.send_all(request(method, path, body))
            reply = await read_reply(stream, buffer)
            assert reply.split(b" ", 2)[1] in (b"201", b"200", b"204"), reply
        await stream.aclose()
    assert send_locks
    assert waited == []
