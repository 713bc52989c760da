"""Soak: mixed push, pop and ack load for a while, with consumers killed at random and,
optionally, PostgreSQL restarted. Counts what was lost, duplicated and misordered, samples the
broker's RSS, and plots RSS and throughput over time.

    python bench/soak.py --minutes 30 --plot docs/soak.png [--pg-restarts] [--rate 500]

Needs the `bench` extra (`pip install '.[bench]'`: matplotlib, httpx). The database is a
fresh embedded PostgreSQL in a temporary directory (so it can be restarted), and the broker
runs as `python -m queen_trio serve` on a free loopback port.

Load: `--producers` producers, each owning one partition of the queue `soak.load`, push
batches of `--batch` messages (payload: partition and sequence number, transactionId unique)
at `--rate` messages per second in all; a batch that is not accepted whole is pushed again
(the transaction ids make that a duplicate at worst). `--consumers` consumers long-poll in
queue mode (`batch` 20) and ack each delivery with /ack/batch. A killer cancels a random
consumer every 1 to `--kill-every` seconds, wherever it is: parked in a long poll (its socket
closes), or holding a delivery it never acks (the lease, 5 s here, runs out and the messages
come back). A new consumer takes its place. With `--pg-restarts`, PostgreSQL is stopped for a
few seconds every `--restart-every` seconds (pushes spool meanwhile).

At the end the producers stop, the consumers drain what is left (up to `--drain-seconds`),
and the report counts, per message: lost (accepted, never delivered), unconsumed (accepted,
never acked), duplicated (acked more than once, or stored more than once), misordered (first
acks of a partition out of sequence), dead-lettered; and RSS after warm-up against the end.
Consumption is read from the database (each partition's cursor against its next offset): an
ack whose reply a restart cut off still moved the cursor, and is counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import trio
from common import ROOT, free_port, log, wait_http

QUEUE = "soak.load"


class Books:
    """What the load generator saw."""

    def __init__(self) -> None:
        self.accepted: dict[str, set[int]] = defaultdict(set)
        self.delivered: Counter[tuple[str, int]] = Counter()
        self.acked: Counter[tuple[str, int]] = Counter()
        self.first_acks: dict[str, list[int]] = defaultdict(list)
        self.pushed_total = 0
        self.acked_total = 0
        self.kills = 0
        self.restarts = 0
        self.errors: Counter[str] = Counter()


def rss_mb(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmRSS:\s+(\d+)", text)
    return int(match.group(1)) / 1024 if match else None


async def producer(url: str, partition: str, books: Books, per_second: float, batch: int,
                   stop: trio.Event) -> None:
    seq = 0
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while not stop.is_set():
            started = trio.current_time()
            items = [{"queue": QUEUE, "partition": partition,
                      "transactionId": f"{partition}-{n}",
                      "payload": {"partition": partition, "seq": n}}
                     for n in range(seq, seq + batch)]
            while True:  # the same batch until it is accepted whole
                try:
                    r = await client.post("/api/v1/push", json={"items": items})
                    entries = r.json()
                    if isinstance(entries, list) and all(
                            e["status"] in ("queued", "duplicate", "buffered") for e in entries):
                        break
                    books.errors[f"push {r.status_code}"] += 1
                except (httpx.HTTPError, ValueError) as exc:
                    books.errors[f"push {type(exc).__name__}"] += 1
                await trio.sleep(0.2)
            books.accepted[partition].update(range(seq, seq + batch))
            books.pushed_total += batch
            seq += batch
            await trio.sleep_until(started + batch / per_second)


async def consumer(url: str, books: Books, stop: trio.Event) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while not stop.is_set():
            try:
                r = await client.get(f"/api/v1/pop/queue/{QUEUE}",
                                     params={"wait": "true", "timeout": "1000", "batch": "20"})
                if r.status_code == 204:
                    continue
                if r.status_code != 200:
                    books.errors[f"pop {r.status_code}"] += 1
                    await trio.sleep(0.2)
                    continue
                messages = r.json()["messages"]
                for m in messages:
                    books.delivered[(m["data"]["partition"], m["data"]["seq"])] += 1
                r = await client.post("/api/v1/ack/batch", json={"acknowledgments": [
                    {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "completed"} for m in messages]})
                if r.status_code != 200:
                    books.errors[f"ack {r.status_code}"] += 1
                    continue
                for result in r.json():
                    if result["success"]:
                        data = messages[result["index"]]["data"]
                        key = (data["partition"], data["seq"])
                        books.acked[key] += 1
                        books.acked_total += 1
                        if books.acked[key] == 1:
                            books.first_acks[data["partition"]].append(data["seq"])
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                books.errors[f"consume {type(exc).__name__}"] += 1
                await trio.sleep(0.2)


async def consumers_with_killer(url: str, books: Books, count: int, kill_every: float,
                                stop: trio.Event, killing: dict[str, bool]) -> None:
    scopes: list[trio.CancelScope] = []

    async def one() -> None:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            try:
                await consumer(url, books, stop)
            finally:
                scopes.remove(scope)

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
        while not stop.is_set():
            with trio.move_on_after(random.uniform(1, kill_every)):
                await stop.wait()
            if killing["on"] and scopes and not stop.is_set():
                random.choice(scopes).cancel()  # wherever it is
                books.kills += 1
                nursery.start_soon(one)


async def restarter(cluster, books: Books, every: float, stop: trio.Event) -> None:
    while True:
        with trio.move_on_after(every):
            await stop.wait()
        if stop.is_set():
            return
        log("soak: stopping PostgreSQL")
        await trio.to_thread.run_sync(lambda: cluster.stop(mode="fast"))
        await trio.sleep(3)
        await trio.to_thread.run_sync(cluster.start)
        books.restarts += 1
        log("soak: PostgreSQL is back")


async def sampler(pid: int, books: Books, samples: list[dict], stop: trio.Event,
                  started: float) -> None:
    last_pushed = last_acked = 0
    while not stop.is_set():
        with trio.move_on_after(1.0):
            await stop.wait()
        samples.append({"t": round(time.monotonic() - started, 1), "rss_mb": rss_mb(pid),
                        "pushed_per_s": books.pushed_total - last_pushed,
                        "acked_per_s": books.acked_total - last_acked})
        last_pushed, last_acked = books.pushed_total, books.acked_total


async def database_facts(db_url: str) -> dict[str, int]:
    import asyncpg

    async def run() -> dict[str, int]:
        conn = await asyncpg.connect(db_url)
        try:
            twice = await conn.fetchval(
                "SELECT count(*) FROM (SELECT t.partition_id, t.transaction_id "
                "FROM queen.transaction_index t JOIN queen.partitions p ON p.id = t.partition_id "
                "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1 "
                "GROUP BY 1, 2 HAVING count(*) > 1) d", QUEUE)
            dead = await conn.fetchval(
                "SELECT count(*) FROM queen.dead_letters d JOIN queen.queues q "
                "ON q.id = d.queue_id WHERE q.name = $1", QUEUE)
            states = await conn.fetch(
                "SELECT p.name, p.next_offset, cs.cursor_offset, cs.lease_id IS NOT NULL AS leased, "
                "cs.lease_expires_at, cs.delivered_until, cs.retry_count, cs.head_at, "
                "cs.not_before FROM queen.consumer_state cs JOIN queen.partitions p "
                "ON p.id = cs.partition_id JOIN queen.queues q ON q.id = p.queue_id "
                "WHERE q.name = $1 ORDER BY p.name", QUEUE)
            return {"stored_twice": int(twice), "dead_letters": int(dead),
                    "states": [{k: str(v) for k, v in dict(r).items()} for r in states]}
        finally:
            await conn.close()

    return await trio.to_thread.run_sync(lambda: asyncio.run(run()))


async def soak(args: argparse.Namespace, cluster, db_url: str, url: str, pid: int) -> dict:
    books = Books()
    samples: list[dict] = []
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post("/api/v1/configure", json={"queue": QUEUE, "options": {
            "leaseTime": 5, "retryLimit": 1000}})
        r.raise_for_status()
    stop_producing, stop_consuming, stop_sampling = trio.Event(), trio.Event(), trio.Event()
    killing = {"on": True}  # off while draining
    per_partition = args.rate / args.producers
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sampler, pid, books, samples, stop_sampling, started)
        nursery.start_soon(consumers_with_killer, url, books, args.consumers, args.kill_every,
                           stop_consuming, killing)
        async with trio.open_nursery() as producing:
            for p in range(args.producers):
                producing.start_soon(producer, url, f"p{p}", books, per_partition, args.batch,
                                     stop_producing)
            if args.pg_restarts:
                producing.start_soon(restarter, cluster, books, args.restart_every,
                                     stop_producing)
            await trio.sleep(args.minutes * 60)
            log("soak: load done, draining")
            stop_producing.set()
        killing["on"] = False
        accepted = {(p, s) for p, seqs in books.accepted.items() for s in seqs}
        with trio.move_on_after(args.drain_seconds):
            while not accepted <= set(books.acked):
                facts = await database_facts(db_url)
                if sum(int(st["next_offset"]) - int(st["cursor_offset"])
                       for st in facts["states"]) == 0 and accepted <= set(books.delivered):
                    break
                await trio.sleep(0.5)
        stop_consuming.set()
        stop_sampling.set()
    facts = await database_facts(db_url)
    misordered = 0
    for seqs in books.first_acks.values():
        high = -1
        for s in seqs:
            if s < high:
                misordered += 1
            high = max(high, s)
    rss = [s["rss_mb"] for s in samples if s["rss_mb"] is not None]
    warm = rss[len(rss) // 5: max(len(rss) // 5 + 1, len(rss) * 3 // 10)] or rss[:1]
    tail = rss[-max(len(rss) // 10, 1):]
    rss_warm, rss_end = statistics.median(warm), statistics.median(tail)
    delivered = set(books.delivered)
    # The database has the last word on consumption: an ack whose reply was lost (a restart)
    # moved the cursor though the consumer could not know. Offsets are the sequence numbers:
    # each partition has one producer, and every message is stored once, in order.
    stored = sum(int(st["next_offset"]) for st in facts["states"])
    unconsumed = sum(int(st["next_offset"]) - int(st["cursor_offset"]) for st in facts["states"])
    return {
        "minutes": args.minutes, "rate": args.rate, "producers": args.producers,
        "consumers": args.consumers, "pg_restarts": books.restarts, "kills": books.kills,
        "accepted": len(accepted), "acked": len(set(books.acked) & accepted),
        "stored": stored, "lost": len(accepted - delivered) + max(len(accepted) - stored, 0),
        "unconsumed": unconsumed,
        "acks_unanswered_but_landed": len(accepted - set(books.acked)) - unconsumed,
        "duplicated_acks": sum(n - 1 for n in books.acked.values() if n > 1),
        "redeliveries": sum(n - 1 for n in books.delivered.values() if n > 1),
        "stored_twice": facts["stored_twice"], "dead_letters": facts["dead_letters"],
        "misordered": misordered,
        "rss_after_warmup_mb": round(rss_warm, 1), "rss_end_mb": round(rss_end, 1),
        "rss_growth_pct": round((rss_end - rss_warm) / rss_warm * 100, 1),
        "errors": dict(books.errors),
        "final_states": facts["states"], "samples": samples,
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["samples"]
    t = [s["t"] / 60 for s in samples]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    top.plot(t, [s["rss_mb"] for s in samples], color="tab:red")
    top.set_ylabel("broker RSS (MB)")
    top.set_ylim(bottom=0)
    top.set_title(f"queen-trio soak: {result['minutes']} min, {result['kills']} consumer kills, "
                  f"{result['pg_restarts']} PostgreSQL restarts; lost {result['lost']}, "
                  f"duplicated {result['duplicated_acks'] + result['stored_twice']}, "
                  f"misordered {result['misordered']}", fontsize=9)
    bottom.plot(t, [s["pushed_per_s"] for s in samples], label="pushed/s", linewidth=0.8)
    bottom.plot(t, [s["acked_per_s"] for s in samples], label="acked/s", linewidth=0.8)
    bottom.set_ylabel("messages per second")
    bottom.set_xlabel("minutes")
    bottom.legend(loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--plot", type=Path, default=ROOT / "bench" / "results" / "soak.png")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.json")
    parser.add_argument("--rate", type=float, default=500.0, help="messages pushed per second")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--kill-every", type=float, default=5.0,
                        help="a consumer is killed every 1 to this many seconds")
    parser.add_argument("--pg-restarts", action="store_true")
    parser.add_argument("--restart-every", type=float, default=120.0)
    parser.add_argument("--drain-seconds", type=float, default=120.0)
    args = parser.parse_args()

    from queen_trio.storage.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="queen-soak-"))
    cluster = EmbeddedPostgres(folder / "data")
    db_url = cluster.start()
    port = free_port()
    env = {"DATABASE_URL": db_url, "LOG_LEVEL": "warning", "PATH": "/usr/bin:/bin",
           "FILE_BUFFER_DIR": str(folder / "spool")}
    proc = subprocess.Popen([sys.executable, "-m", "queen_trio", "serve", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health")
        result = trio.run(soak, args, cluster, db_url, url, proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        cluster.stop(mode="fast")
        shutil.rmtree(folder, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.plot)
    summary = {k: v for k, v in result.items() if k not in ("samples", "final_states")}
    print(json.dumps(summary, indent=2))
    log(f"wrote {args.out} and {args.plot}")
    ok = not (summary["lost"] or summary["unconsumed"] or summary["duplicated_acks"]
              or summary["stored_twice"] or summary["misordered"] or summary["dead_letters"])
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
