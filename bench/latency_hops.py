"""Where a push -> woken pop trip spends its time, hop by hop, across the broker's processes.

    python bench/latency_hops.py [--workers 2] [--messages 300] [--slowest N]

The trip of bench/latency.py (one consumer parked in a long poll, batch 10, autoAck; a
producer pushing one message every 20 ms; with 2 workers the producer talks to worker 1 and
the consumer to worker 2), with raw HTTP/1.1 clients (bench/pop.py RawClient). Every broker
process loads bench/hops_site/sitecustomize.py, which stamps `time.perf_counter()` (one
monotonic clock for every process of the machine) at each hop:

    sent               the producer starts its request (the client's clock, same clock)
    bytes_in           the request's bytes are read from its socket (worker 1)
    app_call           hypercorn has parsed it (h11) and its app task calls queen-trio's app
    lane_submit        the push handler hands its group to the lane (worker 1)
    shard_dispatch     the shard committer starts its bundle
    aio_bundle_start   queen.push_bundle is sent, on the asyncio side of the bridge
    notify_received    the consumer's worker receives the commit's NOTIFY (its LISTEN connection)
    aio_bundle_end     queen.push_bundle's rows are back on worker 1's asyncio side
    shard_settled      worker 1's lane has settled the push
    claim_submit       the woken waiter asks for its claim (worker 2)
    claim_dispatch     the claim fusion starts queen.pop_many
    claim_back         the claim's rows are decoded and back on the trio side
    pop_answered       the consumer's pop has its delivery (the handler's reply follows)
    received           the consumer has the message (the client's clock)

It prints each hop's time since `sent` (p50/p90/p99 over the trips) and the median of each
step between consecutive hops of one trip, and then what PostgreSQL spent inside the functions
(`pg_stat_user_functions`, `track_functions = 'pl'` for the run) and the floor of the same
cluster measured apart on plain asyncio (no trio-asyncio): a `SELECT 1`, an INSERT's commit
with and without waiting for its WAL flush (the fsync), and a commit that sends a NOTIFY the
brokers' LISTEN connections hear. `--slowest N` also lists the N slowest trips, each step by
step next to the steps' medians, to see which steps make the tail (and whether the slow
trips come at a period, by their place in the run).

Results go to bench/results/latency_hops.json (latency_hops-workers-N.json otherwise). Wall
clock: on a shared machine read the steps as proportions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import trio
from common import broker, database, log, write_results
from pop import RawClient

SITE = Path(__file__).resolve().parent / "hops_site"
# The trip's hops, in the order the path reaches them (the steps are taken between these).
PATH = ("sent", "bytes_in", "app_call", "lane_submit", "shard_dispatch", "aio_bundle_start", "notify_received",
        "claim_submit", "claim_dispatch", "claim_back", "pop_answered", "received")
PUSH_SIDE = ("aio_bundle_end", "shard_settled")
# The steps between consecutive hops of the path, and the push side's own.
PATH_STEPS = tuple(zip(PATH, PATH[1:], strict=False))
PUSH_STEPS = (("aio_bundle_start", "aio_bundle_end"), ("aio_bundle_end", "shard_settled"))


async def drive(producer_url: str, consumer_url: str, messages: int
                ) -> tuple[list[float], dict[float, float]]:
    queue = "bench.hops"
    sent: list[float] = []
    received: dict[float, float] = {}
    pop_path = f"/api/v1/pop/queue/{queue}?wait=true&timeout=5000&batch=10&autoAck=true"
    async with RawClient(producer_url) as producer, RawClient(consumer_url) as consumer:
        status, _ = await producer.request("POST", "/api/v1/configure", {"queue": queue})
        assert status < 300, status

        async def consume() -> None:
            while len(received) < messages:
                status, data = await consumer.request("GET", pop_path)
                now = time.perf_counter()
                if status == 200:
                    for m in json.loads(data)["messages"]:
                        received[m["data"]["sent"]] = now

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await trio.sleep(0.5)
            for _ in range(messages):
                at = time.perf_counter()
                sent.append(at)
                status, _ = await producer.request(
                    "POST", "/api/v1/push", {"items": [{"queue": queue, "payload": {"sent": at}}]})
                assert status < 300, status
                await trio.sleep(0.02)
    return sent, received


def trips(log_base: str, sent: list[float], received: dict[float, float]) -> list[dict]:
    """One dict per trip: hop -> ms since `sent`. A trip's window runs to the next push; its
    NOTIFY is the one the consumer's worker (the process that answered the pop) received."""
    events: list[tuple[float, str, str]] = []
    folder = Path(log_base).parent
    for path in folder.glob(Path(log_base).name + ".*"):
        pid = path.suffix[1:]
        for line in path.read_text().splitlines():
            at, hop = line.split()
            events.append((float(at), pid, hop))
    events.sort()
    rows = []
    warm = min(20, len(sent) // 10)
    for i in range(warm, len(sent)):
        start = sent[i]
        end = sent[i + 1] if i + 1 < len(sent) else start + 0.02
        window = [(at, pid, hop) for at, pid, hop in events if start <= at < end]
        answered = next((pid for _, pid, hop in window if hop == "pop_answered"), None)
        row = {"sent": 0.0, "received": (received[start] - start) * 1000}
        for at, pid, hop in window:
            if hop == "notify_received" and pid != answered:
                continue
            row.setdefault(hop, (at - start) * 1000)
        rows.append(row)
    return rows


def steps_of(row: dict, pairs: tuple[tuple[str, str], ...] = PATH_STEPS) -> dict[str, float]:
    """One trip's time between each pair of hops it reached, ms, by "before -> after"."""
    return {f"{before} -> {after}": row[after] - row[before]
            for before, after in pairs if before in row and after in row}


def slowest(rows: list[dict], count: int) -> list[dict]:
    """The `count` slowest trips (by `received`), in the order of the run: each one's place
    in it and its steps in ms, after a first row of the steps' medians over every trip."""
    if not rows:
        return []
    every = [{step: round(ms, 3) for step, ms in steps_of(row).items()} for row in rows]
    medians = {step: round(statistics.median(s[step] for s in every if step in s), 3)
               for step in every[0]}
    worst = sorted(range(len(rows)), key=lambda i: rows[i]["received"])[-count:]
    return [{"trip": "median", "received": round(statistics.median(
                r["received"] for r in rows), 3), "steps": medians},
            *({"trip": i, "received": round(rows[i]["received"], 3), "steps": every[i]}
              for i in sorted(worst))]


def slowest_table(trips: list[dict]) -> str:
    """The slowest trips as rows of step times (ms), one column per step."""
    steps = list(trips[0]["steps"])
    head = "| trip | ms | " + " | ".join(s.replace(" -> ", " → ") for s in steps) + " |"
    lines = [head, "|" + "---|" * (len(steps) + 2)]
    for t in trips:
        lines.append(f"| {t['trip']} | {t['received']:.2f} | "
                     + " | ".join(f"{t['steps'].get(s, 0):.2f}" for s in steps) + " |")
    return "\n".join(lines)


def summarise(rows: list[dict]) -> dict:
    def pct(values: list[float], q: float) -> float:
        values = sorted(values)
        return round(values[max(int(len(values) * q) - 1, 0)], 3)

    hops = {}
    for hop in PATH + PUSH_SIDE:
        values = [r[hop] for r in rows if hop in r]
        if values:
            hops[hop] = {"p50_ms": round(statistics.median(values), 3),
                         "p90_ms": pct(values, 0.9), "p99_ms": pct(values, 0.99),
                         "trips": len(values)}
    every = [steps_of(r, PATH_STEPS + PUSH_STEPS) for r in rows]
    steps = {}
    for before, after in PATH_STEPS + PUSH_STEPS:
        step = f"{before} -> {after}"
        deltas = [s[step] for s in every if step in s]
        if deltas:
            steps[step] = {"p50_ms": round(statistics.median(deltas), 3),
                           "p90_ms": pct(deltas, 0.9)}
    return {"hops": hops, "steps": steps}


async def floor(db_url: str) -> dict:
    """Medians and p99s (ms) on plain asyncio: what the cluster itself costs per statement.
    The table is a regular one: a temporary table writes no WAL, and its commit flushes
    nothing. `synchronous_commit = off` is set here on this probe's own session only, to
    measure what the WAL flush costs a commit; the broker never turns it off."""
    import asyncpg

    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute("CREATE TABLE hop_probe (x int)")
        cases = {
            "select_1": "SELECT 1",
            "insert_commit": "INSERT INTO hop_probe VALUES (1)",
            "insert_commit_without_flush": "SET synchronous_commit = off; "
                                           "INSERT INTO hop_probe VALUES (1); "
                                           "SET synchronous_commit = on",
            # The brokers listen on queen_push; a queue nobody waits on wakes no waiter.
            "insert_notify_commit": "INSERT INTO hop_probe VALUES (1); "
                                    "SELECT pg_notify('queen_push', 'bench.hops.nobody')",
        }
        out: dict[str, dict[str, float]] = {}
        for name, sql in cases.items():
            samples = []
            for _ in range(300):
                t = time.perf_counter()
                await conn.execute(sql)
                samples.append((time.perf_counter() - t) * 1000)
            samples.sort()
            out[name] = {"p50_ms": round(statistics.median(samples), 3),
                         "p99_ms": round(samples[int(len(samples) * 0.99) - 1], 3)}
        await conn.execute("DROP TABLE hop_probe")
        return out
    finally:
        await conn.close()


CLAIM = ("SELECT m.request_no, (m.claim).* FROM queen.pop_many($1::text[], $2::text[], "
         "$3::text[], $4::int[], $5::int[], $6::uuid[], $7::bool[], $8::text[], "
         "$9::timestamptz[], $10::bool[]) m")


async def claim_commit(db_url: str, broker_url: str, rounds: int = 100) -> dict:
    """The claim of bench/latency.py's pop (queen.pop_many, autoAck, batch 10) right after a
    push, run by hand in a transaction: the statement, and its COMMIT with and without waiting
    for the WAL flush (alternating; `synchronous_commit = off` by SET LOCAL on this probe's
    session only, to measure the flush)."""
    import urllib.request
    import uuid

    import asyncpg

    def push(i: int) -> None:
        body = json.dumps({"items": [{"queue": "bench.hops.claim", "payload": i}]}).encode()
        urllib.request.urlopen(urllib.request.Request(
            broker_url + "/api/v1/push", data=body,
            headers={"content-type": "application/json"})).read()

    conn = await asyncpg.connect(db_url)
    figures: dict[str, list[float]] = {"statement": [], "commit": [],
                                       "statement_no_flush": [], "commit_no_flush": []}
    try:
        for i in range(2 * rounds + 2):
            push(i)
            flush = i % 2 == 0
            async with conn.transaction():
                if not flush:
                    await conn.execute("SET LOCAL synchronous_commit = off")
                t = time.perf_counter()
                rows = await conn.fetch(CLAIM, ["bench.hops.claim"], [None], ["__QUEUE_MODE__"],
                                        [10], [1], [uuid.uuid4()], [True], ["all"], [None],
                                        [None])
                claimed = time.perf_counter()
            committed = time.perf_counter()
            if i >= 2:  # the first two join the group
                assert rows and rows[0]["take_frames"], rows
                suffix = "" if flush else "_no_flush"
                figures["statement" + suffix].append((claimed - t) * 1000)
                figures["commit" + suffix].append((committed - claimed) * 1000)
    finally:
        await conn.close()
    out = {}
    for name, samples in figures.items():
        samples.sort()
        out[name] = {"p50_ms": round(statistics.median(samples), 3),
                     "p90_ms": round(samples[int(len(samples) * 0.9) - 1], 3),
                     "p99_ms": round(samples[int(len(samples) * 0.99) - 1], 3)}
    return out


async def admin(db_url: str, *statements: str) -> list:
    import asyncpg

    conn = await asyncpg.connect(db_url)
    try:
        rows: list = []
        for sql in statements:
            rows = await conn.fetch(sql)
        return [dict(r) for r in rows]
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--slowest", type=int, default=0, metavar="N",
                        help="also list the N slowest trips, step by step")
    args = parser.parse_args()
    log_base = str(Path(tempfile.mkdtemp(prefix="queen-hops-")) / "hop")
    path = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH")) if p)
    with database() as db_url:
        asyncio.run(admin(db_url, "ALTER SYSTEM SET track_functions = 'pl'",
                          "SELECT pg_reload_conf()"))
        with broker(db_url, {"PYTHONPATH": path, "HOP_LOG": log_base},
                    workers=args.workers) as (_, _, own):
            sent, received = trio.run(drive, own[0], own[-1], args.messages)
            time.sleep(1.5)  # the backends flush their function counts
            functions = asyncio.run(admin(
                db_url, "SELECT funcname AS function, calls, "
                        "round((total_time / calls)::numeric, 3)::float AS mean_ms, "
                        "round((self_time / calls)::numeric, 3)::float AS self_ms "
                        "FROM pg_stat_user_functions WHERE calls > 0 "
                        "ORDER BY total_time DESC LIMIT 8"))
            measured_floor = asyncio.run(floor(db_url))
            claim = asyncio.run(claim_commit(db_url, own[0]))
        asyncio.run(admin(db_url, "ALTER SYSTEM RESET track_functions",
                          "SELECT pg_reload_conf()"))
    rows = trips(log_base, sent, received)
    results = {"workers": args.workers, "messages": args.messages, **summarise(rows),
               "inside_functions": functions, "floor_ms": measured_floor,
               "claim_by_hand_ms": claim,
               "load_average": os.getloadavg()}
    if args.slowest:
        results["slowest_trips"] = slowest(rows, args.slowest)
    for hop, figures in results["hops"].items():
        log(f"{hop:18s} p50 {figures['p50_ms']:7.3f}  p90 {figures['p90_ms']:7.3f}  "
            f"p99 {figures['p99_ms']:7.3f} ms")
    for step, figures in results["steps"].items():
        log(f"step {step:38s} p50 {figures['p50_ms']:7.3f}  p90 {figures['p90_ms']:7.3f} ms")
    for row in functions:
        log(f"in {row['function']}: {row['calls']} calls, {row['mean_ms']} ms each "
            f"({row['self_ms']} ms its own)")
    log(f"floor on plain asyncio (ms): {measured_floor}")
    log(f"the pop's claim by hand, right after a push (ms): {claim}")
    if args.slowest:
        log("the slowest trips (ms; trip = its place in the run, after the warm-up):")
        log(slowest_table(results["slowest_trips"]))
    name = "latency_hops" if args.workers == 2 else f"latency_hops-workers-{args.workers}"
    print(f"results: {write_results(name, results)}")


if __name__ == "__main__":
    main()
