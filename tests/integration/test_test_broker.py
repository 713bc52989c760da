"""The test broker in process (queen_trio.testing.open_test_broker and its parts), on the
suite's PostgreSQL: reset() empties everything and forgets every cache; each broker has a
database of its own, dropped after; what happened since is read back for the report."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from queen_trio.push.spool import Spool, SpoolRecord
from queen_trio.testing import open_test_broker
from queen_trio.testing.inprocess import (
    RunningBroker,
    TestPostgres,
    open_test_postgres,
    serve_test_broker,
)
from tests.support.db import db_fetch, db_fetchval


@pytest.fixture
async def server(admin_url: str, tmp_path: Path) -> AsyncIterator[TestPostgres]:
    async with open_test_postgres(data_root=tmp_path, database_url=admin_url) as server:
        yield server


@pytest.fixture
async def running(server: TestPostgres, tmp_path: Path) -> AsyncIterator[RunningBroker]:
    async with serve_test_broker(server, {"encryption": True},
                                 spool_dir=tmp_path / "spool") as running:
        yield running


async def push(client: httpx.AsyncClient, queue: str, *payloads: object) -> list[dict]:
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": queue, "payload": p} for p in payloads]})
    assert r.status_code == 201, r.text
    return r.json()


async def pop(client: httpx.AsyncClient, queue: str, **params: object) -> list[dict]:
    r = await client.get(f"/api/v1/pop/queue/{queue}",
                         params={k: str(v) for k, v in params.items()})
    return [] if r.status_code == 204 else r.json()["messages"]


async def table_counts(running: RunningBroker) -> dict[str, int]:
    tables = [r["tablename"] for r in await db_fetch(
        running.broker.db, "SELECT tablename FROM pg_tables WHERE schemaname = 'queen' "
        "AND tablename NOT IN ('schema_migrations', 'schema_objects', 'schema_object_set') "
        "ORDER BY 1")]
    return {t: await db_fetchval(running.broker.db, f"SELECT count(*) FROM queen.{t}")
            for t in tables}


async def test_reset_empties_every_table_and_forgets_every_cache(running: RunningBroker) -> None:
    broker = running.broker
    async with httpx.AsyncClient(base_url=running.url) as client:
        r = await client.post("/api/v1/configure", json={
            "queue": "secret", "options": {"encryptionEnabled": True, "dedupWindowSeconds": 0}})
        assert r.status_code == 200
        await push(client, "secret", {"n": 1}, {"n": 2})
        await push(client, "plain", "x")
        popped = await pop(client, "secret", consumerGroup="g1", batch=1)
        await pop(client, "secret", consumerGroup="g1", batch=1)  # the group's claims fuse now
        r = await client.post("/api/v1/traces", json={
            "transactionId": popped[0]["transactionId"], "partitionId": popped[0]["partitionId"],
            "consumerGroup": "g1", "data": {"step": 1}, "traceNames": ["flow"]})
        assert r.status_code == 201
        r = await client.post("/api/v1/ack", json={
            "transactionId": popped[0]["transactionId"], "partitionId": popped[0]["partitionId"],
            "leaseId": popped[0]["leaseId"], "status": "failed", "consumerGroup": "g1"})
        assert r.status_code == 200
        assert broker.queues.known("secret") is not None
        assert broker.consumer.statistics().joined_groups == 1
        assert sum((await table_counts(running)).values()) > 0

        with broker.wakeups.watch("secret") as woken:  # a long poll left over
            assert broker.wakeups.statistics().watched_queues == 1
            await running.reset()
            assert woken.is_set(), "a waiter left over re-checks (and finds nothing)"
            assert broker.wakeups.statistics().watched_queues == 0

        assert await table_counts(running) == dict.fromkeys(await table_counts(running), 0)
        assert broker.queues.known("secret") is None
        assert broker.consumer.statistics().joined_groups == 0
        assert broker.wakeups.statistics().watched_queues == 0
        assert (broker.spool.statistics().pending, broker.spool.files()) == (0, [])
        # The schema stays: the broker works on at once, as on a new database.
        assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.schema_migrations") > 0
        assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.schema_objects") > 0
        assert await pop(client, "secret", consumerGroup="g1") == []
        await push(client, "secret", {"n": 3})
        again = await pop(client, "secret", consumerGroup="g1", batch=10)
        assert [m["data"] for m in again] == [{"n": 3}]
        r = await client.get("/api/v1/traces/names")
        assert r.json()["trace_names"] == []


async def test_discarding_the_spool_forgets_its_records_and_their_counts(
        tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    await spool.open()
    try:
        record = SpoolRecord("q", "Default", b"\0" * 16, "t1", None, None, b'"x"', False)
        await spool.append([record, record])
        await spool.seal()
        await spool.append([record])
        assert (spool.statistics().pending, spool.statistics().files) == (3, 2)
        assert spool.holds("q", "Default")
        await spool.discard()
        assert (spool.statistics().pending, spool.statistics().files) == (0, 0)
        assert spool.files() == [] and not spool.holds("q", "Default")
        await spool.append([record])  # a new file, counted from scratch
        assert (spool.statistics().pending, len(spool.files())) == (1, 1)
    finally:
        await spool.close()


async def test_recorded_since_tells_the_traces_and_pushes_from_then_on(
        running: RunningBroker) -> None:
    async with httpx.AsyncClient(base_url=running.url) as client:
        await push(client, "before", "old")
        since = await running.now()
        await push(client, "orders", {"id": 1}, {"id": 2})
        (first, _) = await pop(client, "orders", batch=2)
        for step in ("charged", "shipped"):
            r = await client.post("/api/v1/traces", json={
                "transactionId": first["transactionId"], "partitionId": first["partitionId"],
                "data": {"step": step}, "traceNames": ["order-1"]})
            assert r.status_code == 201
    recorded = await running.recorded_since(since, limit=10)
    assert recorded["trace_names"] == ["order-1"]
    timeline = recorded["timelines"]["order-1"]
    assert [e["data"]["step"] for e in timeline["traces"]] == ["charged", "shipped"]
    assert recorded["messages_total"] == 2
    messages = recorded["messages"]
    assert [m["queue_name"] for m in messages] == ["orders", "orders"]
    assert [m["payload"] for m in messages] == [{"id": 1}, {"id": 2}]
    assert [len(m["traces"]) for m in messages] == [2, 0]
    assert (await running.recorded_since(since, limit=1))["messages_total"] == 2
    assert len((await running.recorded_since(since, limit=1))["messages"]) == 1


async def test_brokers_of_different_settings_have_databases_of_their_own(
        server: TestPostgres, tmp_path: Path, admin_url: str) -> None:
    async with serve_test_broker(server, {}, spool_dir=tmp_path / "a") as a, \
            serve_test_broker(server, {"default_batch_size": 5},
                              spool_dir=tmp_path / "b") as b:
        assert a.database_url != b.database_url and a.url != b.url
        assert b.settings.default_batch_size == 5 and a.settings.default_batch_size == 1
        assert a.settings.port == int(a.url.rsplit(":", 1)[1])
        async with httpx.AsyncClient(base_url=a.url) as ca, \
                httpx.AsyncClient(base_url=b.url) as cb:
            await push(ca, "q", 1, 2, 3, 4, 5, 6)
            await push(cb, "q", 7, 8, 9, 10, 11, 12)
            assert [m["data"] for m in await pop(cb, "q")] == [7, 8, 9, 10, 11]
            assert [m["data"] for m in await pop(ca, "q")] == [1]
        names = {a.database_url.rsplit("/", 1)[1], b.database_url.rsplit("/", 1)[1]}
    left = await _databases(admin_url)
    assert not names & left, "a test broker's database outlived it"


async def test_open_test_broker_on_a_given_server_leaves_no_database(
        admin_url: str, tmp_path: Path) -> None:
    before = await _databases(admin_url)
    async with open_test_broker(database_url=admin_url, push_shards=1) as running:
        assert running.settings.push_shards == 1
        assert running.url.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(base_url=running.url) as client:
            assert (await client.get("/health")).status_code == 200
        during = await _databases(admin_url)
        data_dir = running.settings.data_dir
    assert len(during - before) == 1
    assert await _databases(admin_url) == before
    assert not data_dir.exists()


async def _databases(admin_url: str) -> set[str]:
    names: list[str] = []

    async def read(url: str) -> None:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            names.extend(r[0] for r in await conn.fetch(
                "SELECT datname FROM pg_database WHERE datname LIKE 'queen_test_%'"))
        finally:
            await conn.close()

    import trio_asyncio

    async with trio_asyncio.open_loop():
        await trio_asyncio.aio_as_trio(read)(admin_url)
    return set(names)
