"""What finding a group's head costs as a partition keeps more segments: queen.head_after.

    python bench/head_after.py [--segments 100,10000,100000] [--calls 300] [--rounds 3]
                               [--before PATH]

Every ack that settles a partition's last message, and every autoAck claim that takes it, asks
`queen.head_after` for the message at the cursor, which is then past the last segment; a claim
or an ack in the middle of a partition asks for one inside a segment. For each size, one
partition gets that many segments of 10 messages, and one connection calls the function
`--calls` times at the end ("caught up") and inside the last segment, in `--rounds`
alternating rounds; the figure is µs per call (a round trip from this client, so about 150 µs
of it is the trip); results go to bench/results/head_after.json. With `--before PATH` (a `git worktree add PATH <commit>`), that checkout's
function is installed beside this one under another name and called in the same rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import asyncpg
from common import database, write_results

FUNCTION = Path("queen_trio") / "storage" / "sql" / "functions" / "head_after.sql"
OLD = "head_after_before"


async def run(db_url: str, args: argparse.Namespace) -> list[dict]:
    conn = await asyncpg.connect(db_url)
    try:
        from queen_trio.storage.schema import apply_migrations

        await apply_migrations(conn)
        functions = ["head_after"]
        if args.before is not None:
            old = (args.before / FUNCTION).read_text()
            await conn.execute(old.replace("queen.head_after(", f"queen.{OLD}(", 1))
            functions.insert(0, OLD)
        await conn.execute("INSERT INTO queen.queues (name) VALUES ('bench.head')")
        partition = await conn.fetchval(
            "INSERT INTO queen.partitions (queue_id, name) SELECT id, 'p' FROM queen.queues "
            "RETURNING id")
        out = []
        for size in args.segments:
            await conn.execute("DELETE FROM queen.segments")
            await conn.execute(
                "INSERT INTO queen.segments (partition_id, first_offset, message_count, "
                "created_at, frames, frame_ends) SELECT $1, o * 10, 10, now(), '\\x00'::bytea, "
                "ARRAY[1] FROM generate_series(0, $2 - 1) o", partition, size)
            await conn.execute("VACUUM ANALYZE queen.segments")
            cursors = {"caught up": size * 10, "inside": size * 10 - 5}
            times: dict[tuple[str, str], list[float]] = {}
            for function in functions:  # every plan made before the clock starts
                for cursor in cursors.values():
                    for _ in range(20):
                        await conn.fetchval(f"SELECT queen.{function}($1, $2)", partition, cursor)
            for _ in range(args.rounds):
                for function in functions:
                    for where, cursor in cursors.items():
                        started = time.perf_counter()
                        for _ in range(args.calls):
                            await conn.fetchval(f"SELECT queen.{function}($1, $2)",
                                                partition, cursor)
                        times.setdefault((function, where), []).append(
                            (time.perf_counter() - started) / args.calls * 1e6)
            for (function, where), values in times.items():
                out.append({"segments": size, "function": function, "cursor": where,
                            "us_per_call": round(statistics.median(values)),
                            "rounds": [round(v) for v in values]})
        return out
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", default="100,10000,100000",
                        type=lambda text: [int(n) for n in text.split(",")])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a checkout whose head_after to compare")
    args = parser.parse_args()
    with database() as db_url:
        rows = asyncio.run(run(db_url, args))
    for row in rows:
        print(f"{row['segments']:>7} segments  {row['function']:>17}  {row['cursor']:>9}: "
              f"{row['us_per_call']:>6} µs per call  (rounds {row['rounds']})")
    print(f"results: {write_results('head_after', {'calls': args.calls, 'rounds': rows})}")


if __name__ == "__main__":
    main()
