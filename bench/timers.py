"""Timer benchmarks (docs/timers.md, docs/performance.md#timers).

    python bench/timers.py [--due 10000] [--rate 1000] [--schedules 20000] [--rounds 5]

1. schedules per second: `--schedules` timers an hour ahead, 256 ops a call, 8 callers;
2. firing lag: `--due` timers due at `--rate` per second on one broker (each scheduled with
   the delay that lands it on its slot); lateness = the message's commit time (its `ts`) minus
   the timer's `deliverAt`, both on PostgreSQL's clock: p50, p99, max;
3. pending timers cost nothing: push b10 and pop+ack b10 throughput, `--rounds` alternating
   rounds without and with 100,000 timers due an hour ahead; the median of the paired ratios
   and their spread.

Results go to bench/results/timers.json.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import statistics
import time
from typing import Any

import asyncpg
import httpx
import trio
from common import broker, database, log, write_results

PAYLOAD = base64.b64encode(b'{"bench":true}').decode()


def op(queue: str, key: str, delay_ms: int, partition: str = "Default") -> dict[str, Any]:
    return {"op": "schedule", "queue": queue, "timerKey": key, "payload": PAYLOAD,
            "delayMs": delay_ms, "txn": key, "partition": partition}


async def schedules_per_second(url: str, total: int) -> float:
    keys = [f"s{n}" for n in range(total)]
    batches = [keys[i:i + 256] for i in range(0, total, 256)]
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        started = time.perf_counter()

        async def caller(mine: list[list[str]]) -> None:
            for batch in mine:
                r = await client.post("/api/v1/timers", json={"operations": [
                    op("bench.sched", k, 3_600_000) for k in batch]})
                r.raise_for_status()

        async with trio.open_nursery() as nursery:
            for c in range(8):
                nursery.start_soon(caller, batches[c::8])
        return total / (time.perf_counter() - started)


async def firing_lag(url: str, db_url: str, due: int, rate: int) -> dict[str, Any]:
    lead = 3.0  # the first is due this long after the start: scheduling runs ahead of firing
    start = time.time() + lead
    promised: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for i in range(0, due, 256):
            now = time.time()
            ops = [op("bench.fire", f"f{n}", int((start + n / rate - now) * 1000),
                      partition=f"p{n % 16}") for n in range(i, min(due, i + 256))]
            r = await client.post("/api/v1/timers", json={"operations": ops})
            r.raise_for_status()
            for res in r.json()["results"]:
                promised[res["txn"]] = res["deliverAt"]
        with trio.fail_after(due / rate + 120):
            while (await client.get("/api/v1/status/timers")).json()["pending"]:
                await trio.sleep(0.2)
    rows = await trio_run_pg(db_url, """
        SELECT ti.transaction_id, extract(epoch FROM ti.created_at) AS at
          FROM queen.transaction_index ti JOIN queen.partitions p ON p.id = ti.partition_id
          JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'bench.fire'""")
    import datetime as dt

    late = sorted(float(r["at"]) - dt.datetime.fromisoformat(
        promised[r["transaction_id"]].replace("Z", "+00:00")).timestamp() for r in rows)
    assert len(late) == due, (len(late), due)
    assert late[0] >= 0, "a timer fired before its deliverAt"
    q = statistics.quantiles(late, n=100)
    return {"timers": due, "rate_per_second": rate, "lateness_ms": {
        "p50": round(q[49] * 1000, 1), "p99": round(q[98] * 1000, 1),
        "max": round(late[-1] * 1000, 1), "min": round(late[0] * 1000, 1)}}


async def trio_run_pg(db_url: str, sql: str) -> list[Any]:
    def run() -> list[Any]:
        async def go() -> list[Any]:
            conn = await asyncpg.connect(db_url)
            try:
                return list(await conn.fetch(sql))
            finally:
                await conn.close()
        return asyncio.run(go())
    return await trio.to_thread.run_sync(run)


async def load_round(url: str, seconds: float) -> tuple[float, float]:
    """push b10 messages/s and pop+ack b10 messages/s, 4 callers each, `seconds` each."""
    async with httpx.AsyncClient(base_url=url, timeout=60,
                                 limits=httpx.Limits(max_connections=16)) as client:
        pushed = 0

        async def pusher(c: int, until: float) -> None:
            nonlocal pushed
            while time.perf_counter() < until:
                r = await client.post("/api/v1/push", json={"items": [
                    {"queue": "bench.load", "partition": f"p{c}-{n % 4}", "payload": {"n": n}}
                    for n in range(10)]})
                r.raise_for_status()
                pushed += 10

        until = time.perf_counter() + seconds
        async with trio.open_nursery() as nursery:
            for c in range(4):
                nursery.start_soon(pusher, c, until)
        push_rate = pushed / seconds
        consumed = 0

        async def popper(until: float) -> None:
            nonlocal consumed
            while time.perf_counter() < until:
                r = await client.get("/api/v1/pop/queue/bench.load", params={"batch": 10})
                if r.status_code == 204:
                    continue
                body = r.json()
                acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                         "status": "completed", "leaseId": m["leaseId"]}
                        for m in body["messages"]]
                (await client.post("/api/v1/ack/batch",
                                   json={"acknowledgments": acks})).raise_for_status()
                consumed += len(acks)

        until = time.perf_counter() + seconds
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(popper, until)
        return push_rate, consumed / seconds


async def pending_cost(url: str, db_url: str, rounds: int, seconds: float) -> dict[str, Any]:
    add = """INSERT INTO queen.timers (queue, timer_key, deliver_at, txn, message_id, payload)
             SELECT 'bench.pending', 'k' || n, clock_timestamp() + interval '1 hour',
                    'k' || n, gen_random_uuid(), '{}'::bytea
               FROM generate_series(1, 100000) AS n"""
    ratios_push, ratios_pop, raw = [], [], []
    await load_round(url, 1.0)  # warm up
    for r in range(rounds):
        await trio_run_pg(db_url, "DELETE FROM queen.timers")
        without = await load_round(url, seconds)
        await trio_run_pg(db_url, add)
        await trio_run_pg(db_url, "ANALYZE queen.timers")
        with_ = await load_round(url, seconds)
        raw.append({"without": without, "with": with_})
        ratios_push.append(with_[0] / without[0])
        ratios_pop.append(with_[1] / without[1])
        log(f"round {r + 1}: push {without[0]:.0f} -> {with_[0]:.0f}/s, "
            f"pop+ack {without[1]:.0f} -> {with_[1]:.0f}/s")
    await trio_run_pg(db_url, "DELETE FROM queen.timers")

    def summary(ratios: list[float]) -> dict[str, float]:
        return {"median_ratio": round(statistics.median(ratios), 3),
                "min": round(min(ratios), 3), "max": round(max(ratios), 3)}

    return {"pending_timers": 100_000, "rounds": rounds, "seconds_per_run": seconds,
            "push_b10": summary(ratios_push), "pop_ack_b10": summary(ratios_pop), "raw": raw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--schedules", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with database() as db_url, broker(db_url) as (url, _proc, _own):
        results["schedules_per_second"] = round(trio.run(schedules_per_second, url,
                                                         args.schedules))
        log(f"schedules: {results['schedules_per_second']}/s")
        trio.run(trio_run_pg, db_url, "DELETE FROM queen.timers")
        results["firing"] = trio.run(firing_lag, url, db_url, args.due, args.rate)
        log(f"firing: {results['firing']}")
        results["pending_cost"] = trio.run(pending_cost, url, db_url, args.rounds,
                                           args.seconds)
        log(f"pending cost: push {results['pending_cost']['push_b10']}, "
            f"pop+ack {results['pending_cost']['pop_ack_b10']}")
    log(f"wrote {write_results('timers', results)}")


if __name__ == "__main__":
    main()
