"""/api/v1/status*, /api/v1/analytics/*, and the samples they draw from (ops/stats.py)."""

from __future__ import annotations

import datetime as dt
import os

import trio

from queen_trio.broker import open_broker
from queen_trio.ops.stats import STATS_LOCK_KEY, stats_pass
from tests.support.brokers import make_settings
from tests.support.consuming import park_pop, push
from tests.support.db import db_fetchval
from tests.support.outage import database_cut_off
from tests.support.scenarios import known_state


async def get(client, path, status=200):
    r = await client.get(path)
    assert r.status_code == status, r.text
    return r.json()


async def refresh(client):
    r = await client.post("/api/v1/stats/refresh")
    assert r.status_code == 200, r.text
    return r.json()


def nonzero(points, key):
    return [p for p in points if p[key]]


async def test_status_summary_after_known_traffic(client, broker):
    await known_state(client)
    refreshed = await refresh(client)
    assert refreshed["workerId"] == broker.identity.worker_id and refreshed["statsAge"] == 0
    body = await get(client, "/api/v1/status")
    assert body["bucketMinutes"] == 1 and body["pointCount"] == len(body["throughput"])
    assert 60 <= body["pointCount"] <= 61
    (point,) = nonzero(body["throughput"], "ingested")
    assert (point["ingested"], point["processed"], point["popMessages"]) == (12, 3, 6)
    assert point["ingestedPerSecond"] == 0.2 and point["queenRssMb"] > 0
    messages = body["messages"]
    assert {k: messages[k] for k in ("total", "pending", "processing", "completed", "failed",
                                     "deadLetter")} == {
        "total": 12, "pending": 8, "processing": 1, "completed": 2, "failed": 1, "deadLetter": 1}
    assert messages["requests"] == {"push": 4, "pop": 3, "ack": 4}
    assert messages["batchEfficiency"] == {"push": 3.0, "pop": 2.0, "ack": 1.25}
    assert body["leases"] == {"active": 1, "partitionsWithLeases": 1, "totalBatchSize": 1,
                              "totalAcked": None}
    assert body["deadLetterQueue"] == {"totalMessages": 1, "affectedPartitions": 1,
                                       "topErrors": [{"error": "bad", "count": 1}]}
    (worker,) = body["workers"]
    assert worker["workerId"] == broker.identity.worker_id and worker["messagesProcessed"] == 3
    assert worker["dbConnections"] >= 1 and worker["freeSlots"] >= 0
    assert body["errors"] == {"dbErrors": 0, "ackFailed": 0, "dlqMessages": 1}
    assert {q["name"]: q["totalConsumed"] for q in body["queues"]} == {"plain": 0,
                                                                       "shop.orders": 3}
    assert body["statsAge"] == 0 and body["answeredBy"] == broker.identity.worker_id


async def test_status_during_a_database_outage_is_503_with_retry_after(client, broker,
                                                                     admin_url):
    """Its reads run side by side: the failure of one is the outage, not an ExceptionGroup."""
    async with database_cut_off(admin_url, broker.settings.database_url):
        r = await client.get("/api/v1/status")
        assert r.status_code == 503, r.text
        assert "database connection unavailable" in r.json()["error"]
        assert r.headers["retry-after"] == "1"


async def test_status_for_one_queue(client):
    await known_state(client)
    await refresh(client)
    body = await get(client, "/api/v1/status?queue=plain")
    assert body["messages"]["total"] == 2 and [q["name"] for q in body["queues"]] == ["plain"]
    (point,) = nonzero(body["throughput"], "ingested")
    assert point["ingested"] == 2
    shop = await get(client, "/api/v1/status?namespace=shop")
    assert shop["messages"]["total"] == 10


async def test_status_rejects_bad_ranges(client):
    for query in ("from=yesterday", "to=soon", "from=2030-01-01T00:00:00Z&to=2029-01-01T00:00:00Z",
                  "from=1990-01-01T00:00:00Z"):
        assert "error" in await get(client, f"/api/v1/status?{query}", 400)
    week = await get(client, "/api/v1/status?from=2026-01-01T00:00:00Z&to=2026-01-08T00:00:00Z")
    assert week["bucketMinutes"] == 60 and week["pointCount"] == 169


