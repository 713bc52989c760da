"""The workers table of docs/performance.md, from one run: 1 worker against 2.

    python bench/workers_table.py [--seconds 10] [--rounds 3] [--connections 64]
                                  [--latency-messages 300] [--workers 1,2]

Two brokers run side by side on one embedded PostgreSQL: `serve --workers 1` and
`serve --workers 2` (each with `--worker-ports`), and two HTTP ceilings (bench/empty_app.py
under `serve --workers N --app`). Each round measures every row in turn, so machine noise
hits both alike; the table shows medians over the rounds.

Columns, per row:
- push at batch 1, 10 and 100 (msg/s; wrk, `--connections`, 100 partitions);
- autoAck pop and pop+ack at batch 1, 10 and 100 (msg/s, counted from the consumer cursors;
  each run on a prefilled queue of its own);
- push -> consume p50/p99 (ms) with one waiting consumer; with 2 workers the producer talks to
  worker 1 and the consumer to worker 2;
- peak memory (MB, PSS: shared pages counted once) of the broker's processes (supervisor
  and workers) and of PostgreSQL's;
- the CPU split over the throughput runs: broker, PostgreSQL and wrk, as shares of the total,
  and the total CPU per request;
- CPU per request (µs) of the broker for push batch 1, pop+ack batch 1 (per pair) and the
  empty app, and the ratios the issue sets targets for.

`--before PATH` compares instead the queen-trio checked out at PATH (`git worktree add PATH
<commit>`) with this one, each with its defaults (its own worker count), in the same
alternating rounds, on one database; this one also runs at 1 worker (`after-1w`). It adds the
binary push (the 2.6 client's body, as `binary_push=True` sends it) at batch 10 and 100, where
the code answers it (the before side may not: 0 there), and prints the after/before ratio of
every case, each the median of the per-round ratios, with the least before figure (the "no
lower" check of batch 100).

Results go to bench/results/workers_table.json; the table is printed as Markdown.
"""

from __future__ import annotations

import argparse
import json
import statistics
from contextlib import ExitStack
from pathlib import Path

import trio
from common import (
    TreeRss,
    broker,
    database,
    log,
    postmaster_pid,
    served_app,
    write_results,
)
from cpu import PAYLOAD, measure
from pop import AUTOACK_LUA, POPACK_LUA, consumed, lua_file, prefill, push_to_consume
from push import lua_script

# Messages per partition (100 partitions) to prefill per second of a run: above what the
# fastest side consumed on an idle machine (2026-12-04, 21:00), where the earlier figures
# (20 to 500) ran dry within the run. A run that ran its queue dry is flagged (`drained`).
PREFILL_PER_SECOND = {("autoack", 1): 60, ("autoack", 10): 500, ("autoack", 100): 2500,
                      ("popack", 1): 30, ("popack", 10): 250, ("popack", 100): 1000}
# Consumed this share of its prefill: the queue may have run dry before the run ended.
DRAINED_SHARE = 0.97


