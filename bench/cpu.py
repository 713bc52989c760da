"""CPU per request: what the broker (and PostgreSQL, and wrk) spend on each request.

    python bench/cpu.py [--workers 1] [--seconds 5] [--rounds 3] [--connections 64]
                        [--cases push1,push10,autoack1,popack1,empty]
                        (also autoack10, popack10) [--no-crossing]
                        [--before PATH]

Each case runs wrk for `--seconds` against one `queen-trio serve --workers N`, and reads the
CPU seconds (user + system, from /proc, reaped children included) of every broker process,
of every PostgreSQL process (the postmaster's tree) and of wrk, before and after:

- push1, push10: POST /api/v1/push, one body per partition (100), batch 1 or 10;
- autoack1, autoack10: GET /api/v1/pop/queue/Q?batch=1 (or 10)&autoAck=true on a prefilled
  queue (autoack10: per message consumed, from the consumer cursors);
- popack1, popack10: a pop at batch 1 (or 10), then an ack of what it got (per message
  consumed: per pair at batch 1);
- empty: bench/empty_app.py served by the same `serve --workers N --app` (the HTTP ceiling).

Cases alternate within each round, so machine noise hits them alike; the table shows each
figure's median over the rounds and its spread (min to max). It also measures the
trio-asyncio crossing: CPU per `SELECT 1` with 8 concurrent callers through the broker's own
Database (trio, trio-asyncio, asyncpg) against plain asyncio and asyncpg.

`--before PATH` also runs every broker case against the queen-trio checked out at PATH (a
`git worktree add PATH <commit>`), on a database of its own, in the same alternating rounds:
the before and after of a change, through the same noise.

Results go to bench/results/cpu.json (cpu-workers-N.json with more than one worker).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import ExitStack
from pathlib import Path

from common import (
    broker,
    database,
    log,
    postmaster_pid,
    served_app,
    tree_cpu_seconds,
    write_results,
    wrk,
)
from pop import AUTOACK_LUA, POPACK_LUA, consumed, lua_file, prefill
from push import lua_script

PAYLOAD = {"orderId": 8891, "customer": "customer-42", "total": 42.5}


def measure(url: str, script, *, seconds: float, connections: int, broker_pid: int,  # type: ignore[no-untyped-def]
            pg_pid: int | None, count=None) -> dict:
    """One wrk run: requests, and CPU seconds of the broker, PostgreSQL and wrk over it.
    `count()` gives the unit to divide by (default: wrk's requests)."""
    counted = count() if count else 0
    b0 = tree_cpu_seconds(broker_pid)
    p0 = tree_cpu_seconds(pg_pid) if pg_pid else 0.0
    run = wrk(url, script, connections=connections, seconds=seconds)
    b1 = tree_cpu_seconds(broker_pid)
    p1 = tree_cpu_seconds(pg_pid) if pg_pid else 0.0
    units = (count() - counted) if count else run["requests"]
    return {"units": units, "requests_per_s": run["requests_per_s"],
            "broker_cpu_s": round(b1 - b0, 3), "postgres_cpu_s": round(p1 - p0, 3),
            "wrk_cpu_s": run["wrk_cpu_s"], "non_2xx": run["non_2xx"],
            "broker_us_per_unit": round((b1 - b0) / max(units, 1) * 1e6, 1),
            "postgres_us_per_unit": round((p1 - p0) / max(units, 1) * 1e6, 1)}


def crossing_cost(db_url: str, calls: int = 4000, callers: int = 8) -> dict:
    """CPU µs per `SELECT 1` with `callers` concurrent callers: the broker's Database (trio ->
    trio-asyncio -> asyncpg pool) against plain asyncio with the same asyncpg pool."""
    import asyncio

    import asyncpg
    import trio

    from queen_trio.storage.database import open_database
    from queen_trio.storage.sql import Q

    async def through_trio() -> float:
        async with open_database(db_url, pool_size=callers, apply_migrations=False) as db:
            await db.fetchval(Q.ping)  # the pool's connections open before the clock starts

            async def caller(n: int) -> None:
                for _ in range(n):
                    await db.fetchval(Q.ping)

            async with trio.open_nursery() as nursery:
                for _ in range(callers):
                    nursery.start_soon(caller, 10)
            started = time.process_time()
            async with trio.open_nursery() as nursery:
                for _ in range(callers):
                    nursery.start_soon(caller, calls // callers)
            return time.process_time() - started

    async def plain_asyncio() -> float:
        pool = await asyncpg.create_pool(db_url, min_size=callers, max_size=callers)
        try:
            async def caller(n: int) -> None:
                for _ in range(n):
                    async with pool.acquire() as conn:
                        await conn.fetchval("SELECT 1")

            await asyncio.gather(*(caller(10) for _ in range(callers)))
            started = time.process_time()
            await asyncio.gather(*(caller(calls // callers) for _ in range(callers)))
            return time.process_time() - started
        finally:
            await pool.close()

    trio_s = trio.run(through_trio)
    asyncio_s = asyncio.run(plain_asyncio())
    return {"callers": callers, "calls": calls,
            "trio_asyncio_us_per_call": round(trio_s / calls * 1e6, 1),
            "asyncio_us_per_call": round(asyncio_s / calls * 1e6, 1)}


def summarise(runs: list[dict], key: str) -> dict:
    values = [r[key] for r in runs]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--cases", default="push1,push10,autoack1,popack1,empty")
    parser.add_argument("--no-crossing", action="store_true")
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    args = parser.parse_args()
    cases = args.cases.split(",")
    if args.before is not None:
        cases += [f"before:{c}" for c in cases if c != "empty"]
    runs: dict[str, list[dict]] = {c: [] for c in cases}
    results: dict = {"workers": args.workers, "seconds": args.seconds, "rounds": args.rounds,
                     "connections": args.connections}
    push1, push10 = lua_script(1, 100), lua_script(10, 100)
    with ExitStack() as stack:
        db_url = stack.enter_context(database())
        url, proc, _ = stack.enter_context(broker(db_url, workers=args.workers))
        ceiling_url, ceiling, _ = stack.enter_context(served_app(args.workers))
        pg = postmaster_pid(db_url)
        if args.before is not None:
            old_db = stack.enter_context(database())
            old_url, old_proc, _ = stack.enter_context(broker(
                old_db, {"QUEEN_WORKERS": str(args.workers)}, code=args.before))
            old = {"url": old_url, "pid": old_proc.pid, "db": old_db,
                   "pg": postmaster_pid(old_db)}
        common = {"seconds": args.seconds, "connections": args.connections}
        wrk(url + "/api/v1/push", push1, connections=args.connections, seconds=2)  # warm-up
        for r in range(args.rounds):
            for case in cases:
                log(f"round {r + 1}/{args.rounds}: {case}")
                name = case
                target = {"url": url, "pid": proc.pid, "db": db_url, "pg": pg}
                if case.startswith("before:"):
                    name, target = case.split(":", 1)[1], old
                if name in ("push1", "push10"):
                    batch = 1 if name == "push1" else 10
                    run = measure(target["url"] + "/api/v1/push", push1 if batch == 1 else push10,
                                  broker_pid=target["pid"], pg_pid=target["pg"], **common)
                    run["messages"] = run["units"] * batch
                    run["postgres_us_per_message"] = round(
                        run["postgres_cpu_s"] / max(run["messages"], 1) * 1e6, 1)
                elif name in ("autoack1", "popack1", "autoack10", "popack10"):
                    queue = f"bench.cpu.{name}.{r}"
                    batch = 10 if name.endswith("10") else 1
                    # Enough for a run (wrk stops with pops in flight: a queue per run).
                    prefill(target["url"], queue, 100, int(40 * batch * args.seconds), PAYLOAD)
                    script = (AUTOACK_LUA if name.startswith("autoack") else POPACK_LUA) % (
                        queue, batch)
                    count = None if name == "autoack1" else (
                        lambda q=queue, d=target["db"]: consumed(d, q))
                    run = measure(target["url"], lua_file(script), broker_pid=target["pid"],
                                  pg_pid=target["pg"], count=count, **common)
                elif name == "empty":
                    run = measure(ceiling_url + "/api/v1/push", push1,
                                  broker_pid=ceiling.pid, pg_pid=None, **common)
                else:
                    raise SystemExit(f"unknown case {case}")
                log(json.dumps(run))
                runs[case].append(run)
        if not args.no_crossing:
            results["crossing"] = crossing_cost(db_url)
            log(f"crossing: {results['crossing']}")
    results["runs"] = runs
    results["summary"] = {case: {key: summarise(rs, key) for key in (
        "broker_us_per_unit", "postgres_us_per_unit", "requests_per_s")}
        for case, rs in runs.items()}
    for case in ("push1", "before:push1"):
        if case in runs:
            results["summary"][case]["postgres_us_per_message"] = summarise(
                runs[case], "postgres_us_per_message")
    name = "cpu" if args.workers == 1 else f"cpu-workers-{args.workers}"
    path = write_results(name, results)
    empty = results["summary"].get("empty", {}).get("broker_us_per_unit", {}).get("median")
    print(f"workers {args.workers}: broker CPU per request (µs; median [min-max] of "
          f"{args.rounds} rounds)")
    print(f"{'case':<10} {'broker µs':>20} {'x empty':>8} {'PostgreSQL µs':>20} {'req/s':>8}")
    for case, s in results["summary"].items():
        b, p = s["broker_us_per_unit"], s["postgres_us_per_unit"]
        ratio = f"{b['median'] / empty:.2f}" if empty else "-"
        print(f"{case:<10} {b['median']:>8.0f} [{b['min']:.0f}-{b['max']:.0f}]".ljust(31)
              + f" {ratio:>8} {p['median']:>8.0f} [{p['min']:.0f}-{p['max']:.0f}]".ljust(30)
              + f" {s['requests_per_s']['median']:>8.0f}")
    if "push1" in results["summary"]:
        m = results["summary"]["push1"]["postgres_us_per_message"]
        print(f"PostgreSQL CPU per batch-1 pushed message: {m['median']:.0f} µs")
    if "crossing" in results:
        c = results["crossing"]
        print(f"SELECT 1 x{c['callers']} concurrent: trio-asyncio {c['trio_asyncio_us_per_call']} "
              f"µs CPU per call, plain asyncio {c['asyncio_us_per_call']} µs")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