async def test_status_queue_list_and_detail(client):
    await known_state(client)
    body = await get(client, "/api/v1/status/queues?limit=1")
    assert body["pagination"] == {"limit": 1, "offset": 0} and len(body["queues"]) == 1
    assert (await get(client, "/api/v1/status/queues"))["pagination"]["limit"] == 100
    detail = await get(client, "/api/v1/status/queues/shop.orders")
    config = detail["queue"]["config"]
    assert (config["leaseTime"], config["retryLimit"], config["maxQueueSize"],
            config["deadLetterQueue"]) == (60, 3, 0, True)
    parts = {p["name"]: p for p in detail["partitions"]}
    assert parts["a"]["messages"] == parts["a"]["stats"]
    assert parts["a"]["messages"]["completed"] == 2 and parts["a"]["cursor"]["totalConsumed"] == 2
    assert parts["b"]["cursor"]["totalConsumed"] == 1
    assert detail["totals"]["messages"]["total"] == 10 and detail["totals"]["total"] == 10
    assert (await get(client, "/api/v1/status/queues/nope", 404)) == {"error": "Queue not found"}


async def test_status_analytics_per_interval(client):
    await known_state(client)
    await refresh(client)
    body = await get(client, "/api/v1/status/analytics?interval=minute")
    assert body["interval"] == "minute" and len(body["dataPoints"]) >= 1440
    (point,) = nonzero(body["dataPoints"], "messages")
    assert point["messages"] == 12 and point["acknowledged"] == 3
    hourly = await get(client, "/api/v1/status/analytics?queue=plain")
    assert sum(p["messages"] for p in hourly["dataPoints"]) == 2
    assert "interval" in (await get(client, "/api/v1/status/analytics?interval=week", 400))[
        "error"]


async def test_worker_series(client, broker):
    await known_state(client)
    await refresh(client)
    system = await get(client, "/api/v1/analytics/system-metrics")
    (worker,) = system["workers"]
    assert worker["workerId"] == broker.identity.worker_id
    assert nonzero(worker["points"], "rssMb") and nonzero(worker["points"], "dbPoolMax")
    counts = await get(client, f"/api/v1/analytics/worker-metrics?workerId={worker['workerId']}")
    points = counts["workers"][0]["points"]
    assert sum(p["pushMessages"] for p in points) == 12
    assert sum(p["popMessages"] for p in points) == 6
    assert sum(p["nacked"] for p in points) == 2
    assert (await get(client, "/api/v1/analytics/worker-metrics?workerId=nobody"))[
        "workers"] == []
    # The first sample counts no CPU from before the broker ran (its start, the imports):
    # no bucket reads more than every core busy.
    cores = os.cpu_count() or 1
    assert all(p["cpuUserPct"] + p["cpuSysPct"] <= 100 * cores for p in worker["points"])


async def test_queue_series(client):
    await known_state(client)
    await refresh(client)
    lag = await get(client, "/api/v1/analytics/queue-lag?queue=shop.orders")
    (queue,) = lag["queues"]
    (point,) = nonzero(queue["points"], "messages")
    assert (point["messages"], point["pending"], point["deadLetters"]) == (10, 7, 1)
    ops = await get(client, "/api/v1/analytics/queue-ops")
    by_queue = {q["queue"]: q["points"] for q in ops["queues"]}
    shop = by_queue["shop.orders"]
    assert sum(p["pushed"] for p in shop) == 10 and sum(p["popped"] for p in shop) == 6
    assert sum(p["acked"] for p in shop) == 3 and sum(p["nacked"] for p in shop) == 2
    assert sum(p["deadLettered"] for p in shop) == 1
    assert sum(p["pushed"] for p in by_queue["plain"]) == 2


async def test_parked_long_polls_per_queue_and_process(client, broker):
    async with trio.open_nursery() as nursery:
        result = park_pop(nursery, client, "idle")
        while not broker.wakeups.statistics().waiting:
            await trio.sleep(0.01)
        await refresh(client)
        body = await get(client, "/api/v1/analytics/queue-parked-replicas")
        (current,) = body["current"]
        assert current["queue"] == "idle" and current["total"] == 1
        assert current["replicas"][0]["workerId"] == broker.identity.worker_id
        (series,) = body["queues"]
        assert max(p["parkedMax"] for p in series["points"]) == 1
        await push(client, "idle", "wake")
    assert result["reply"]["messages"][0]["data"] == "wake"


