"""Timers fire exactly once with several brokers on one database (docs/decisions.md#the-fire):
two brokers racing for the same due timers, cancels racing the fires, a fire that stalls past
its claim lease, a broker that dies between its claim and its fire, and `serve --workers 2`."""

from __future__ import annotations

import base64
import json
from collections import Counter
from contextlib import AsyncExitStack

import httpx
import trio

from queen_trio.broker import open_broker
from queen_trio.errors import DatabaseUnavailable
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.db import db_fetch, db_fetchval
from tests.support.processes import running_broker


def op(queue, key, delay_ms, partition="Default"):
    return {"op": "schedule", "queue": queue, "timerKey": key, "partition": partition,
            "payload": base64.b64encode(json.dumps({"k": key}).encode()).decode(),
            "delayMs": delay_ms, "txn": f"txn-{key}"}


async def two_brokers(stack: AsyncExitStack, database_url: str):
    brokers, clients = [], []
    for _ in range(2):
        b = await stack.enter_async_context(open_broker(
            make_settings(database_url, timer_claim_lease_seconds=1.0, timer_batch_size=32),
            database_url))
        c = await stack.enter_async_context(httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(b)), base_url="http://b"))
        brokers.append(b)
        clients.append(c)
    return brokers, clients


async def until_no_timers(db, within=30):
    with trio.fail_after(within):
        while await db_fetchval(db, "SELECT count(*) FROM queen.timers"):
            await trio.sleep(0.1)


async def deliveries(db, queue):
    """txn -> how many times it is in the queue's log, and each one's commit time."""
    rows = await db_fetch(db, """
        SELECT ti.transaction_id, ti.created_at FROM queen.transaction_index ti
          JOIN queen.partitions p ON p.id = ti.partition_id
          JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1""", queue)
    return Counter(r["transaction_id"] for r in rows), {r["transaction_id"]: r["created_at"]
                                                        for r in rows}


async def test_two_brokers_race_for_due_timers_and_cancels_each_fires_once(database_url):
    async with AsyncExitStack() as stack:
        (a, b), (ca, cb) = await two_brokers(stack, database_url)
        keys = [f"k{n:03}" for n in range(300)]
        scheduled = {}
        for start in range(0, 300, 100):
            r = await ca.post("/api/v1/timers", json={"operations": [
                op("race", k, (n % 15) * 100, partition=f"p{n % 7}")
                for n, k in enumerate(keys[start:start + 100], start)]})
            for res in r.json()["results"]:
                scheduled[res["timerKey"]] = res
        cancels = {}

        async def cancel(key):
            r = await cb.delete(f"/api/v1/timers/race/{key}")
            cancels[key] = r.json()["status"]

        async with trio.open_nursery() as n:
            for key in keys[::5]:
                n.start_soon(cancel, key)
                await trio.sleep(0.01)
        await until_no_timers(a.db)
        counts, at = await deliveries(a.db, "race")
        for key in keys:
            want = 0 if cancels.get(key) == "cancelled" else 1
            assert counts[f"txn-{key}"] == want, (key, cancels.get(key))
            if want:  # never before its deliverAt
                assert at[f"txn-{key}"].isoformat() >= scheduled[key]["deliverAt"][:-1]
        assert set(cancels.values()) <= {"cancelled", "absent", "too_late"}
        assert a.sweeper.statistics().fired + b.sweeper.statistics().fired == sum(
            counts.values())


async def test_a_fire_that_stalls_past_its_lease_pushes_nothing(database_url):
    """Broker A claims and then stalls longer than its lease; B claims the lapsed timers and
    fires them; A's fire then finds nothing that still carries its token."""
    async with AsyncExitStack() as stack:
        (a, b), (ca, _) = await two_brokers(stack, database_url)
        stalled = trio.Event()

        async def stall(token):
            stalled.set()
            await trio.sleep(2.5)  # past the 1 s lease

        a.sweeper.after_claim = stall
        b_hook_done = trio.Event()

        async def b_waits(token):  # B stays out until A holds the claim
            await stalled.wait()
            b.sweeper.after_claim = None
            b_hook_done.set()

        b.sweeper.after_claim = b_waits
        await ca.post("/api/v1/timers", json={"operations": [
            op("stall", f"s{n}", 0) for n in range(20)]})
        await until_no_timers(a.db)
        with trio.fail_after(10):
            while a.sweeper.after_claim is stall and a.sweeper.statistics().claims == 0:
                await trio.sleep(0.05)
        await trio.sleep(3)  # A's stalled fire has run by now
        counts, _ = await deliveries(a.db, "stall")
        assert counts == Counter({f"txn-s{n}": 1 for n in range(20)})
        assert a.sweeper.statistics().fired + b.sweeper.statistics().fired == 20
        # A's claim lapsed under it: its fire found none of its timers and pushed nothing.
        assert a.sweeper.statistics().lapsed >= 1
        assert b.sweeper.statistics().fired >= 1


async def test_a_broker_that_dies_after_its_claim_leaves_the_timers_to_another(database_url):
    async with AsyncExitStack() as stack:
        (a, b), (ca, cb) = await two_brokers(stack, database_url)
        died = trio.Event()

        async def die(token):
            a.sweeper.after_claim = None
            died.set()
            raise DatabaseUnavailable("simulated: the broker died after its claim")

        a.sweeper.after_claim = die
        # B only starts firing once A has claimed (and died with the claim).
        async def b_waits(token):
            await died.wait()
            b.sweeper.after_claim = None

        b.sweeper.after_claim = b_waits
        await ca.post("/api/v1/timers", json={"operations": [
            op("died", f"d{n}", 0) for n in range(10)]})
        with trio.fail_after(10):
            await died.wait()
        # While the claim is live: too_late; the timers stay.
        r = await cb.delete("/api/v1/timers/died/d0")
        assert r.json()["status"] in ("too_late", "cancelled")
        await until_no_timers(a.db)
        counts, _ = await deliveries(a.db, "died")
        want = {f"txn-d{n}": 1 for n in range(10)}
        if r.json()["status"] == "cancelled":
            del want["txn-d0"]
        assert counts == Counter(want)
        assert a.sweeper.statistics().fired + b.sweeper.statistics().fired == len(want)


async def test_two_workers_fire_each_timer_once(database_url):
    async with running_broker({"DATABASE_URL": database_url,
                               "QUEEN_TIMER_CLAIM_LEASE_MS": "1000"}, workers=2) as server:
        async with httpx.AsyncClient(base_url=server.url) as c:
            for start in range(0, 200, 50):
                r = await c.post("/api/v1/timers", json={"operations": [
                    op("w2", f"w{n}", (n % 10) * 50, partition=f"p{n % 4}")
                    for n in range(start, start + 50)]})
                assert r.status_code == 200
            with trio.fail_after(30):
                while (await c.get("/api/v1/status/timers")).json()["pending"]:
                    await trio.sleep(0.1)
    from tests.support.db import query_once

    counts = await trio.to_thread.run_sync(query_once, database_url, (
        "SELECT json_object_agg(transaction_id, n) FROM (SELECT transaction_id, count(*) AS n "
        "FROM queen.transaction_index GROUP BY transaction_id) x"))
    assert json.loads(counts) == {f"txn-w{n}": 1 for n in range(200)}
