"""The operations routes on a big dataset (issue 9).

    python bench/admin.py [--messages 1000000] [--partitions 1000] [--groups 10]
                          [--segment 100] [--requests 300]

Builds one queue of `messages` in `partitions` partitions through queen.push_bundle directly
(segments of `segment` messages, 100 segments per call), spreads their commit times over the
last two hours, joins `groups` consumer groups at different cursors (some with live leases,
one with a dead letter per partition, a few deleted messages), then starts a broker process and
measures each route with sequential requests on one keep-alive connection: p50 and p99 in ms,
as the client sees them. Targets: overview, queue list, queue detail, depth, consumer-group
list and lagging under 50 ms p99; message list and status under 200 ms p99. Results go to
bench/results/admin.json.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import asyncpg
import httpx
import uuid_utils
from common import broker, database, log, write_results

from queen_trio.storage import frames
from queen_trio.storage.schema import apply_migrations

QUEUE = "bench.admin"
PAYLOAD = b'{"orderId":12345,"customer":"c-42","total":19.99,"items":3}'
BUNDLE = 100  # segments per push_bundle call

TARGETS_MS = {"overview": 50, "queue list": 50, "queue detail": 50, "depth": 50,
              "depth (group)": 50, "consumer-group list": 50, "lagging": 50,
              "message list": 200, "message list (offset 5000)": 200,
              "message list (pending)": 200, "status": 200}

ROUTES = [
    ("overview", "/api/v1/resources/overview"),
    ("queue list", "/api/v1/resources/queues"),
    ("queue detail", f"/api/v1/resources/queues/{QUEUE}"),
    ("depth", f"/api/v1/resources/queues/{QUEUE}/depth"),
    ("depth (group)", f"/api/v1/resources/queues/{QUEUE}/depth?group=g5"),
    ("consumer-group list", "/api/v1/consumer-groups"),
    ("lagging", "/api/v1/consumer-groups/lagging?minLagSeconds=60"),
    ("message list", "/api/v1/messages"),
    ("message list (offset 5000)", f"/api/v1/messages?queue={QUEUE}&offset=5000&limit=200"),
    ("message list (pending)", f"/api/v1/messages?queue={QUEUE}&status=pending"),
    ("status", "/api/v1/status"),
    ("partitions", f"/api/v1/resources/partitions?queue={QUEUE}&limit=1000"),
    ("status queue detail", f"/api/v1/status/queues/{QUEUE}"),
    ("prometheus", "/metrics/prometheus"),
]


def segment_arguments(partitions: list[str], first: int, size: int) -> dict:
    counts, blobs, ends, txids = [], [], [], []
    for _partition in partitions:
        packed, at = [], 0
        for n in range(size):
            message_id = uuid_utils.uuid7()
            txid = f"tx-{first + n}-{message_id}"
            frame = frames.pack(message_id.bytes, txid.encode(), PAYLOAD)
            packed.append(frame)
            at += len(frame)
            ends.append(at)
            txids.append(txid)
        counts.append(size)
        blobs.append(b"".join(packed))
    n = len(partitions)
    return {"queues": [QUEUE] * n, "partitions": partitions, "encrypted": [False] * n,
            "dedup": [False] * n, "counts": counts, "frames": blobs, "ends": ends,
            "txids": txids}


async def build(url: str, messages: int, partitions: int, groups: int, size: int) -> float:
    started = time.perf_counter()
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn)
        # Dedup off: the probe has nothing to do with the routes measured, and costs the build.
        await conn.execute("INSERT INTO queen.queues (name, namespace, task, dedup_window_seconds) "
                           "VALUES ($1, 'bench', 'admin', 0)", QUEUE)
        names = [f"p{i:04d}" for i in range(partitions)]
        per_partition = messages // partitions
        rounds = per_partition // size
        for r in range(rounds):
            for start in range(0, partitions, BUNDLE):
                args = segment_arguments(names[start:start + BUNDLE], r * size, size)
                await conn.execute(
                    "SELECT count(*) FROM queen.push_bundle($1, $2, $3, $4, $5, $6, $7, $8, false)",
                    args["queues"], args["partitions"], args["encrypted"], args["dedup"],
                    args["counts"], args["frames"], args["ends"], args["txids"])
            log(f"  pushed {(r + 1) * size * partitions:,} messages")
        total = per_partition
        # Commit times spread over the last two hours, monotone per partition.
        await conn.execute(
            "UPDATE queen.segments SET created_at = now() - interval '2 hours' "
            "+ (first_offset::float8 / $1) * interval '2 hours'", float(total))
        await conn.execute("UPDATE queen.partitions SET last_commit_at = now(), "
                           "last_write_at = now()")
        queue_id = await conn.fetchval("SELECT id FROM queen.queues WHERE name = $1", QUEUE)
        for g in range(groups):
            await conn.execute("SELECT queen.join_group($1, $2, NULL)", queue_id, f"g{g}")
        # Group k has consumed about k tenths of each partition.
        await conn.execute(
            "UPDATE queen.consumer_state cs SET cursor_offset = c.at, "
            "head_at = queen.head_after(cs.partition_id, c.at) "
            "FROM (SELECT partition_id, consumer_group, least($1::bigint, "
            "  substr(consumer_group, 2)::int * ($1 / 10) + abs(hashtext(partition_id::text)) % 50) AS at "
            "  FROM queen.consumer_state) c "
            "WHERE cs.partition_id = c.partition_id AND cs.consumer_group = c.consumer_group",
            total)
        # Live leases for g0 on a tenth of the partitions; a dead letter per partition for g1.
        await conn.execute(
            "UPDATE queen.consumer_state SET lease_id = gen_random_uuid(), "
            "lease_expires_at = now() + interval '1 hour', delivered_until = cursor_offset + 10 "
            "WHERE consumer_group = 'g0' AND abs(hashtext(partition_id::text)) % 10 = 0")
        await conn.fetchval(
            "SELECT count(queen.dead_letter(partition_id, 'g1', cursor_offset - 1, 'bench', 0)) "
            "FROM queen.consumer_state WHERE consumer_group = 'g1' AND cursor_offset > 0")
        # A few deleted messages: the hidden paths of the figures are exercised too.
        await conn.fetchval(
            "SELECT count(d.*) FROM (SELECT p.id, t.transaction_id FROM queen.partitions p "
            "CROSS JOIN LATERAL (SELECT transaction_id FROM queen.transaction_index t "
            "WHERE t.partition_id = p.id ORDER BY message_offset DESC LIMIT 1) t LIMIT 10) m, "
            "LATERAL queen.delete_message(m.id, m.transaction_id) d")
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    return time.perf_counter() - started


def percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(round(q * (len(sorted_ms) - 1))))]


def measure(url: str, requests: int) -> dict:
    results = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        r = client.post("/api/v1/stats/refresh")
        r.raise_for_status()
        for name, path in ROUTES:
            for _ in range(10):
                client.get(path).raise_for_status()
            times = []
            size = 0
            for _ in range(requests):
                started = time.perf_counter()
                r = client.get(path)
                times.append((time.perf_counter() - started) * 1000)
                r.raise_for_status()
                size = len(r.content)
            times.sort()
            results[name] = {"p50_ms": round(percentile(times, 0.50), 2),
                             "p99_ms": round(percentile(times, 0.99), 2),
                             "max_ms": round(times[-1], 2), "reply_bytes": size,
                             "target_ms": TARGETS_MS.get(name)}
            log(f"  {name:28} p50 {results[name]['p50_ms']:8.2f} ms   "
                f"p99 {results[name]['p99_ms']:8.2f} ms")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--segment", type=int, default=100)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    with database() as url:
        log(f"building {args.messages:,} messages in {args.partitions} partitions, "
            f"{args.groups} groups")
        built = asyncio.run(build(url, args.messages, args.partitions, args.groups,
                                  args.segment))
        log(f"built in {built:.1f} s")
        with broker(url) as (base, _proc, _):
            results = measure(base, args.requests)
    print(f"\n{'route':28} {'p50 ms':>8} {'p99 ms':>8} {'target':>7}  met")
    for name, r in results.items():
        target = r["target_ms"]
        met = "" if target is None else ("yes" if r["p99_ms"] < target else "NO")
        print(f"{name:28} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
              f"{'' if target is None else target:>7}  {met}")
    path = write_results("admin", {"messages": args.messages, "partitions": args.partitions,
                                   "groups": args.groups, "segment": args.segment,
                                   "requests": args.requests, "build_seconds": round(built, 1),
                                   "routes": results})
    log(f"results: {path}")


if __name__ == "__main__":
    main()
