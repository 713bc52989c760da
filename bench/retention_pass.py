"""What one retention pass costs on a big dedup index, where retention removed nothing.

    python bench/retention_pass.py [--messages 3000000] [--partitions 100] [--rounds 3]
                                   [--before PATH]

A throwaway database (the embedded PostgreSQL unless DATABASE_URL is set) is seeded with one
queue of `--partitions` partitions holding `--messages` messages between them, straight in
SQL: one segment row per partition (the frames do not matter to retention) and one
`transaction_index` row per message, every one older than any dedup window. No queue has a
retention option, so a pass has nothing to remove. The script then times
`queen.retention_pass` (one call, as the retention service makes it, with no statement
timeout) `--rounds` times. With `--before PATH` (a `git worktree add PATH <commit>`), the
function as that checkout defines it is installed beside this one under another name and the
two alternate. Results go to bench/results/retention_pass.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import asyncpg
from common import database, log, write_results

FUNCTION = Path("queen_trio") / "storage" / "sql" / "functions" / "retention_pass.sql"
BEFORE = "retention_pass_before"

SEED = """
WITH q AS (
    INSERT INTO queen.queues (name, namespace, task) VALUES ('bench.retention', 'bench', '')
    RETURNING id
), parts AS (
    INSERT INTO queen.partitions (queue_id, name, next_offset, last_commit_at)
    SELECT q.id, 'p' || n, $2::bigint, now() - interval '1 day'
      FROM q, generate_series(1, $1::integer) n
    RETURNING id
)
INSERT INTO queen.segments (partition_id, first_offset, message_count, created_at, frames,
                            frame_ends)
SELECT parts.id, 0, $2::integer, now() - interval '1 day', '\\x00'::bytea, ARRAY[1]
  FROM parts
"""
INDEX = """
INSERT INTO queen.transaction_index (partition_id, transaction_id, message_offset, created_at)
SELECT p.id, 'tx-' || o, o, now() - interval '1 day'
  FROM queen.partitions p, generate_series(0, $1::bigint - 1) o
"""


async def run(db_url: str, args: argparse.Namespace) -> dict:
    conn = await asyncpg.connect(db_url)
    try:
        from queen_trio.storage.schema import apply_migrations

        await apply_migrations(conn)
        sides = [("now", "retention_pass")]
        if args.before is not None:
            text = (args.before / FUNCTION).read_text()
            await conn.execute(text.replace("queen.retention_pass(", f"queen.{BEFORE}(", 1))
            sides.insert(0, ("before", BEFORE))
        per_partition = args.messages // args.partitions
        started = time.monotonic()
        await conn.execute(SEED, args.partitions, per_partition)
        await conn.execute(INDEX, per_partition)
        await conn.execute("VACUUM ANALYZE")
        log(f"seeded {per_partition * args.partitions:,} index rows in "
            f"{time.monotonic() - started:.1f} s")
        await conn.execute("SET statement_timeout = 0")
        seconds: dict[str, list[float]] = {name: [] for name, _ in sides}
        for r in range(args.rounds):
            for name, function in sides:
                started = time.monotonic()
                row = await conn.fetchrow(f"SELECT * FROM queen.{function}(NULL, 1000)")
                took = time.monotonic() - started
                assert row is not None and row["pruned"] == 0, dict(row or {})
                seconds[name].append(took)
                log(f"round {r + 1}: {name} {took * 1000:,.1f} ms")
    finally:
        await conn.close()
    return {"messages": per_partition * args.partitions, "partitions": args.partitions,
            "ms": {name: [round(s * 1000, 1) for s in runs] for name, runs in seconds.items()},
            "median_ms": {name: round(statistics.median(runs) * 1000, 1)
                          for name, runs in seconds.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=3_000_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path,
                        help="a checkout whose retention_pass to compare with")
    args = parser.parse_args()
    with database() as db_url:
        result = asyncio.run(run(db_url, args))
    path = write_results("retention_pass", result)
    for name, ms in result["median_ms"].items():
        print(f"{name}: {ms:,.1f} ms per pass (median of {args.rounds}), "
              f"{result['messages']:,} index rows over {result['partitions']} partitions")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