def one_row(workers: int | str, r: int, target: dict, args: argparse.Namespace) -> dict:
    url, pid, own = target["url"], target["pid"], target["own"]
    pg, db_url = target["pg"], target["db_url"]
    common = {"seconds": args.seconds, "connections": args.connections, "broker_pid": pid,
              "pg_pid": pg}
    row: dict = {"drained": []}
    cpu = {"broker": 0.0, "postgres": 0.0, "wrk": 0.0, "requests": 0}

    def account(run: dict) -> None:
        cpu["broker"] += run["broker_cpu_s"]
        cpu["postgres"] += run["postgres_cpu_s"]
        cpu["wrk"] += run["wrk_cpu_s"]
        cpu["requests"] += run["requests_per_s"] * args.seconds

    with TreeRss(pid) as broker_rss, TreeRss(pg) as pg_rss:
        for batch in (1, 10, 100):
            run = measure(url + "/api/v1/push", target["push"][batch], **common)
            row[f"push{batch}"] = round(run["requests_per_s"] * batch)
            if batch == 1:
                row["push1_broker_us"] = run["broker_us_per_unit"]
                row["push1_postgres_us"] = run["postgres_us_per_unit"]
            if batch == 10:
                row["push10_postgres_us_per_msg"] = round(
                    run["postgres_cpu_s"] / max(run["requests_per_s"] * args.seconds * 10, 1)
                    * 1e6, 1)
            account(run)
        for batch in target.get("binary", {}):
            run = measure(url + "/api/v1/push", target["binary"][batch], **common)
            ok = run["non_2xx"] == 0
            row[f"binary{batch}"] = round(run["requests_per_s"] * batch) if ok else 0
            account(run)
        for kind, script in (("autoack", AUTOACK_LUA), ("popack", POPACK_LUA)):
            for batch in (1, 10, 100):
                queue = f"bench.table.{workers}.{kind}.{batch}.{r}"
                per_partition = int(PREFILL_PER_SECOND[kind, batch] * args.seconds)
                prefill(url, queue, 100, per_partition, PAYLOAD)
                run = measure(url, lua_file(script % (queue, batch)),
                              count=lambda q=queue: consumed(db_url, q), **common)
                row[f"{kind}{batch}"] = round(run["units"] / args.seconds)
                if run["units"] >= DRAINED_SHARE * 100 * per_partition:
                    log(f"{kind} b{batch}: the queue ran dry, the figure is a floor")
                    row["drained"].append(f"{kind}{batch}")
                if (kind, batch) == ("popack", 1):
                    row["popack1_broker_us"] = run["broker_us_per_unit"]  # per pair
                    row["popack1_postgres_us"] = run["postgres_us_per_unit"]
                if (kind, batch) == ("popack", 10):
                    row["popack10_postgres_us_per_msg"] = run["postgres_us_per_unit"]
                account(run)
        latency = trio.run(push_to_consume, own[0], args.latency_messages, own[-1])
        row["latency_p50_ms"], row["latency_p99_ms"] = latency["p50_ms"], latency["p99_ms"]
    empty = measure(target["ceiling"] + "/", target["push"][1], seconds=args.seconds,
                    connections=args.connections, broker_pid=target["ceiling_pid"],
                    pg_pid=None)
    row["empty_requests_per_s"] = empty["requests_per_s"]
    row["empty_broker_us"] = empty["broker_us_per_unit"]
    row["broker_rss_mb"] = round(broker_rss.peak_mb, 1)
    row["postgres_rss_mb"] = round(pg_rss.peak_mb, 1)
    total = cpu["broker"] + cpu["postgres"] + cpu["wrk"]
    row["cpu_share"] = {k: round(cpu[k] / total, 3) for k in ("broker", "postgres", "wrk")}
    row["total_cpu_us_per_request"] = round(total / max(cpu["requests"], 1) * 1e6, 1)
    return row


def median_row(rows: list[dict]) -> dict:
    out: dict = {}
    for key, value in rows[0].items():
        if isinstance(value, dict):
            out[key] = {k: statistics.median(r[key][k] for r in rows) for k in value}
        elif isinstance(value, list):  # the runs that ran dry, in any round
            out[key] = sorted({case for r in rows for case in r[key]})
        elif isinstance(value, str):  # the load average: the middle round's, as text
            out[key] = statistics.median_low(r[key] for r in rows)
        else:
            out[key] = statistics.median(r[key] for r in rows)
    return out


def markdown(table: dict[int, dict]) -> str:
    head = ("| workers | push b1 | push b10 | push b100 | autoAck b1 | autoAck b10 | "
            "autoAck b100 | pop+ack b1 | pop+ack b10 | pop+ack b100 | push→consume p50/p99 ms "
            "| peak PSS MB broker / PG | CPU broker / PG / wrk | CPU µs per request |")
    lines = [head, "|" + "---:|" * 14]
    for workers, r in table.items():
        share = r["cpu_share"]
        lines.append(
            f"| {workers} | {r['push1']:,.0f} | {r['push10']:,.0f} | {r['push100']:,.0f} | "
            f"{r['autoack1']:,.0f} | {r['autoack10']:,.0f} | {r['autoack100']:,.0f} | "
            f"{r['popack1']:,.0f} | {r['popack10']:,.0f} | {r['popack100']:,.0f} | "
            f"{r['latency_p50_ms']:.1f} / {r['latency_p99_ms']:.1f} | "
            f"{r['broker_rss_mb']:.0f} / {r['postgres_rss_mb']:.0f} | "
            f"{share['broker']:.0%} / {share['postgres']:.0%} / {share['wrk']:.0%} | "
            f"{r['total_cpu_us_per_request']:,.0f} |")
    lines += ["", "| workers | empty app req/s | broker µs per push b1 (× empty) | "
                  "per pop+ack pair b1 (× empty) | empty app µs | PostgreSQL µs per push b1 |",
              "|" + "---:|" * 6]
    for workers, r in table.items():
        e = r["empty_broker_us"]
        lines.append(
            f"| {workers} | {r['empty_requests_per_s']:,.0f} | {r['push1_broker_us']:,.0f} "
            f"({r['push1_broker_us'] / e:.2f}×) | {r['popack1_broker_us']:,.0f} "
            f"({r['popack1_broker_us'] / e:.2f}×) | {e:,.0f} | {r['push1_postgres_us']:,.0f} |")
    return "\n".join(lines)


