"""What the consume path costs PostgreSQL per statement, steady and under a held xmin, counted
with pg_stat_statements and shown with EXPLAIN (ANALYZE, BUFFERS)
(docs/performance.md#the-claims-floor).

    python bench/claim_statements.py [--before PATH] [--seconds 20] [--hold-seconds 120]

One embedded PostgreSQL with pg_stat_statements (track = all: the statements inside
queen.pop_claim and queen.ack_batch are counted one by one; track_planning on: a statement
planned at every call shows plans = calls). Each side (`--before PATH`, a checkout run with
its defaults at 1 worker, then this checkout at 1 worker) gets a database of its own and the
same workload, one side after the other:

1. steady: 100 partitions prefilled with 3,000 messages each, pop+ack at batch 10 from 16 wrk connections for
   `--seconds`;
2. held: a REPEATABLE READ transaction reads one row and stays open while pop+ack (8
   connections) and pushes at batch 10 (2 connections) run beside it for `--hold-seconds`.

After each phase: per statement, calls, plans, buffers per call and µs per call (the µs
depend on the machine; calls, plans and buffers much less), the plan of the claim's
candidate scan, as each side's queen.pop_claim writes it, with its buffers, and the rows
written to consumer_state (how many of its updates were HOT) and the side tables that hold
its claim index since migration 0011 (docs/performance.md#hot-state-rows), with the WAL
written per request. Results go to
bench/results/claim_statements.json; the tables are printed as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import asyncpg
from common import broker, log, statements_database, write_results, wrk
from pop import POPACK_LUA, lua_file, prefill
from push import lua_script

QUEUE = "bench.claims"
PARTITIONS = 100

# The candidate scan of queen.pop_claim on each side, for EXPLAIN: before the claim's floor
# (a join of the partition rows, the index read from the start) and with it.
SCAN_JOINED = """
SELECT st.partition_id, st.cursor_offset, st.lease_id, st.delivered_until, st.retry_count,
       p.name AS pname
  FROM queen.consumer_state st JOIN queen.partitions p ON p.id = st.partition_id
 WHERE st.queue_id = $1 AND st.consumer_group = $2
   AND st.head_at IS NOT NULL AND st.head_at <= clock_timestamp()
   AND (st.lease_expires_at IS NULL OR st.lease_expires_at <= clock_timestamp())
   AND (st.not_before IS NULL OR st.not_before <= clock_timestamp())
 ORDER BY st.head_at, st.partition_id LIMIT 1 FOR UPDATE OF st SKIP LOCKED"""
SCAN_FROM_FLOOR = """
SELECT st.partition_id, st.cursor_offset, st.lease_id, st.delivered_until, st.retry_count
  FROM queen.consumer_state st
 WHERE st.queue_id = $1 AND st.consumer_group = $2
   AND st.head_at >= coalesce((SELECT s.claim_floor FROM queen.subscriptions s
                                WHERE s.queue_id = $1 AND s.consumer_group = $2),
                              '-infinity')
   AND st.head_at <= clock_timestamp()
   AND (st.lease_expires_at IS NULL OR st.lease_expires_at <= clock_timestamp())
   AND (st.not_before IS NULL OR st.not_before <= clock_timestamp())
 ORDER BY st.head_at, st.partition_id LIMIT 1 FOR UPDATE OF st SKIP LOCKED"""

SCAN_HEADS = """
SELECT st.partition_id, st.cursor_offset, st.lease_id, st.delivered_until, st.retry_count
  FROM queen.consumer_heads h
  JOIN queen.consumer_state st
    ON st.partition_id = h.partition_id AND st.consumer_group = h.consumer_group
 WHERE h.queue_id = $1 AND h.consumer_group = $2
   AND h.head_at >= coalesce((SELECT s.claim_floor FROM queen.subscriptions s
                               WHERE s.queue_id = $1 AND s.consumer_group = $2),
                             '-infinity')
   AND h.head_at <= clock_timestamp()
   AND (h.not_until IS NULL OR h.not_until <= clock_timestamp()) AND st.head_at = h.head_at
   AND (st.lease_expires_at IS NULL OR st.lease_expires_at <= clock_timestamp())
   AND (st.not_before IS NULL OR st.not_before <= clock_timestamp())
 ORDER BY h.head_at, h.partition_id LIMIT 1 FOR UPDATE OF st SKIP LOCKED"""

# Updates of the state rows (and how many were HOT), and the WAL written, over a phase.
TABLE_WRITES = """
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables
 WHERE schemaname = 'queen' AND relname IN ('consumer_state', 'consumer_heads',
                                            'consumer_leases')"""

STATEMENTS = """
SELECT calls, plans, total_exec_time AS ms, shared_blks_hit + shared_blks_read AS buffers,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS q
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1) AND calls > 0
 ORDER BY total_exec_time DESC LIMIT 14"""


async def sql(url: str, text: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(text, *args)
    finally:
        await conn.close()


def statements(admin: str, name: str) -> list[dict[str, Any]]:
    rows = asyncio.run(sql(admin, STATEMENTS, name))
    return [{"statement": r["q"], "calls": r["calls"], "plans": r["plans"],
             "buffers_per_call": round(r["buffers"] / r["calls"], 1),
             "us_per_call": round(1000 * r["ms"] / r["calls"], 1)} for r in rows]


async def explain(url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        queue_id, group = await conn.fetchrow(
            "SELECT cs.queue_id, cs.consumer_group FROM queen.consumer_state cs "
            "JOIN queen.queues q ON q.id = cs.queue_id WHERE q.name = $1 LIMIT 1", QUEUE)
        floored = await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'queen' "
            "AND table_name = 'subscriptions' AND column_name = 'claim_floor'")
        heads = await conn.fetchval("SELECT to_regclass('queen.consumer_heads') IS NOT NULL")
        scan, form = ((SCAN_HEADS, "through consumer_heads, from the floor") if heads else
                      (SCAN_FROM_FLOOR, "from the floor") if floored else
                      (SCAN_JOINED, "joined, from the start"))
        tx = conn.transaction()  # rolled back: the scan locks what it finds
        await tx.start()
        try:
            plan = [r[0] for r in await conn.fetch(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + scan, queue_id, group)]
        finally:
            await tx.rollback()
    finally:
        await conn.close()
    return {"scan": form, "plan": plan}


async def writes_mark(url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        await asyncio.sleep(2)  # the brokers' backends report their counts once idle
        rows = await conn.fetch(TABLE_WRITES)
        lsn = await conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
    finally:
        await conn.close()
    return {"wal": int(lsn), **{r["relname"]: dict(r) for r in rows}}


def writes_between(before: dict[str, Any], after: dict[str, Any], requests: float,
                   ) -> dict[str, Any]:
    """WAL bytes per wrk request of the phase (a pop or an ack; the held phase's pushes
    write beside them), and each table's row writes over the phase, with the share of its
    updates that were HOT."""
    out: dict[str, Any] = {"wal_bytes_per_request": round((after["wal"] - before["wal"])
                                                          / max(requests, 1))}
    for table, now in after.items():
        if table == "wal":
            continue
        was = before.get(table, {})
        delta = {k: now[k] - was.get(k, 0) for k in ("n_tup_ins", "n_tup_upd",
                                                     "n_tup_hot_upd", "n_tup_del")}
        out[table] = {**delta, "hot_share": round(delta["n_tup_hot_upd"]
                                                  / max(delta["n_tup_upd"], 1), 3)}
    return out


def run_side(admin: str, url: str, name: str, code: Path | None, args: argparse.Namespace,
             ) -> dict[str, Any]:
    side: dict[str, Any] = {}
    with broker(url, {"QUEEN_WORKERS": "1"}, workers=1, code=code) as (burl, _proc, _own):
        prefill(burl, QUEUE, PARTITIONS, 3000, {"n": 1})
        popack = lua_file(POPACK_LUA % (QUEUE, 10))
        wrk(burl, popack, connections=16, seconds=2)  # every statement planned once
        asyncio.run(sql(admin, "SELECT pg_stat_statements_reset()"))
        mark = asyncio.run(writes_mark(url))
        run = wrk(burl, popack, connections=16, seconds=args.seconds)
        side["steady"] = {"requests_per_s": run["requests_per_s"],
                          "writes": writes_between(mark, asyncio.run(writes_mark(url)),
                                                   run["requests"]),
                          "statements": statements(admin, name),
                          "explain": asyncio.run(explain(url))}
        log(f"{name}: steady done ({run['requests_per_s']:.0f} req/s)")

        async def hold(stop: threading.Event) -> None:
            conn = await asyncpg.connect(url)
            try:
                await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                await conn.fetchval("SELECT count(*) FROM queen.queues")
                while not stop.is_set():
                    await asyncio.sleep(0.2)
                await conn.execute("ROLLBACK")
            finally:
                await conn.close()

        stop = threading.Event()
        holder = threading.Thread(target=lambda: asyncio.run(hold(stop)))
        holder.start()
        try:
            time.sleep(1)
            pushes = lua_script(10, PARTITIONS)
            asyncio.run(sql(admin, "SELECT pg_stat_statements_reset()"))
            mark = asyncio.run(writes_mark(url))
            pushed: dict[str, Any] = {}
            producer = threading.Thread(target=lambda: pushed.update(
                wrk(burl, pushes, connections=2, seconds=args.hold_seconds, threads=1)))
            producer.start()
            run = wrk(burl, popack, connections=8, seconds=args.hold_seconds)
            producer.join()
            dead = asyncio.run(sql(url, "SELECT relname, n_dead_tup FROM pg_stat_user_tables "
                                        "WHERE relname IN ('consumer_state', 'partitions', "
                                        "'consumer_heads', 'consumer_leases')"))
            side["held"] = {"requests_per_s": run["requests_per_s"],
                            "push_requests_per_s": pushed.get("requests_per_s"),
                            "dead_tuples": {r["relname"]: r["n_dead_tup"] for r in dead},
                            "writes": writes_between(mark, asyncio.run(writes_mark(url)),
                                                     run["requests"]),
                            "statements": statements(admin, name),
                            "explain": asyncio.run(explain(url))}
        finally:
            stop.set()
            holder.join()
        log(f"{name}: held done ({run['requests_per_s']:.0f} req/s)")
    return side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="a checkout to run first, as `before`")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--hold-seconds", type=float, default=120)
    args = parser.parse_args()
    sides = [("before", args.before)] if args.before else []
    sides.append(("after", None))
    results: dict[str, Any] = {"seconds": args.seconds, "hold_seconds": args.hold_seconds}
    with statements_database("pg_stat_statements.track_planning = on") as admin:
        for name, code in sides:
            asyncio.run(sql(admin, f"CREATE DATABASE {name}"))
            url = admin.rsplit("/", 1)[0] + "/" + name + (
                "?" + admin.split("?", 1)[1] if "?" in admin else "")
            results[name] = run_side(admin, url, name, code, args)
    write_results("claim_statements", results)
    for name, _code in sides:
        for phase in ("steady", "held"):
            got = results[name][phase]
            print(f"\n### {name}, {phase} ({got['requests_per_s']:.0f} pop+ack requests/s"
                  + (f", dead tuples {got['dead_tuples']}" if "dead_tuples" in got else "")
                  + ")\n")
            print("| statement | calls | plans | buffers/call | µs/call |\n|---|---:|---:|---:|---:|")
            for s in got["statements"][:10]:
                print(f"| `{s['statement'][:90]}` | {s['calls']} | {s['plans']} | "
                      f"{s['buffers_per_call']} | {s['us_per_call']} |")
            print(f"\nRow writes over the phase: {got['writes']}")
            print(f"\nThe candidate scan ({got['explain']['scan']}):\n\n```")
            print("\n".join(got["explain"]["plan"]))
            print("```")


if __name__ == "__main__":
    main()
