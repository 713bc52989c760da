"""What a pool checkout costs the broker: `SELECT 1` through `Database.call`, checked out per
call against held (`Database.holding`), in alternating rounds.

    python bench/hold.py [--calls 1500] [--rounds 7]

One caller, one trio-asyncio loop, a pool of 6; the figure is this process's CPU time
(user + system) per call, median and min of the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio
from common import database

from queen_trio.storage.database import open_database
from queen_trio.storage.sql import Q


async def run(db_url: str, calls: int, rounds: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"checked out per call": [], "held": []}
    async with open_database(db_url, pool_size=6) as db:
        await db.ready.wait()

        async def loop() -> float:
            started = time.process_time()
            for _ in range(calls):
                await db.fetchval(Q.ping)
            return (time.process_time() - started) / calls * 1e6

        await loop()  # warm
        for _ in range(rounds):
            results["checked out per call"].append(await loop())
            async with db.holding():
                results["held"].append(await loop())
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with database() as db_url:
        results = trio.run(run, db_url, args.calls, args.rounds)
    for name, values in results.items():
        print(f"{name}: {statistics.median(values):.0f} µs CPU per call (median), min "
              f"{min(values):.0f}; rounds {[round(v) for v in values]}")


if __name__ == "__main__":
    main()
