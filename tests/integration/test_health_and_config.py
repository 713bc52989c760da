"""GET /health, migrations, and configuration from the environment."""

from __future__ import annotations

import trio
import trio_asyncio

from queen_trio.storage import sql
from queen_trio.storage.schema import migrate
from tests.support.db import db_fetchval
from tests.support.outage import admin_execute, database_cut_off


async def test_health_is_200_when_the_database_answers(client):
    r = await client.get("/health")
    assert r.status_code == 200
    assert r.json()["status"] == "healthy"
    assert r.json()["database"] == "connected"


async def test_health_is_503_when_the_database_does_not(client, broker, admin_url):
    async with database_cut_off(admin_url, broker.settings.database_url):
        r = await client.get("/health")
        assert r.status_code == 503
        assert r.json() == {**r.json(), "status": "unhealthy", "database": "disconnected"}
        # A push during the outage is spooled (fsynced) and answered `buffered`.
        r = await client.post("/api/v1/push", json={"items": [{"queue": "h", "payload": 1}]})
        assert r.status_code == 201
        assert r.json()[0]["status"] == "buffered"
        status = (await client.get("/api/v1/status/buffers")).json()
        assert status["pending"] == 1 and status["dbHealthy"] is False
    with trio.fail_after(20):
        while (await client.get("/health")).status_code != 200:
            await trio.sleep(0.1)
        while (await client.get("/api/v1/status/buffers")).json()["pending"]:
            await trio.sleep(0.1)
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 1


async def test_migrations_are_idempotent_and_safe_concurrently(admin_url):
    name = "queen_migrate_race"
    async with trio_asyncio.open_loop():
        async def admin(statement):
            await admin_execute(admin_url, statement)

        await admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin(f"CREATE DATABASE {name}")
        url = admin_url.rsplit("/", 1)[0] + "/" + name
        results: list[list[str]] = []

        async def one():
            results.append(await migrate(url))

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(one)
        versions = [v for v, _ in sql.migrations()]
        assert sorted(results, key=len)[-1] == versions
        assert sum(len(r) for r in results) == len(versions)
        assert await migrate(url) == []
        await admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
