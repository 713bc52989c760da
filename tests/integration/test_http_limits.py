"""HTTP limits: NUL in stored text, JSON depth, the whole-request read deadline, the
connection cap, and a bad ack in a fused batch (issue 8, point 8)."""

from __future__ import annotations

import contextlib
import json

import httpx
import pytest
import trio
import trio.testing

NUL = "\u0000"
PARTITION = "00000000-0000-0000-0000-000000000001"


def body(value):
    return json.dumps(value).encode()


@pytest.mark.parametrize("method,path,content", [
    ("GET", "/api/v1/pop/queue/a%00b", None),
    ("GET", "/api/v1/pop/queue/ok?consumerGroup=g%00", None),
    ("GET", "/api/v1/pop?namespace=n%00", None),
    ("GET", "/api/v1/pop/queue/ok?subscriptionMode=all%00", None),
    ("GET", "/api/v1/dlq?queue=q%00", None),
    ("GET", "/api/v1/traces/by-name/t%00", None),
    ("GET", f"/api/v1/traces/{PARTITION}/tx%00", None),
    ("DELETE", "/api/v1/resources/queues/q%00", None),
    ("POST", "/api/v1/push", body({"items": [{"queue": f"q{NUL}", "payload": 1}]})),
    ("POST", "/api/v1/push", body({"items": [{"queue": "q", "partition": f"p{NUL}",
                                              "payload": 1}]})),
    ("POST", "/api/v1/push", body({"items": [{"queue": "q", "transactionId": f"t{NUL}",
                                              "payload": 1}]})),
    ("POST", "/api/v1/ack", body({"transactionId": "t", "partitionId": PARTITION,
                                  "status": "failed", "error": f"e{NUL}"})),
    ("POST", "/api/v1/ack", body({"transactionId": f"t{NUL}", "partitionId": PARTITION})),
    ("POST", "/api/v1/ack", body({"transactionId": "t", "partitionId": PARTITION,
                                  "consumerGroup": f"g{NUL}"})),
    ("POST", "/api/v1/ack/batch", body({"acknowledgments": [
        {"transactionId": "t", "partitionId": PARTITION, "status": "dlq",
         "error": f"e{NUL}"}]})),
    ("POST", "/api/v1/transaction", body({"operations": [
        {"type": "push", "items": [{"queue": f"q{NUL}", "payload": 1}]}]})),
    ("POST", "/api/v1/transaction", body({"operations": [
        {"type": "ack", "transactionId": "t", "partitionId": PARTITION,
         "error": f"e{NUL}", "status": "failed"}]})),
    ("POST", "/api/v1/traces", body({"transactionId": "t", "partitionId": PARTITION,
                                     "data": {}, "eventType": f"e{NUL}"})),
    ("POST", "/api/v1/traces", body({"transactionId": "t", "partitionId": PARTITION,
                                     "data": {}, "traceNames": [f"n{NUL}"]})),
    ("POST", "/api/v1/configure", body({"queue": f"q{NUL}"})),
    ("POST", "/api/v1/configure", body({"queue": "q", "namespace": f"n{NUL}"})),
])
async def test_a_nul_in_text_is_a_400(client, method, path, content):
    r = await client.request(method, path, content=content,
                             headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert "NUL" in r.json()["error"]


@pytest.mark.parametrize("method,path", [
    ("POST", "/api/v1/push"), ("POST", "/api/v1/configure"), ("POST", "/api/v1/ack"),
    ("POST", "/api/v1/transaction"), ("POST", "/api/v1/traces"),
    ("POST", "/api/v1/lease/00000000-0000-0000-0000-000000000001/extend"),
])
@pytest.mark.parametrize("depth", [129, 1000])
async def test_json_deeper_than_128_levels_is_a_400(client, method, path, depth):
    if path == "/api/v1/push":
        content = b'{"items":[{"queue":"deep","payload":' + b"[" * depth + b"]" * depth + b"}]}"
    else:
        content = b'{"x":' + b"[" * depth + b"]" * depth + b"}"
    r = await client.request(method, path, content=content)
    assert r.status_code == 400, r.text
    assert "nested" in r.json()["error"]


async def test_json_of_128_levels_and_brackets_in_strings_are_fine(client):
    payload = b"[" * 120 + b'"[[[[{{{{\\"[[[["' + b"]" * 120
    items = b",".join(b'{"queue":"deep","payload":%s}' % payload for _ in range(3))
    r = await client.post("/api/v1/push", content=b'{"items":[' + items + b"]}")
    assert r.status_code == 201, r.text


# -- slow clients and the connection cap (a real socket, the broker's own serving) -----------

@contextlib.asynccontextmanager
async def served(database_url, **overrides):
    from queen_trio.broker import open_broker
    from tests.support.brokers import make_settings, serve_on_port

    settings = make_settings(database_url, **overrides)
    async with open_broker(settings, database_url) as broker, trio.open_nursery() as nursery:
        (url,) = await nursery.start(serve_on_port, broker)
        yield broker, url
        nursery.cancel_scope.cancel()


async def trickle(stream, data: bytes, every: float) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        for byte in data:
            await stream.send_all(bytes([byte]))
            await trio.sleep(every)


@pytest.mark.parametrize("stage", ["headers", "body"])
async def test_a_request_that_trickles_in_gets_408_and_is_closed(database_url, stage):
    from tests.support.sockets import read_response

    async with served(database_url, request_read_timeout_ms=1000) as (_, url):
        parts = url.removeprefix("http://").split(":")
        stream = await trio.open_tcp_stream(parts[0], int(parts[1]))
        head = b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 60\r\n\r\n"
        body = b'{"items":[{"queue":"slow","payload":"' + b"x" * 19 + b'"}]}'
        async with stream, trio.open_nursery() as nursery:
            if stage == "headers":
                nursery.start_soon(trickle, stream, head + body, 0.3)
            else:
                await stream.send_all(head)
                nursery.start_soon(trickle, stream, body, 0.3)  # each read is quick
            with trio.fail_after(20):
                reply = await read_response(stream)
            nursery.cancel_scope.cancel()
        assert reply.startswith(b"HTTP/1.1 408 ")
        assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"].startswith(
            "Request not received within 1 s")


