"""The floor under a latency trip on this machine: what one database round trip and one
commit cost when the processes are idle between them, as they are in `bench/latency.py`
(one message every 20 ms), against back to back.

    python bench/idle_floor.py [--calls 400] [--rounds 2]

Against one database (DATABASE_URL, else an embedded cluster, durable), timed per call:

- `select_asyncio`: `SELECT 1` on plain asyncio with asyncpg;
- `select_trio`: the same from trio through trio-asyncio (`run_aio_coroutine`), as the
  broker makes every call;
- `commit`: a one-row INSERT and its COMMIT on plain asyncio, `synchronous_commit` on;
- `commit_async`: the same with `synchronous_commit = off` on this session only (the
  flush's share of a commit; the broker keeps it on: docs/decisions.md);
- `commit_notify`: the durable commit with a NOTIFY that two LISTEN connections hear (a
  push's commit with two workers).

Each with no gap between calls and with a 20 ms sleep before each. p50 / p90 / p99 in ms
(median over rounds). Results go to bench/results/idle_floor.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import asyncpg
import trio
import trio_asyncio
from common import database, log, write_results

GAPS = (0.0, 0.02)


def percentiles(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99)}


async def timed(calls: int, gap: float, one: Callable[[], Awaitable[object]],
                sleep: Callable[[float], Awaitable[None]]) -> list[float]:
    times = []
    for _ in range(calls):
        if gap:
            await sleep(gap)
        started = time.perf_counter()
        await one()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def on_asyncio(url: str, calls: int, gap: float) -> dict[str, list[float]]:
    conn = await asyncpg.connect(url)
    listeners = [await asyncpg.connect(url) for _ in range(2)]
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS idle_floor (id bigserial PRIMARY KEY)")
        for listener in listeners:
            await listener.add_listener("idle_floor", lambda *_: None)

        async def commit(notify: bool = False) -> None:
            async with conn.transaction():
                await conn.execute("INSERT INTO idle_floor DEFAULT VALUES")
                if notify:
                    await conn.execute("NOTIFY idle_floor")

        out = {"select_asyncio": await timed(calls, gap, lambda: conn.fetchval("SELECT 1"),
                                             asyncio.sleep),
               "commit": await timed(calls, gap, commit, asyncio.sleep),
               "commit_notify": await timed(calls, gap, lambda: commit(True), asyncio.sleep)}
        await conn.execute("SET synchronous_commit = off")
        out["commit_async"] = await timed(calls, gap, commit, asyncio.sleep)
        return out
    finally:
        for listener in listeners:
            await listener.close()
        await conn.close()


async def on_trio(url: str, calls: int, gap: float) -> dict[str, list[float]]:
    async with trio_asyncio.open_loop() as loop:
        conn = await loop.run_aio_coroutine(asyncpg.connect(url))
        try:
            return {"select_trio": await timed(
                calls, gap, lambda: loop.run_aio_coroutine(conn.fetchval("SELECT 1")),
                trio.sleep)}
        finally:
            await loop.run_aio_coroutine(conn.close())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, dict[str, list[dict[str, float]]]] = {}
    with database() as url:
        for round_no in range(1, args.rounds + 1):
            for gap in GAPS:
                label = f"gap {gap * 1000:g} ms"
                log(f"round {round_no}/{args.rounds}, {label}")
                times = asyncio.run(on_asyncio(url, args.calls, gap))
                times |= trio.run(on_trio, url, args.calls, gap)
                for variant, values in times.items():
                    runs.setdefault(label, {}).setdefault(variant, []).append(
                        percentiles(values))
    results: dict = {"calls": args.calls, "rounds": args.rounds, "variants": {}}
    for label, variants in runs.items():
        for variant, figures in variants.items():
            merged = {key: round(statistics.median(f[key] for f in figures), 3)
                      for key in figures[0]}
            results["variants"].setdefault(label, {})[variant] = merged
            log(f"{label:10s} {variant:15s} p50 {merged['p50_ms']:6.3f}  "
                f"p90 {merged['p90_ms']:6.3f}  p99 {merged['p99_ms']:6.3f} ms")
    log(f"results: {write_results('idle_floor', results)}")


if __name__ == "__main__":
    main()