def checks(one: dict, two: dict) -> dict:
    """The issue's ratios, from a 1-worker and a 2-worker row."""
    return {
        "total_cpu_per_request_2w_over_1w": round(
            two["total_cpu_us_per_request"] / one["total_cpu_us_per_request"], 3),
        "empty_app_2w_over_1w": round(two["empty_requests_per_s"] / one["empty_requests_per_s"],
                                      3),
        "push1_over_empty_1w": round(one["push1_broker_us"] / one["empty_broker_us"], 3),
        "popack1_over_empty_1w": round(one["popack1_broker_us"] / one["empty_broker_us"], 3),
    }


CASES = ["push1", "push10", "push100", "binary10", "binary100", "autoack1", "autoack10",
         "autoack100", "popack1", "popack10", "popack100"]


def before_after(rows: dict[str, list[dict]]) -> dict:
    """Per case: after/before medians of the per-round ratios (default and 1 worker), and the
    batch-100 "no lower" check (the after median against the least before round)."""
    out: dict = {}
    for case in CASES:
        before = [r.get(case, 0) for r in rows["before"]]
        entry: dict = {"before_median": statistics.median(before), "before_min": min(before)}
        for side in ("after", "after-1w"):
            after = [r.get(case, 0) for r in rows[side]]
            entry[f"{side}_median"] = statistics.median(after)
            if all(before):
                entry[f"{side}_over_before"] = round(statistics.median(
                    a / b for a, b in zip(after, before, strict=True)), 3)
        if case.endswith("100"):
            entry["no_lower"] = entry["after_median"] >= entry["before_min"]
        out[case] = entry
    for side in ("before", "after", "after-1w"):
        json_100 = [r["push100"] for r in rows[side]]
        binary_100 = [r.get("binary100", 0) for r in rows[side]]
        if all(binary_100):
            out.setdefault("binary100_over_json100", {})[side] = round(statistics.median(
                b / j for b, j in zip(binary_100, json_100, strict=True)), 3)
    return out


def before_after_markdown(table: dict[str, dict], ratios: dict) -> str:
    lines = ["| case | before | after (default) | ×  | after, 1 worker | × |",
             "|---|---:|---:|---:|---:|---:|"]
    for case in CASES:
        e = ratios[case]
        lines.append(f"| {case} | {e['before_median']:,.0f} | {e['after_median']:,.0f} | "
                     f"{e.get('after_over_before', '-')} | {e['after-1w_median']:,.0f} | "
                     f"{e.get('after-1w_over_before', '-')} |")
    lines.append("")
    lines.append("| side | push→consume p50/p99 ms | peak PSS MB broker / PG | broker µs push b1 "
                 "| broker µs pop+ack pair b1 | empty app µs | PG µs push b1 | PG µs/msg push "
                 "b10 | PG µs pop+ack pair b1 | PG µs/msg pop+ack b10 |")
    lines.append("|---|" + "---:|" * 9)
    for side, r in table.items():
        lines.append(
            f"| {side} | {r['latency_p50_ms']:.1f} / {r['latency_p99_ms']:.1f} | "
            f"{r['broker_rss_mb']:.0f} / {r['postgres_rss_mb']:.0f} | "
            f"{r['push1_broker_us']:,.0f} | {r['popack1_broker_us']:,.0f} | "
            f"{r['empty_broker_us']:,.0f} | {r['push1_postgres_us']:,.0f} | "
            f"{r['push10_postgres_us_per_msg']:,.0f} | {r['popack1_postgres_us']:,.0f} | "
            f"{r['popack10_postgres_us_per_msg']:,.0f} |")
    return "\n".join(lines)