async def test_a_long_poll_longer_than_the_read_timeout_is_not_cut_short(database_url):
    # The clock covers reading the request, not serving it: a long poll of 2.5 s under a
    # 1 s read timeout answers 204 at its own timeout, on a connection that stays usable.
    async with served(database_url, request_read_timeout_ms=1000) as (_, url), \
            httpx.AsyncClient(base_url=url, timeout=30) as client:
        started = trio.current_time()
        parked = await client.get("/api/v1/pop/queue/slow", params={
            "wait": "true", "timeout": "2500"})
        assert parked.status_code == 204, parked.text
        assert trio.current_time() - started >= 2.4
        assert (await client.get("/health")).status_code == 200


async def test_past_the_connection_cap_clients_wait_in_the_backlog(database_url, caplog):
    import logging

    from tests.support.sockets import open_request

    caplog.set_level(logging.WARNING, logger="queen_trio.connections")
    async with served(database_url, max_connections=2) as (broker, url):
        parts = url.removeprefix("http://").split(":")
        idle = [await trio.open_tcp_stream(parts[0], int(parts[1])) for _ in range(2)]
        waiting = await open_request(url, "/health", body=b"")
        await trio.testing.wait_all_tasks_blocked(cushion=0.2)
        with trio.move_on_after(0):
            assert not await waiting.receive_some(1), "answered past the cap"
        await idle[0].aclose()
        with trio.fail_after(20):
            reply = await read_response_head(waiting)
        assert reply.startswith(b"HTTP/1.1 200")
        await idle[1].aclose()
        await waiting.aclose()
    warnings = [r for r in caplog.records if "connection limit reached" in r.getMessage()]
    assert len(warnings) == 1


async def read_response_head(stream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        data += chunk
    return data


async def test_a_bad_ack_costs_its_neighbours_nothing(client, broker):
    from tests.support.consuming import pop, push

    await push(client, "fused", *range(6))
    reply = await pop(client, "fused", batch=6)
    results: dict[int, int] = {}

    async def ack(n, message, error=None):
        r = await client.post("/api/v1/ack", json={
            "transactionId": message["transactionId"], "partitionId": message["partitionId"],
            "leaseId": message["leaseId"], "status": "failed" if error else "completed",
            "error": error})
        results[n] = r.status_code

    async with trio.open_nursery() as nursery:
        for n, message in enumerate(reply["messages"][:5]):
            nursery.start_soon(ack, n, message)
        nursery.start_soon(ack, 5, reply["messages"][5], f"bad{NUL}")
    assert results[5] == 400
    assert all(results[n] == 200 for n in range(5))
    assert broker.ack_lane.statistics().splits == 0
