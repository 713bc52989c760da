"""CPU per message of a JSON push against the 2.6 client's binary push, at one batch size:
what the broker, PostgreSQL and wrk spend (docs/performance.md, "The binary push's ceiling").

    python bench/push_cpu.py [--batch 100] [--workers 1] [--rounds 2] [--seconds 8]

One broker; the two bodies alternate in each round (100 partitions, one body per partition,
64 connections). Prints msg/s and µs per message of each process; no results file.
"""

from __future__ import annotations

import argparse
from contextlib import ExitStack

from common import broker, database, postmaster_pid, wrk
from cpu import measure
from push import lua_script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=8)
    args = parser.parse_args()
    bodies = {"json": lua_script(args.batch, 100), "binary": lua_script(args.batch, 100, "plain")}
    with ExitStack() as stack:
        db = stack.enter_context(database())
        url, proc, _ = stack.enter_context(broker(db, workers=args.workers))
        pg = postmaster_pid(db)
        wrk(url + "/api/v1/push", bodies["json"], connections=64, seconds=2)  # warm-up
        for _ in range(args.rounds):
            for name, script in bodies.items():
                run = measure(url + "/api/v1/push", script, seconds=args.seconds,
                              connections=64, broker_pid=proc.pid, pg_pid=pg)
                messages = max(run["units"] * args.batch, 1)
                print(f"{name:>6} {run['requests_per_s'] * args.batch:>9,.0f} msg/s  µs per "
                      f"message: broker {run['broker_cpu_s'] / messages * 1e6:5.2f}, "
                      f"PostgreSQL {run['postgres_cpu_s'] / messages * 1e6:5.2f}, "
                      f"wrk {run['wrk_cpu_s'] / messages * 1e6:4.2f}", flush=True)


if __name__ == "__main__":
    main()
