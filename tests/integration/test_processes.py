"""Real broker processes: the embedded database, graceful SIGTERM, two brokers on one database."""

from __future__ import annotations

import signal

import httpx
import pytest
import trio

from queen_trio.storage.embedded import EmbeddedPostgres
from tests.support.processes import broker_process

SEED = {"items": [{"queue": "orders.created", "partition": "customer-42",
                   "transactionId": "order-8891-created", "payload": {"orderId": 8891}}]}


async def test_serve_with_embedded_database_keeps_data_across_restarts(cluster_path, workers):
    data_dir = cluster_path
    async with broker_process(args=["--data-dir", str(data_dir)], workers=workers) as (url, proc):
        async with httpx.AsyncClient(base_url=url) as client:
            r = await client.post("/api/v1/push", json=SEED)
            assert r.status_code == 201
            first_id = r.json()[0]["message_id"]
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            while proc.poll() is None:
                await trio.sleep(0.05)
        assert proc.returncode == 0
    # The broker stopped its embedded PostgreSQL on the way out.
    assert EmbeddedPostgres(data_dir).postmaster() is None
    async with broker_process(args=["--data-dir", str(data_dir)], workers=workers) as (url, _):
        async with httpx.AsyncClient(base_url=url) as client:
            r = await client.post("/api/v1/push", json=SEED)
            assert r.json()[0]["status"] == "duplicate"
            assert r.json()[0]["message_id"] == first_id


# httpx leaves a request-body generator unclosed when the server goes away mid-request.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_sigterm_loses_nothing_that_was_answered(database_url, workers):
    answered: list[int] = []
    async with broker_process({"DATABASE_URL": database_url}, workers=workers) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:

            async def producer(p):
                n = 0
                while True:
                    body = {"items": [{"queue": "term", "partition": f"p{p}",
                                       "transactionId": f"{p}-{n}", "payload": n}]}
                    try:
                        r = await client.post("/api/v1/push", json=body)
                    except httpx.TransportError:
                        return
                    if r.status_code != 201:
                        return
                    answered.append(p * 1_000_000 + n)
                    n += 1

            async with trio.open_nursery() as nursery:
                for p in range(8):
                    nursery.start_soon(producer, p)
                while len(answered) < 200:
                    await trio.sleep(0.01)
                proc.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            while proc.poll() is None:
                await trio.sleep(0.05)
        assert proc.returncode == 0

    import asyncpg
    import trio_asyncio

    async with trio_asyncio.open_loop():
        async def read():
            conn = await asyncpg.connect(database_url)
            try:
                return await conn.fetch(
                    "SELECT p.name, t.transaction_id FROM queen.transaction_index t "
                    "JOIN queen.partitions p ON p.id = t.partition_id")
            finally:
                await conn.close()
        rows = await trio_asyncio.aio_as_trio(read)()
    stored = {int(r["transaction_id"].split("-")[0]) * 1_000_000 + int(r["transaction_id"].split("-")[1])
              for r in rows}
    assert set(answered) <= stored
    assert len(rows) == len(stored)


async def test_two_brokers_on_one_database_keep_dedup_exact_and_offsets_gap_free(
        database_url, broker, workers):
    env = {"DATABASE_URL": database_url}
    async with broker_process(env, workers=workers) as (url_a, _), \
            broker_process(env, workers=workers) as (url_b, _):
        results: list[dict] = []
        async with httpx.AsyncClient(timeout=30) as client:

            async def producer(url, worker):
                for n in range(40):
                    # Both brokers push the same transaction ids to the same partitions.
                    body = {"items": [{"queue": "two", "partition": f"p{n % 3}",
                                       "transactionId": f"tx-{n}", "payload": {"w": worker}}]}
                    r = await client.post(url + "/api/v1/push", json=body)
                    assert r.status_code == 201, r.text
                    results.append({"n": n, **r.json()[0]})

            async with trio.open_nursery() as nursery:
                for worker in range(4):
                    nursery.start_soon(producer, url_a if worker % 2 else url_b, worker)

    by_tx: dict[str, set[str]] = {}
    queued: dict[str, int] = {}
    for r in results:
        by_tx.setdefault(r["transaction_id"], set()).add(r["message_id"])
        queued[r["transaction_id"]] = queued.get(r["transaction_id"], 0) + (r["status"] == "queued")
    assert all(len(ids) == 1 for ids in by_tx.values()), "every duplicate names the original"
    assert set(queued.values()) == {1}, "exactly one push of each transaction id succeeded"

    from tests.support.storage import stored_messages

    total = 0
    for p in range(3):
        stored = await stored_messages(broker.db, "two", f"p{p}")
        assert [m.offset for m in stored] == list(range(len(stored)))
        times = [m.created_at for m in stored]
        assert times == sorted(times)
        total += len(stored)
    assert total == 40


async def test_push_on_one_broker_wakes_a_long_poll_on_another(database_url, workers):
    """The waiting broker's own re-checks are 20 s apart: only the NOTIFY can wake it."""
    from queen_trio.broker import open_broker
    from queen_trio.web.routes import create_app
    from tests.support.brokers import make_settings

    settings = make_settings(database_url, pop_wait_initial_interval_ms=20_000,
                             pop_wait_max_interval_ms=20_000)
    async with open_broker(settings, database_url) as waiting:
        while not waiting.listener.statistics().connected:
            await trio.sleep(0.01)
        transport = httpx.ASGITransport(app=create_app(waiting))
        async with httpx.AsyncClient(transport=transport, base_url="http://w", timeout=60) as local:
            # The queue exists and the waiter is parked on it.
            r = await local.post("/api/v1/configure", json={"queue": "cross"})
            assert r.status_code == 200
            result = {}

            async def waiter():
                r = await local.get("/api/v1/pop/queue/cross",
                                    params={"wait": "true", "timeout": "30000"})
                result["reply"] = r

            async with broker_process({"DATABASE_URL": database_url},
                                      workers=workers) as (url, _):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(waiter)
                    await trio.sleep(0.5)
                    assert "reply" not in result
                    before = waiting.wakeups.statistics().notifications
                    async with httpx.AsyncClient(base_url=url) as remote:
                        r = await remote.post("/api/v1/push", json={"items": [
                            {"queue": "cross", "payload": "from-the-other-broker"}]})
                        assert r.status_code == 201
                    with trio.fail_after(15):
                        while "reply" not in result:
                            await trio.sleep(0.01)
            assert waiting.wakeups.statistics().notifications > before
            assert result["reply"].status_code == 200
            assert result["reply"].json()["messages"][0]["data"] == "from-the-other-broker"
