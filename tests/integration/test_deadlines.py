"""Everything shielded has a deadline: a busy pool is overload (503, Retry-After, never
spooled), and SIGTERM ends a broker whose PostgreSQL is frozen (issue 8, point 6)."""

from __future__ import annotations

import httpx
import trio

from queen_trio.broker import open_broker
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.db import db_fetchval


async def test_a_pool_with_no_free_connection_is_overload_not_an_outage(database_url):
    settings = make_settings(database_url, db_pool_size=2, push_shards=1,
                             db_connection_timeout_ms=300)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            assert (await client.post("/api/v1/push", json={"items": [
                {"queue": "busy", "payload": 0}]})).status_code == 201

            async def hold():
                await broker.db.call(lambda conn: conn.execute("SELECT pg_sleep(3)"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                nursery.start_soon(hold)
                while broker.db.statistics().in_flight < 2:
                    await trio.sleep(0.01)
                r = await client.post("/api/v1/push", json={"items": [
                    {"queue": "busy", "payload": 1}]})
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "1"
                (entry,) = r.json()
                assert entry["status"] == "failed"
                assert entry["error"].startswith("broker overloaded")
                assert broker.spool.statistics().pending == 0
                r = await client.get("/api/v1/pop/queue/busy")
                assert r.status_code == 503 and r.headers["retry-after"] == "1"
                assert r.json()["error"].startswith("broker overloaded")
        assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 1