async def test_maintenance_and_postgres_series(client, broker, database_url):
    await push(client, "one", 1)
    await push(client, "two", 1)
    await refresh(client)  # its stats pass snapshots both queues
    body = await get(client, "/api/v1/analytics/retention")
    assert body["totals"]["snapshots"] == 2 and "snapshots" in body["kinds"]
    assert sum(p.get("snapshots", 0) for p in body["points"]) == 2
    pg = await get(client, "/api/v1/analytics/postgres-stats")
    assert pg["database"]["name"] == database_url.rsplit("/", 1)[1]
    assert {"segments", "consumer_state", "worker_samples"} <= {t["name"] for t in pg["tables"]}
    assert pg["activity"]["sessions"] >= 1


async def test_a_refresh_waits_for_a_pass_another_broker_is_running(client, broker):
    """The snapshot lock is held elsewhere (another broker's pass, or this one's timer, which
    may have begun before the pushes): the refresh waits for it and then counts them."""
    await push(client, "waited", 1)

    async def hold_the_lock():
        async def work(conn):
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", STATS_LOCK_KEY)
                await conn.execute("SELECT pg_sleep(2)")

        await broker.db.call(work)

    locked = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
              f"AND objid = {STATS_LOCK_KEY & 0xFFFFFFFF}")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_the_lock)
        with trio.fail_after(20):
            while await db_fetchval(broker.db, locked) == 0:
                await trio.sleep(0.01)
        await refresh(client)  # met the held lock, waited, then ran its own pass
    body = await get(client, "/api/v1/analytics/retention")
    assert body["totals"]["snapshots"] == 1


async def test_samples_are_written_every_interval_and_pruned(database_url):
    settings = make_settings(database_url, stats_interval_seconds=0.05)
    async with open_broker(settings, database_url) as broker:
        with trio.fail_after(20):
            while await db_fetchval(broker.db, "SELECT count(*) FROM queen.worker_samples") < 3:
                await trio.sleep(0.05)
        assert broker.sampler.statistics().samples >= 3
        assert broker.stats_age() in (0, 1)
        later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=8)
        done = await stats_pass(broker.db, wait=True, retention_days=7, now=later)
        assert done is not None and done["pruned"] >= 3
        kept = await stats_pass(broker.db, wait=True, retention_days=7)
        assert kept is not None and kept["pruned"] == 0


async def test_series_take_the_bucket_width_asked_for(client):
    """bucketMinutes (the dashboard's interval picker) overrides the span's width on every
    series route; anything but 1, 5, 15, 60, 360 or 1440 is a 400."""
    span = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T06:00:00Z"}
    for path in ("/api/v1/status", "/api/v1/analytics/queue-lag", "/api/v1/analytics/retention",
                 "/api/v1/analytics/system-metrics"):
        r = await client.get(path, params={**span, "bucketMinutes": "15"})
        assert r.status_code == 200 and r.json()["bucketMinutes"] == 15, path
    assert (await client.get("/api/v1/status", params=span)).json()["bucketMinutes"] == 5
    points = (await client.get("/api/v1/status", params={**span, "bucketMinutes": "60"})).json()
    assert points["pointCount"] == 7
    for bad in ("7", "x", "-1", "0"):
        r = await client.get("/api/v1/status", params={**span, "bucketMinutes": bad})
        assert r.status_code == 400
        assert r.json() == {"error": "bucketMinutes must be one of 1, 5, 15, 60, 360, 1440"}
    week = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-08T00:00:00Z"}
    r = await client.get("/api/v1/status", params={**week, "bucketMinutes": "1"})
    assert r.status_code == 400 and "more than 2000 buckets" in r.json()["error"]


async def test_an_idle_brokers_stats_maintenance_is_quiet(client, broker, caplog):
    # Issue 25, point 11: the minute's snapshots are routine, not a line in the log.
    import logging

    caplog.set_level(logging.INFO, logger="queen_trio.maintenance")
    await push(client, "idle-queue", 1)
    for _ in range(3):  # each waits for the lock if the broker's own timer holds it
        assert await broker.stats_maintenance.snapshot_now()
    assert [r.getMessage() for r in caplog.records] == []
    assert broker.stats_maintenance.statistics().totals["snapshots"] >= 3
