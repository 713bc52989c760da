"""Memory has bounds: wake events live while someone waits, the joined-groups cache is
bounded and forgets deleted queues, every name is capped, pushes wait behind a byte budget
(issue 8, point 5)."""

from __future__ import annotations

import pytest
import trio

from queen_trio.broker import open_broker
from queen_trio.consume.pop import Consumer, parse_pop
from tests.support.brokers import make_settings
from tests.support.consuming import park_pop, pop, push
from tests.support.db import db_fetchval

LONG = "q" * 256


async def test_wake_events_live_only_while_someone_waits(client, broker):
    for n in range(50):
        assert await pop(client, f"nobody-{n}") is None
    assert broker.wakeups.statistics().watched_queues == 0
    async with trio.open_nursery() as nursery:
        result = park_pop(nursery, client, "waited")
        while broker.wakeups.statistics().watched_queues == 0:
            await trio.sleep(0.01)
        await push(client, "waited", {"n": 1})
    assert [m["data"] for m in result["reply"]["messages"]] == [{"n": 1}]
    assert broker.wakeups.statistics().watched_queues == 0


async def test_joined_groups_are_bounded_and_forget_deleted_queues(client, broker, nursery):
    for name in ("a", "b", "c"):
        await push(client, name, 1)
    consumer = Consumer(broker.db, broker.cipher, broker.wakeups, broker.settings, max_joined=2)
    await nursery.start(consumer.run)
    for name in ("a", "b", "c", "c"):
        await consumer.pop(parse_pop({}, broker.settings, queue=name))
    assert consumer.statistics().joined_groups == 2
    # The broker's own consumer forgets a queue that is deleted.
    await pop(client, "a")
    before = broker.consumer.statistics().joined_groups
    assert (await client.delete("/api/v1/resources/queues/a")).status_code == 200
    assert broker.consumer.statistics().joined_groups == before - 1


@pytest.mark.parametrize("method,path,params", [
    ("GET", "/api/v1/pop", {"namespace": LONG}),
    ("GET", "/api/v1/pop", {"task": LONG}),
    ("GET", "/api/v1/pop/queue/ok", {"consumerGroup": LONG}),
    ("GET", f"/api/v1/pop/queue/{LONG}", {}),
    ("GET", f"/api/v1/pop/queue/ok/partition/{LONG}", {}),
    ("GET", "/api/v1/dlq", {"queue": LONG}),
    ("GET", "/api/v1/dlq", {"consumerGroup": LONG}),
    ("GET", f"/api/v1/traces/by-name/{LONG}", {}),
    ("DELETE", f"/api/v1/resources/queues/{LONG}", {}),
])
async def test_every_name_is_capped_at_255_characters(client, method, path, params):
    r = await client.request(method, path, params=params)
    assert r.status_code == 400, r.text
    assert "at most 255 characters" in r.json()["error"]


async def test_a_push_past_the_pending_byte_budget_stores_nothing(database_url):
    import httpx

    from queen_trio.web.routes import create_app

    settings = make_settings(database_url, max_pending_bytes=4096)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            items = [{"queue": "budget", "payload": {"pad": "x" * 1000}} for _ in range(5)]
            r = await client.post("/api/v1/push", json={"items": items})
            assert r.status_code == 503
            assert r.headers["retry-after"] == "1"
            assert [(e["status"], e["error"]) for e in r.json()] == [
                ("failed", "broker overloaded")] * 5
            assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0
            assert broker.spool.statistics().pending == 0
            r = await client.post("/api/v1/push", json={"items": items[:2]})
            assert r.status_code == 201
            assert broker.lane.statistics().pending_bytes == 0
