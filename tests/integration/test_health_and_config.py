"""GET /health, migrations, and configuration from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio_asyncio

from queen_trio.settings import ConfigError, Settings, database_url_from_env
from queen_trio.storage import sql
from queen_trio.storage.database import migrate
from queen_trio.storage.sql import Q
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


def test_configure_write_names_every_option_column():
    from queen_trio.queues import options

    for field in options.FIELDS:
        assert f"{field} = :{field}" in " ".join(
            (Path(sql.__file__).parent / "queries" / "configure_write.sql").read_text().split())
    assert set(Q.configure_write.params) == {*options.FIELDS, "queue_id", "namespace", "task",
                                             "explicit_options"}


def test_database_url_from_env():
    assert database_url_from_env({}) is None
    assert database_url_from_env({"DATABASE_URL": "postgresql://x/y"}) == "postgresql://x/y"
    assert database_url_from_env({"PG_HOST": "db", "PG_PASSWORD": "p@ss", "PG_DB": "queen"}) == (
        "postgresql://postgres:p%40ss@db:5432/queen")


def test_settings_from_env_and_errors():
    s = Settings.from_env({"PORT": "7000", "QUEEN_V2_FUSION_HOLD_MS": "5", "DB_POOL_SIZE": "30",
                           "QUEEN_DATA_DIR": "/tmp/q"})
    assert (s.port, s.fusion_hold_ms, s.db_pool_size, s.data_dir) == (7000, 5.0, 30, Path("/tmp/q"))
    with pytest.raises(ConfigError, match="PORT='abc'"):
        Settings.from_env({"PORT": "abc"})
    with pytest.raises(ConfigError, match="QUEEN_PUSH_SHARDS"):
        Settings.from_env({"QUEEN_PUSH_SHARDS": "0"})