def main_before(args: argparse.Namespace) -> None:
    from queen_trio.settings import default_workers

    push = {b: lua_script(b, 100) for b in (1, 10, 100)}
    binary = {b: lua_script(b, 100, "plain") for b in (10, 100)}
    after_workers = default_workers()
    sides = {"before": None, "after": after_workers, "after-1w": 1}
    rows: dict[str, list[dict]] = {side: [] for side in sides}
    with database() as db_url, ExitStack() as stack:
        pg = postmaster_pid(db_url)
        targets = {}
        for side, w in sides.items():
            if w is None:
                url, proc, own = stack.enter_context(broker(db_url, code=args.before))
                w = 1  # the code this issue started from: 1 worker on 2 CPUs
            else:
                url, proc, own = stack.enter_context(broker(db_url, workers=w))
            ceiling, ceiling_proc, _ = stack.enter_context(served_app(w))
            targets[side] = {"url": url, "pid": proc.pid, "own": own, "pg": pg,
                             "db_url": db_url, "push": push, "binary": binary,
                             "ceiling": ceiling, "ceiling_pid": ceiling_proc.pid}
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for side in order:
                log(f"round {r + 1}/{args.rounds}: {side} (load {load_average()})")
                row = one_row(side, r, targets[side], args)
                row["load_average"] = load_average()
                log(json.dumps(row))
                rows[side].append(row)
    table = {side: median_row(rs) for side, rs in rows.items()}
    ratios = before_after(rows)
    results = {"seconds": args.seconds, "rounds": args.rounds, "connections": args.connections,
               "before": str(args.before), "after_workers": after_workers, "rows": rows,
               "median": table, "ratios": ratios}
    path = write_results("workers_table", results)
    print(before_after_markdown(table, ratios))
    print("\nratios: " + json.dumps(ratios))
    for side, row in table.items():
        if row["drained"]:
            print(f"ran dry in some round ({side}; figures are floors): {row['drained']}")
    print(f"results: {path}")


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--latency-messages", type=int, default=300)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--before", type=Path,
                        help="a checkout of the code to compare with, defaults on both sides")
    args = parser.parse_args()
    if args.before is not None:
        main_before(args)
        return
    counts = [int(w) for w in args.workers.split(",")]
    push = {b: lua_script(b, 100) for b in (1, 10, 100)}
    rows: dict[int, list[dict]] = {w: [] for w in counts}
    with database() as db_url, ExitStack() as stack:
        pg = postmaster_pid(db_url)
        targets = {}
        for w in counts:
            url, proc, own = stack.enter_context(broker(db_url, workers=w))
            ceiling, ceiling_proc, _ = stack.enter_context(served_app(w))
            targets[w] = {"url": url, "pid": proc.pid, "own": own, "pg": pg, "db_url": db_url,
                          "push": push, "ceiling": ceiling, "ceiling_pid": ceiling_proc.pid}
        for r in range(args.rounds):
            for w in counts:
                log(f"round {r + 1}/{args.rounds}: {w} worker(s)")
                row = one_row(w, r, targets[w], args)
                log(json.dumps(row))
                rows[w].append(row)
    table = {w: median_row(rs) for w, rs in rows.items()}
    results = {"seconds": args.seconds, "rounds": args.rounds, "connections": args.connections,
               "rows": rows, "median": table}
    if 1 in table and 2 in table:
        results["checks"] = checks(table[1], table[2])
        # The same ratios round by round (each round's rows ran back to back), and their
        # median: on a machine whose speed drifts between rounds, the pairing cancels it.
        per_round = [checks(one, two) for one, two in zip(rows[1], rows[2], strict=True)]
        results["checks_per_round"] = per_round
        results["checks_median_of_rounds"] = {
            key: round(statistics.median(c[key] for c in per_round), 3) for key in per_round[0]}
    path = write_results("workers_table", results)
    print(markdown(table))
    if "checks" in results:
        print("\nratios of the medians: " + json.dumps(results["checks"]))
        print("medians of the per-round ratios: "
              + json.dumps(results["checks_median_of_rounds"]))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
