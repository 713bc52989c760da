"""Exactly once under faults (issue 22): 2,000 timers due within a few seconds across two
broker processes on one private PostgreSQL; 500 cancels race the fires; one broker is
SIGKILLed in the middle and PostgreSQL restarts once. Every timer not cancelled is delivered
exactly once and never before its deliverAt; no cancelled one arrives; a cancel answered
too_late matches a delivered message."""

from __future__ import annotations

import base64
import datetime as dt
import json
import random

import httpx
import pytest
import trio

from tests.support.clusters import running_cluster
from tests.support.processes import running_broker


@pytest.fixture
def private_postgres(cluster_path):
    with running_cluster(cluster_path) as server:
        yield server


def op(key, delay_ms):
    return {"op": "schedule", "queue": "faults", "timerKey": key, "delayMs": delay_ms,
            "partition": f"p{int(key[1:]) % 8}", "txn": f"txn-{key}",
            "payload": base64.b64encode(json.dumps({"k": key}).encode()).decode()}


async def log_counts(url):
    import asyncpg

    def run():
        import asyncio

        async def go():
            conn = await asyncpg.connect(url, passfile="/nonexistent")
            try:
                return list(await conn.fetch(
                    "SELECT transaction_id, created_at FROM queen.transaction_index"))
            finally:
                await conn.close()
        return asyncio.run(go())
    return await trio.to_thread.run_sync(run)


async def test_2000_timers_a_sigkill_and_a_postgres_restart(private_postgres):
    url = private_postgres.url()
    env = {"DATABASE_URL": url, "QUEEN_TIMER_CLAIM_LEASE_MS": "1500"}
    keys = [f"k{n}" for n in range(2000)]
    promised: dict[str, str] = {}
    cancels: dict[str, str] = {}
    async with running_broker(env) as a, running_broker(env) as b:
        # Short timeouts: a request that meets the restart is asked again at once.
        async with httpx.AsyncClient(timeout=3) as client:
            for i in range(0, 2000, 250):
                r = await client.post(a.url + "/api/v1/timers", json={"operations": [
                    op(k, random.randint(2000, 4500)) for k in keys[i:i + 250]]})
                assert r.status_code == 200, r.text
                for res in r.json()["results"]:
                    promised[res["timerKey"]] = res["deliverAt"]
            to_cancel = random.Random(22).sample(keys, 500)

            async def cancel(key):
                while True:
                    try:
                        r = await client.delete(f"{b.url}/api/v1/timers/faults/{key}")
                    except httpx.TransportError:
                        r = None
                    if r is not None and r.status_code == 200:
                        cancels[key] = r.json()["status"]
                        return
                    await trio.sleep(0.2)  # the database is restarting: ask again

            async def faults():
                await trio.sleep(2.5)
                a.proc.kill()  # SIGKILL, whatever it holds
                await trio.sleep(0.5)
                await trio.to_thread.run_sync(lambda: private_postgres.stop(mode="immediate"))
                await trio.to_thread.run_sync(private_postgres.start)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(faults)
                for n, key in enumerate(to_cancel):
                    nursery.start_soon(cancel, key)
                    if n % 20 == 19:
                        await trio.sleep(0.1)
            with trio.fail_after(45):
                while True:
                    try:
                        r = await client.get(b.url + "/api/v1/status/timers")
                        if r.status_code == 200 and r.json()["pending"] == 0:
                            break
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.2)
    rows = await log_counts(url)
    count: dict[str, int] = {}
    at: dict[str, dt.datetime] = {}
    for r in rows:
        count[r["transaction_id"]] = count.get(r["transaction_id"], 0) + 1
        at[r["transaction_id"]] = r["created_at"]
    assert set(cancels) == set(to_cancel)
    assert set(cancels.values()) <= {"cancelled", "absent", "too_late"}
    for key in keys:
        n = count.get(f"txn-{key}", 0)
        if cancels.get(key) == "cancelled":
            assert n == 0, key
            continue
        assert n == 1, (key, cancels.get(key))
        deliver = dt.datetime.fromisoformat(promised[key].replace("Z", "+00:00"))
        assert at[f"txn-{key}"] >= deliver, key
    assert "cancelled" in cancels.values()
