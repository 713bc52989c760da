"""Bad input on the push route: a 400 (or 413) with {"error"}, and nothing stored."""

from __future__ import annotations

import pytest

from tests.support.brokers import make_settings
from tests.support.db import db_fetchval

GOOD = '{"queue":"v","payload":1}'

BAD_BODIES = [
    (b"", "Empty request body"),
    (b"   ", "Empty request body"),
    (b"{not json", "Invalid JSON"),
    (b'{"items":[' + GOOD.encode() + b',{"queue":"v","payload":NaN}]}', "Invalid JSON"),
    (b'{"items":[{"queue":"v","payload":Infinity}]}', "Invalid JSON"),
    (b'{"items":[{"queue":"v","payload":-Infinity}]}', "Invalid JSON"),
    (b'{"items":[{"queue":"v","payload":"\xff\xfe"}]}', "Invalid JSON"),
    (b'{"items":[{"queue":"v","payload":"\xc3"}]}', "Invalid JSON"),
    (b'{"items":[{"queue":"v","payload":1}]} trailing', "Invalid JSON"),
    (b'[]', "must be a JSON object"),
    (b'"items"', "must be a JSON object"),
    (b"{}", "items array is required"),
    (b'{"items":{}}', "items array is required"),
    (b'{"items":null}', "items array is required"),
    (b'{"items":"x"}', "items array is required"),
    (b'{"items":[' + GOOD.encode() + b',5]}', "Item 1 must be an object"),
    (b'{"items":[null]}', "Item 0 must be an object"),
    (b'{"items":[{"payload":1}]}', "Queue must be a string"),
    (b'{"items":[{"queue":5,"payload":1}]}', "Queue must be a string"),
    (b'{"items":[{"queue":null,"payload":1}]}', "Queue must be a string"),
    (b'{"items":[{"queue":"","payload":1}]}', "Queue name must not be empty"),
    (b'{"items":[{"queue":"v","partition":7,"payload":1}]}', "Partition must be a string"),
    (b'{"items":[{"queue":"v","partition":"","payload":1}]}', "Partition name must not be empty"),
    (b'{"items":[{"queue":"v","transactionId":12,"payload":1}]}', "TransactionId must be a string"),
    (b'{"items":[{"queue":"v","transactionId":["a"],"payload":1}]}', "TransactionId must be a string"),
    (b'{"items":[{"queue":"v","data":{"a":1}}]}', "payload is required (item 0): the field is "
                                                   "named payload; data is what pops return"),
    (b'{"items":[' + GOOD.encode() + b',{"queue":"v"}]}', "payload is required (item 1)"),
    (b'{"items":[{"queue":"' + b"q" * 256 + b'","payload":1}]}', "at most 255"),
    (b'{"items":[{"queue":"v","transactionId":"' + b"t" * 256 + b'","payload":1}]}', "at most 255"),
    (b'{"items":[{"queue":"v\\u0000x","payload":1}]}', "NUL"),
]


@pytest.mark.parametrize(("body", "message"), BAD_BODIES)
async def test_bad_push_body_is_400_and_stores_nothing(client, broker, body, message):
    r = await client.post("/api/v1/push", content=body,
                          headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert message in error
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.queues") == 0


async def test_body_over_the_limit_is_413(database_url):
    import httpx

    from queen_trio.broker import open_broker
    from queen_trio.web.routes import create_app

    settings = make_settings(database_url, max_body_bytes=2048)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            big = '{"items":[{"queue":"v","payload":"' + "x" * 4096 + '"}]}'
            r = await client.post("/api/v1/push", content=big)
            assert r.status_code == 413
            assert "exceeds 2048 bytes" in r.json()["error"]

            # Without a content-length (a chunked upload) the limit still holds.
            r = await asgi_post(create_app(broker), "/api/v1/push", [b"x" * 1024] * 4)
            assert r[0] == 413 and b"exceeds 2048 bytes" in r[1]
            small = await client.post("/api/v1/push", json={"items": [{"queue": "v", "payload": 1}]})
            assert small.status_code == 201
        assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 1


async def asgi_post(app, path, chunks):
    """Drive the ASGI app directly with a body in chunks and no content-length."""
    pending = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
               for i, c in enumerate(chunks)]
    sent = []

    async def receive():
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": [(b"content-type", b"application/json")]}
    await app(scope, receive, send)
    return sent[0]["status"], sent[1]["body"]


async def test_wrong_method_unknown_route_and_options(client):
    r = await client.get("/api/v1/push")
    assert r.status_code == 405 and "error" in r.json()
    r = await client.get("/api/v1/nothing-here")
    assert r.status_code == 404 and "error" in r.json()
    r = await client.options("/api/v1/push")
    assert r.status_code == 204 and r.content == b""
    # No origin is listed by default: no CORS headers (tests/integration/test_cors.py).
    assert "access-control-allow-origin" not in r.headers


# Every route of the contract's index (contract.md, route index), with concrete paths.
CONTRACT_ROUTES = [
    ("GET", "/api/v1/resources/overview"), ("GET", "/api/v1/resources/queues"),
    ("GET", "/api/v1/resources/queues/q"), ("GET", "/api/v1/resources/queues/q/depth"),
    ("GET", "/api/v1/resources/partitions"), ("GET", "/api/v1/resources/namespaces"),
    ("GET", "/api/v1/resources/tasks"), ("DELETE", "/api/v1/resources/queues/q"),
    ("GET", "/api/v1/messages"),
    ("GET", "/api/v1/messages/00000000-0000-0000-0000-000000000001/tx"),
    ("DELETE", "/api/v1/messages/00000000-0000-0000-0000-000000000001/tx"),
    ("POST", "/api/v1/messages/00000000-0000-0000-0000-000000000001/tx/retry"),
    ("GET", "/api/v1/dlq"), ("GET", "/api/v1/consumer-groups"),
    ("GET", "/api/v1/consumer-groups/lagging"), ("GET", "/api/v1/consumer-groups/g"),
    ("DELETE", "/api/v1/consumer-groups/g"), ("DELETE", "/api/v1/consumer-groups/g/queues/q"),
    ("POST", "/api/v1/consumer-groups/g/subscription"),
    ("POST", "/api/v1/consumer-groups/g/queues/q/seek"),
    ("POST", "/api/v1/consumer-groups/g/queues/q/partitions/p/seek"),
    ("GET", "/api/v1/traces/names"), ("GET", "/api/v1/status"), ("GET", "/api/v1/status/queues"),
    ("GET", "/api/v1/status/queues/q"), ("GET", "/api/v1/status/queues/q/messages"),
    ("GET", "/api/v1/status/analytics"), ("GET", "/api/v1/status/buffers"),
    *(("GET", f"/api/v1/analytics/{name}") for name in (
        "system-metrics", "worker-metrics", "queue-lag", "queue-ops", "queue-parked-replicas",
        "retention", "postgres-stats")),
    ("POST", "/api/v1/stats/refresh"), ("GET", "/api/v1/auth/whoami"), ("GET", "/health"),
    ("GET", "/metrics"), ("GET", "/metrics/prometheus"),
]


@pytest.mark.parametrize(("method", "path"), CONTRACT_ROUTES)
async def test_every_contract_route_is_served(client, method, path):
    r = await client.request(method, path)
    assert r.status_code not in (405, 501), r.text
    if r.status_code == 404:
        assert not r.json()["error"].startswith("Route not found"), r.text
