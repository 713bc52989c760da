"""Timer benchmarks (docs/timers.md, docs/performance.md#timers).

    python bench/timers.py [--due 10000] [--rate 1000] [--schedules 20000] [--rounds 5]
                           [--seconds 10] [--connections 64] [--pending 100000]
                           [--only schedules,firing,pending]

1. schedules per second: `--schedules` timers an hour ahead, 256 ops a call, 8 callers;
2. firing lag: `--due` timers due at `--rate` per second on one broker (each scheduled with
   the delay that lands it on its slot); lateness = the message's commit time (its `ts`) minus
   the timer's `deliverAt`, both on PostgreSQL's clock: p50, p99, max;
3. pending timers cost nothing: two brokers on two databases of one cluster, one holding
   `--pending` timers due an hour ahead, and each round the other one (a crossover; seeded
   before the round, VACUUM ANALYZE, autovacuum left to settle). `--rounds` rounds, each
   running every side twice in mirrored order (A B B A, the first side changing every two
   rounds): push b10, then pop+ack b10 (wrk, `--connections`,
   `--seconds` a run; pop+ack on a queue prefilled for the round, counted from the consumer
   cursors). A side's figure in a round is the mean of its two runs. The median of the
   per-round ratios (with / without) and their spread; and the same for CPU per message
   (the side's broker and the PostgreSQL cluster, from /proc, over each run), which does not
   move with the machine's load as throughput does.

Results go to bench/results/timers.json (`--only` keeps the other sections' last results).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import trio
from common import broker, database, log, postmaster_pid, write_results, wrk

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


SEED = """INSERT INTO queen.timers (queue, timer_key, deliver_at, txn, message_id, payload)
          SELECT 'bench.pending', 'k' || n, clock_timestamp() + interval '1 hour',
                 'k' || n, gen_random_uuid(), '{}'::bytea
            FROM generate_series(1, $1::integer) AS n"""
# What autovacuum is doing now, in every database of the cluster.
AUTOVACUUMS = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
SIDES = ("without", "with")
BROKERS = ("a", "b")


def pg(db_url: str, *statements: str, args: tuple[Any, ...] = ()) -> Any:
    """Run statements one by one (outside a transaction: VACUUM, CREATE DATABASE); the last
    one's first value."""
    async def go() -> Any:
        conn = await asyncpg.connect(db_url)
        try:
            value = None
            for sql in statements:
                if "$1" in sql:
                    value = await conn.fetchval(sql, *args)
                elif sql.startswith("SELECT"):
                    value = await conn.fetchval(sql)
                else:
                    await conn.execute(sql)  # simple protocol: VACUUM, CREATE DATABASE
            return value
        finally:
            await conn.close()
    return asyncio.run(go())


def settle(db_url: str, quiet_seconds: float = 3.0, at_most: float = 120.0) -> float:
    """Wait until no autovacuum worker has run for `quiet_seconds`: the seconds waited."""
    started = quiet_since = time.monotonic()
    while time.monotonic() - started < at_most:
        if pg(db_url, AUTOVACUUMS):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_seconds:
            break
        time.sleep(0.2)
    return round(time.monotonic() - started, 1)


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def per_message(outs: list[tuple[dict[str, Any], int]]) -> dict[str, float]:
    """CPU µs per message of the broker and of PostgreSQL over `measure()` runs, each given
    with its message count."""
    messages = max(sum(count for _, count in outs), 1)
    return {side: round(sum(out[f"{side}_cpu_s"] for out, _ in outs) / messages * 1e6, 1)
            for side in ("broker", "postgres")}


