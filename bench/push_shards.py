"""Push throughput against the push lane's shard count per worker, in alternating rounds.

    python bench/push_shards.py [--configs 2x4,2x2,1x4] [--seconds 8] [--rounds 3]
                                [--connections 64]

Each config `WxS` is a broker of W workers with QUEEN_PUSH_SHARDS=S (each worker's shard
committers; `Wx-` leaves the setting unset, the default); all run side by side on one
embedded PostgreSQL. Every round runs wrk against each in turn (push at batch 1, 10, then
100, over 100 partitions), and reads:

- messages per second;
- `queen.push_bundle` calls per request at batch 1 (pg_stat_user_functions: fewer calls per
  request means bigger bundles, one commit for more pushes);
- the broker's and PostgreSQL's CPU per request at batch 1 (µs).

The table shows each config's medians over the rounds. Results go to
bench/results/push_shards.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from contextlib import ExitStack

import asyncpg
from common import (
    broker,
    database,
    function_times,
    log,
    postmaster_pid,
    track_functions,
    tree_cpu_seconds,
    write_results,
    wrk,
)
from push import lua_script


async def bundle_calls(db_url: str) -> int:
    conn = await asyncpg.connect(db_url)
    try:
        return (await function_times(conn, ("push_bundle",))).get("push_bundle", (0, 0.0))[0]
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default="2x4,2x2,1x4")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    configs = args.configs.split(",")
    keys = ("push1", "push10", "push100", "bundle_calls_per_request_b1", "broker_us_b1", "postgres_us_b1")
    runs: dict[str, dict[str, list[float]]] = {c: {k: [] for k in keys} for c in configs}
    scripts = {1: lua_script(1, 100), 10: lua_script(10, 100), 100: lua_script(100, 100)}
    with database() as db_url, ExitStack() as stack:
        track_functions(db_url)
        pg = postmaster_pid(db_url)
        brokers = {}
        for config in configs:
            workers, shards = config.split("x")
            env = {} if shards == "-" else {"QUEEN_PUSH_SHARDS": shards}
            url, proc, _ = stack.enter_context(broker(db_url, env, workers=int(workers)))
            brokers[config] = (url, proc.pid)
        for r in range(args.rounds):
            for config in configs if r % 2 == 0 else list(reversed(configs)):
                url, pid = brokers[config]
                for batch, script in scripts.items():
                    calls0, broker0, pg0 = (asyncio.run(bundle_calls(db_url)),
                                            tree_cpu_seconds(pid), tree_cpu_seconds(pg))
                    run = wrk(url + "/api/v1/push", script, connections=args.connections,
                              seconds=args.seconds)
                    calls1, broker1, pg1 = (asyncio.run(bundle_calls(db_url)),
                                            tree_cpu_seconds(pid), tree_cpu_seconds(pg))
                    requests = max(run["requests_per_s"] * args.seconds, 1)
                    runs[config][f"push{batch}"].append(round(run["requests_per_s"] * batch))
                    if batch == 1:
                        got = runs[config]
                        got["bundle_calls_per_request_b1"].append(
                            round((calls1 - calls0) / requests, 3))
                        got["broker_us_b1"].append(round((broker1 - broker0) / requests * 1e6))
                        got["postgres_us_b1"].append(round((pg1 - pg0) / requests * 1e6))
                log(f"round {r + 1}/{args.rounds} {config}: "
                    + json.dumps({k: v[-1] for k, v in runs[config].items()}))
    medians = {c: {k: statistics.median(v) for k, v in got.items()} for c, got in runs.items()}
    path = write_results("push_shards", {"seconds": args.seconds, "rounds": args.rounds,
                                         "connections": args.connections, "runs": runs,
                                         "median": medians})
    print("| workers × shards | push b1 msg/s | push b10 msg/s | push b100 msg/s | push_bundle "
          "calls per request b1 | broker µs b1 | PostgreSQL µs b1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for config, m in medians.items():
        print(f"| {config} | {m['push1']:,.0f} | {m['push10']:,.0f} | {m['push100']:,.0f} | "
              f"{m['bundle_calls_per_request_b1']:.3f} | {m['broker_us_b1']:,.0f} | "
              f"{m['postgres_us_b1']:,.0f} |")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
