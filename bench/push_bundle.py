"""PostgreSQL's own work per pushed message: queen.push_bundle called directly.

    python bench/push_bundle.py [--calls 2000] [--rounds 5] [--batch 1] [--partitions 100]
                                [--before PATH]

One connection calls `queen.push_bundle` `--calls` times, one segment of `--batch` messages
per call, cycling over `--partitions` partitions (so the dedup probe runs on a warm index, as
in production); the CPU of that connection's backend is read from /proc before and after
(user + system), so nothing else on the machine is counted. With `--before PATH` (a `git
worktree add PATH <commit>`), the function as that checkout defines it is installed beside
this one under another name in the throwaway database (it must write the same tables), and
the two are called in alternating rounds. The script reports µs of backend CPU per call and
per message, with WAL bytes per message. Needs the database on this host.

(The figures in docs/performance.md under "PostgreSQL's work per message" compared the
function with its text in migration 0011, from before the migrations were squashed into
0001; that comparison is now `--before` a checkout of that time.)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import uuid
from pathlib import Path

import asyncpg
from common import CLOCK_TICKS, _stat_fields, database

from queen_trio.storage import frames

FUNCTION = Path("queen_trio") / "storage" / "sql" / "functions" / "push_bundle.sql"
OLD = "push_bundle_before"


def backend_cpu(pid: int) -> float:
    fields = _stat_fields(pid)
    assert fields, pid
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def run(db_url: str, args: argparse.Namespace) -> dict:
    conn = await asyncpg.connect(db_url)
    try:
        from queen_trio.storage.schema import apply_migrations

        await apply_migrations(conn)
        if args.before is not None:
            old = (args.before / FUNCTION).read_text()
            await conn.execute(old.replace("queen.push_bundle(", f"queen.{OLD}(", 1))
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        payload = b'{"orderId":8891,"customer":"customer-42","total":42.5}'

        async def calls(function: str, n: int, tag: str) -> tuple[float, int]:
            wal0 = await conn.fetchval("SELECT pg_current_wal_lsn()")
            cpu0 = backend_cpu(pid)
            for i in range(n):
                ids = [uuid.uuid4() for _ in range(args.batch)]
                packed = [frames.pack(m.bytes, f"{tag}-{i}-{j}".encode(), payload)
                          for j, m in enumerate(ids)]
                ends, at = [], 0
                for p in packed:
                    at += len(p)
                    ends.append(at)
                await conn.fetch(
                    f"SELECT * FROM queen.{function}($1, $2, $3, $4, $5, $6, $7, $8, true)",
                    ["bench.bundle"], [f"p{i % args.partitions}"], [False], [True],
                    [args.batch], [b"".join(packed)], ends,
                    [f"{tag}-{i}-{j}" for j in range(args.batch)])
            cpu = backend_cpu(pid) - cpu0
            wal = await conn.fetchval("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)", wal0)
            return cpu, int(wal)

        await calls("push_bundle", args.partitions, "warm")  # every partition exists
        sides = [("now", "push_bundle")]
        if args.before is not None:
            sides.insert(0, ("before", OLD))
        results: dict[str, list[tuple[float, int]]] = {name: [] for name, _ in sides}
        for r in range(args.rounds):
            for name, function in sides:
                results[name].append(await calls(function, args.calls, f"{name}{r}"))
    finally:
        await conn.close()
    messages = args.calls * args.batch
    out = {}
    for name, runs in results.items():
        out[name] = {
            "us_per_call": round(statistics.median(c for c, _ in runs) / args.calls * 1e6, 1),
            "us_per_message": round(statistics.median(c for c, _ in runs) / messages * 1e6, 1),
            "wal_bytes_per_message": round(statistics.median(w for _, w in runs) / messages),
            "rounds_us_per_call": [round(c / args.calls * 1e6, 1) for c, _ in runs]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--before", type=Path,
                        help="a checkout whose push_bundle to compare with")
    args = parser.parse_args()
    with database() as db_url:
        out = asyncio.run(run(db_url, args))
    for name, o in out.items():
        print(f"{name}: {o['us_per_call']} µs "
              f"backend CPU per call, {o['us_per_message']} µs per message, "
              f"{o['wal_bytes_per_message']} WAL bytes per message; rounds "
              f"{o['rounds_us_per_call']}")
    print(f"batch {args.batch}, {args.calls} calls per round, {args.rounds} rounds alternating")


if __name__ == "__main__":
    main()
