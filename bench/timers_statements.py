"""What pending timers cost PostgreSQL, counted rather than timed (docs/performance.md#timers).

    python bench/timers_statements.py [--pending 100000] [--idle 10]

One broker on an embedded PostgreSQL with pg_stat_statements (track = all: statements inside
SQL functions too). Three phases: no timers; `--pending` timers due an hour ahead (seeded,
then VACUUM ANALYZE and CHECKPOINT); none again (deleted, VACUUM). Each phase runs the same
fixed workload: 300 pushes of 10 messages, 300 pops of 10 each acked with /ack/batch, one
/metrics/prometheus scrape, one GET /api/v1/status/timers, then `--idle` seconds of nothing
(the sweepers' probes). Per statement: calls, buffers (shared hit + read) and execution ms,
phase by phase: calls and buffers do not depend on how busy the machine is. Then EXPLAIN
(ANALYZE, BUFFERS) of the timer statements with 10 timers due beside the pending ones (in a
transaction rolled back): the sweeper's probe, its claim, the fire's delete by claim token,
and the per-queue count behind the gauges.

Results go to bench/results/timers_statements.json; the table is printed as Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from common import broker, log, statements_database, write_results

SEED = """INSERT INTO queen.timers (queue, timer_key, deliver_at, txn, message_id, payload)
          SELECT 'bench.pending', 'k' || n, clock_timestamp() + interval '1 hour',
                 'k' || n, gen_random_uuid(), '{}'::bytea FROM generate_series(1, $1::integer) n"""
DUE = """INSERT INTO queen.timers (queue, timer_key, deliver_at, txn, message_id, payload)
         SELECT 'bench.due', 'd' || n, clock_timestamp() - interval '1 second',
                'd' || n, gen_random_uuid(), '{}'::bytea FROM generate_series(1, 10) n"""
SQL = Path(__file__).resolve().parent.parent / "queen_trio" / "storage" / "sql" / "queries"


def query(name: str) -> str:
    return "\n".join(line for line in (SQL / f"{name}.sql").read_text().splitlines()
                     if not line.startswith("--"))


EXPLAINS = {
    "probe (timers_next)": query("timers_next"),
    "claim (timers_claim, 10 due)": "SELECT * FROM queen.timers_claim(gen_random_uuid(), 1000, 256)",
    "fire's delete (timers_take)": query("timers_take").replace(":token::uuid", "$1::uuid")
    .replace(":queues::text[]", "NULL::text[]").replace(":keys::text[]", "NULL::text[]"),
    "gauges (timers_queues)": query("timers_queues"),
}
TIMER_STATEMENTS = ("queen.timers", "timers_claim", "timers_apply")


def workload(url: str, idle: float) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        for n in range(300):
            c.post("/api/v1/push", json={"items": [
                {"queue": "bench.load", "partition": f"p{n % 8}", "payload": {"n": i}}
                for i in range(10)]}).raise_for_status()
        for _ in range(300):
            r = c.get("/api/v1/pop/queue/bench.load", params={"batch": 10})
            if r.status_code == 204:
                continue
            c.post("/api/v1/ack/batch", json={"acknowledgments": [
                {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                 "status": "completed", "leaseId": m["leaseId"]}
                for m in r.json()["messages"]]}).raise_for_status()
        c.get("/metrics/prometheus").raise_for_status()
        c.get("/api/v1/status/timers").raise_for_status()
    time.sleep(idle)


async def run_sql(url: str, *statements: str, args: tuple[Any, ...] = ()) -> list[Any]:
    conn = await asyncpg.connect(url)
    try:
        out = []
        for sql in statements:
            if "$1" in sql:
                out.append(await conn.fetch(sql, *args))
            elif sql.lstrip().startswith("SELECT"):
                out.append(await conn.fetch(sql))
            else:
                out.append(await conn.execute(sql))
        return out
    finally:
        await conn.close()


async def statement_stats(url: str) -> dict[str, dict[str, float]]:
    rows = (await run_sql(url, """
        SELECT calls, total_exec_time AS ms, shared_blks_hit + shared_blks_read AS buffers,
               left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS q
          FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""))[0]
    return {r["q"]: {"calls": r["calls"], "ms": round(r["ms"], 1), "buffers": r["buffers"]}
            for r in rows}


async def explains(url: str) -> dict[str, dict[str, Any]]:
    conn = await asyncpg.connect(url)
    out = {}
    try:
        for name, sql in EXPLAINS.items():
            tx = conn.transaction()
            await tx.start()
            await conn.execute(DUE)
            args = (uuid.uuid4(),) if "$1" in sql else ()
            plan = [r[0] for r in await conn.fetch(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + sql, *args)]
            await tx.rollback()
            out[name] = {"plan": plan,
                         "buffers": next((sum(int(x) for x in _hits(line)) for line in plan
                                          if _hits(line)), 0),
                         "ms": float(next(line for line in plan
                                          if line.startswith("Execution Time")).split()[2])}
    finally:
        await conn.close()
    return out


def _hits(line: str) -> list[str]:
    import re
    found = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", line)
    return [g for g in found.groups() if g] if found else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()
    phases: dict[str, Any] = {}
    with statements_database() as url, broker(url) as (burl, _proc, _own):
        workload(burl, 0)  # warm up
        for phase in ("none", "pending", "none again"):
            if phase == "pending":
                asyncio.run(run_sql(url, SEED, args=(args.pending,)))
            if phase == "none again":
                asyncio.run(run_sql(url, "DELETE FROM queen.timers"))
            asyncio.run(run_sql(url, "VACUUM ANALYZE queen.timers", "CHECKPOINT"))
            plans = asyncio.run(explains(url))
            asyncio.run(run_sql(url, "SELECT pg_stat_statements_reset()"))
            workload(burl, args.idle)
            phases[phase] = {"statements": asyncio.run(statement_stats(url)),
                             "explain": plans}
            log(f"{phase}: done")
    names = list(phases)
    every = sorted({q for p in phases.values() for q in p["statements"]},
                   key=lambda q: -max(p["statements"].get(q, {}).get("ms", 0)
                                      for p in phases.values()))
    shown = every[:8] + [q for q in every[8:] if any(t in q for t in TIMER_STATEMENTS)]
    print("| statement | calls | buffers | ms |\n|---|---|---|---|")
    for q in shown:
        cells = [[str(phases[n]["statements"].get(q, {}).get(k, 0)) for n in names]
                 for k in ("calls", "buffers", "ms")]
        print(f"| `{q[:70]}` | " + " | ".join(" / ".join(c) for c in cells) + " |")
    print(f"\n(each cell: {' / '.join(names)})\n\n| EXPLAIN, 10 due | "
          + " | ".join(names) + " |\n|---|---|---|---|")
    for name in EXPLAINS:
        print(f"| {name} | " + " | ".join(
            f"{phases[n]['explain'][name]['buffers']} buffers, "
            f"{phases[n]['explain'][name]['ms']} ms" for n in names) + " |")
    log(f"wrote {write_results('timers_statements', {'pending': args.pending, **phases})}")


if __name__ == "__main__":
    main()