def pending_cost(db_url: str, rounds: int, seconds: int, connections: int,
                 pending: int) -> dict[str, Any]:
    """Two brokers on two databases of one cluster, the same but for `pending` timers due an
    hour ahead in one. Each round seeds them in the other database than the last round's
    (a crossover: a difference between the brokers falls on both sides), then VACUUM
    ANALYZE, a checkpoint and a quiet autovacuum, so no run pays for the seed. It prefills a
    pop+ack queue on both and runs push b10 on both, then pop+ack b10 on both (wrk), each
    side twice in mirrored order (A B B A)."""
    from cpu import measure
    from pop import POPACK_LUA, consumed, lua_file, prefill
    from push import PAYLOAD as PUSH_PAYLOAD
    from push import lua_script

    urls = {name: with_database(db_url, f"bench_timers_{name}") for name in BROKERS}
    for name in BROKERS:
        pg(db_url, f"DROP DATABASE IF EXISTS bench_timers_{name} WITH (FORCE)",
           f"CREATE DATABASE bench_timers_{name}")
    push_script = lua_script(10, 100)
    runs: list[dict[str, Any]] = []
    with broker(urls["a"]) as (url_a, proc_a, _o), broker(urls["b"]) as (url_b, proc_b, _r):
        brokers = {"a": url_a, "b": url_b}
        broker_pids = {"a": proc_a.pid, "b": proc_b.pid}
        pg_pid = postmaster_pid(db_url)

        queue = "bench.popack"
        popack_script = lua_file(POPACK_LUA % (queue, 10))
        for name in BROKERS:  # warm up both; the pop+ack group joins its queue here
            wrk(brokers[name] + "/api/v1/push", push_script, connections=connections,
                seconds=1)
            prefill(brokers[name], queue, 100, 20, PUSH_PAYLOAD)
            wrk(brokers[name], popack_script, connections=connections, seconds=1)
        holder = None
        for r in range(rounds):
            # Crossover: the timers move to the other broker's database every round, so a
            # difference between the two brokers or databases falls on both sides alike.
            moved_from, holder = holder, BROKERS[r % 2]
            if moved_from is not None:
                pg(urls[moved_from], "DELETE FROM queen.timers")
            pg(urls[holder], SEED, args=(pending,))
            for name in BROKERS:
                pg(urls[name], "VACUUM (ANALYZE)", "CHECKPOINT")
            side_of = {"with": holder, "without": BROKERS[(r + 1) % 2]}
            # A B B A: each side runs twice, mirrored, so drift within the round (the
            # machine's, a checkpoint's, the queue's growth) falls on both sides alike; the
            # side that goes first changes every two rounds.
            first = SIDES if (r // 2) % 2 == 0 else SIDES[::-1]
            order = (*first, *first[::-1])
            for side in first:  # more than its two runs can consume
                prefill(brokers[side_of[side]], queue, 100, 2 * 80 * seconds, PUSH_PAYLOAD)
            waited = settle(db_url)
            run: dict[str, Any] = {"round": r + 1, "timers_at": holder, "order": list(order),
                                   "autovacuum_wait_s": waited, "load": load_average()}
            pushed = {side: 0.0 for side in SIDES}
            popped = {side: 0.0 for side in SIDES}
            # Each run's CPU seconds and messages, per side and workload: CPU per message
            # does not depend on how busy the machine is, as throughput does. The sides run
            # one at a time, so the cluster's CPU during a run is mostly that side's.
            spent: dict[tuple[str, str], list[tuple[dict[str, Any], int]]] = {
                (w, side): [] for w in ("push", "popack") for side in SIDES}
            for side in order:
                out = measure(brokers[side_of[side]] + "/api/v1/push", push_script,
                              seconds=seconds, connections=connections,
                              broker_pid=broker_pids[side_of[side]], pg_pid=pg_pid)
                assert out["non_2xx"] == 0, out
                pushed[side] += out["requests_per_s"] * 10 / 2
                spent["push", side].append((out, out["units"] * 10))
            for side in order:
                started = time.monotonic()
                out = measure(brokers[side_of[side]], popack_script, seconds=seconds,
                              connections=connections, broker_pid=broker_pids[side_of[side]],
                              pg_pid=pg_pid, count=partial(consumed, urls[side_of[side]], queue))
                popped[side] += out["units"] / (time.monotonic() - started) / 2
                spent["popack", side].append((out, out["units"]))
            for side in SIDES:
                run[f"push_{side}"] = round(pushed[side])
                run[f"popack_{side}"] = round(popped[side])
            run["push_ratio"] = round(run["push_with"] / run["push_without"], 3)
            run["popack_ratio"] = round(run["popack_with"] / run["popack_without"], 3)
            for workload in ("push", "popack"):
                us = {side: per_message(spent[workload, side]) for side in SIDES}
                for side in SIDES:
                    run[f"{workload}_cpu_us_{side}"] = us[side]
                total = {side: us[side]["broker"] + us[side]["postgres"] for side in SIDES}
                run[f"{workload}_cpu_ratio"] = round(total["with"] / total["without"], 3)
            log(json.dumps(run))
            runs.append(run)
            left = pg(urls[holder], "SELECT count(*) FROM queen.timers")
            assert left == pending, f"{pending - left} pending timers fired during the round"

    def summary(key: str) -> dict[str, float]:
        ratios = [run[key] for run in runs]
        return {"median_ratio": round(statistics.median(ratios), 3),
                "min": round(min(ratios), 3), "max": round(max(ratios), 3)}

    return {"pending_timers": pending, "rounds": rounds, "seconds_per_run": seconds,
            "connections": connections, "push_b10": summary("push_ratio"),
            "pop_ack_b10": summary("popack_ratio"),
            "push_b10_cpu_per_message": summary("push_cpu_ratio"),
            "pop_ack_b10_cpu_per_message": summary("popack_cpu_ratio"), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--due", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--schedules", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10, help="per wrk run (pending cost)")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--only", default="schedules,firing,pending",
                        help="the sections to run (results of the others are kept)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    path = Path(__file__).resolve().parent / "results" / "timers.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    with database() as db_url:
        if only & {"schedules", "firing"}:
            with broker(db_url) as (url, _proc, _own):
                if "schedules" in only:
                    results["schedules_per_second"] = round(trio.run(
                        schedules_per_second, url, args.schedules))
                    log(f"schedules: {results['schedules_per_second']}/s")
                    trio.run(trio_run_pg, db_url, "DELETE FROM queen.timers")
                if "firing" in only:
                    results["firing"] = trio.run(firing_lag, url, db_url, args.due, args.rate)
                    log(f"firing: {results['firing']}")
        if "pending" in only:
            results["pending_cost"] = pending_cost(db_url, args.rounds, args.seconds,
                                                   args.connections, args.pending)
            log(f"pending cost: push {results['pending_cost']['push_b10']}, "
                f"pop+ack {results['pending_cost']['pop_ack_b10']}; CPU per message: push "
                f"{results['pending_cost']['push_b10_cpu_per_message']}, pop+ack "
                f"{results['pending_cost']['pop_ack_b10_cpu_per_message']}")
    log(f"wrote {write_results('timers', results)}")


if __name__ == "__main__":
    main()
