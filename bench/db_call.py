"""What one `Database.call` costs beyond its statement: the pool's checkout and release.

    python bench/db_call.py [--calls 3000] [--rounds 2]

In one process, against one database (DATABASE_URL, else an embedded cluster), `SELECT 1`
timed four ways, rounds alternating:

- `call`: `Database.call`, as every request path makes it (a pool checkout and release);
- `held`: the same inside `Database.holding()` (one connection kept across calls);
- `crossing`: `run_aio_coroutine(conn.fetchval(...))` on a connection held by hand: the
  trio-asyncio crossing and the statement, nothing else;
- `checkout`: `pool.acquire()` then `pool.release()` in one crossing, no statement.

p50 and p90 in ms per variant (median over rounds). Results go to bench/results/db_call.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from common import database, log, write_results

from queen_trio.storage.database import Database, open_database


async def timed(calls: int, one: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await one()
        times.append(time.perf_counter() - started)
    times.sort()
    return {"p50_ms": times[len(times) // 2] * 1000, "p90_ms": times[len(times) * 9 // 10] * 1000}


async def variants(db: Database, calls: int) -> dict[str, dict[str, float]]:
    loop, pool = db._loop, db._pool  # the bench looks inside on purpose

    async def select_one(conn: Any) -> Any:
        return await conn.fetchval("SELECT 1")

    async def checkout() -> None:
        await pool.release(await pool.acquire(timeout=2.0))

    out = {"call": await timed(calls, lambda: db.call(select_one))}
    async with db.holding():
        out["held"] = await timed(calls, lambda: db.call(select_one))
    conn = await loop.run_aio_coroutine(pool.acquire())
    try:
        out["crossing"] = await timed(
            calls, lambda: loop.run_aio_coroutine(conn.fetchval("SELECT 1")))
    finally:
        await loop.run_aio_coroutine(pool.release(conn))
    out["checkout"] = await timed(calls, lambda: loop.run_aio_coroutine(checkout()))
    return out


async def run(url: str, calls: int, rounds: int) -> dict[str, Any]:
    runs = []
    async with open_database(url) as db:
        await db.ready.wait()
        for r in range(rounds):
            runs.append(await variants(db, calls))
            log(f"round {r + 1}: " + ", ".join(
                f"{k} {v['p50_ms']:.3f}/{v['p90_ms']:.3f}" for k, v in runs[-1].items()))
    return {name: {q: round(statistics.median(run[name][q] for run in runs), 3)
                   for q in ("p50_ms", "p90_ms")} for name in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with database() as url:
        results = trio.run(run, url, args.calls, args.rounds)
    results["calls"], results["rounds"] = args.calls, args.rounds
    print(f"wrote {write_results('db_call', results)}")
    for name in ("call", "held", "crossing", "checkout"):
        print(f"{name:9s} p50 {results[name]['p50_ms']:.3f} ms  p90 {results[name]['p90_ms']:.3f} ms")


if __name__ == "__main__":
    main()
