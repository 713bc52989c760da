"""Held xmin: does consumption hold up while a long transaction pins the xmin horizon?

    python bench/held_xmin.py [--before-minutes 2] [--hold-minutes 10] [--minute 60]
                              [--share 0.7] [--consumers 8] [--capacity loaded|alone]
                              [--workers N] [--before PATH]

A long transaction (or a stale replication slot) holds back the xmin horizon: no dead tuple
younger than it can be removed, and SKIP LOCKED queues slow down as they pile up. This runs:

1. the consume capacity: pop+ack at batch 10 (`--consumers` loops, each a pop without a long
   poll, then an /ack/batch of what it got; an empty pop waits 20 ms) on a prefilled queue of
   100 partitions, for one minute. `--capacity loaded` (the default) measures it while the
   producer pushes as fast as it can beside the consumers: on this 2-core machine the
   pushes, their broker work and their PostgreSQL work take the same cores the consumers
   use, so the consumers' capacity alone (`--capacity alone`) is more than they can keep up
   with once anything is pushed, and a steady load at 70 % of it was already falling behind
   before the hold (docs/performance.md#held-xmin);
2. a steady load: pushes at batch 10 over the 100 partitions at `--share` (70 %) of that
   capacity, from a process of its own (beside the consumers' event loop, the pushes took
   their CPU: on 2 cores the bench process itself was the limit), consumed by the same loops;
3. after `--before-minutes`, a REPEATABLE READ transaction in the broker's database that reads
   one row and stays open for `--hold-minutes`.

Every minute it prints messages pushed and consumed per second, pop latency p50/p99, the lag
(pushed, not yet consumed), and `n_dead_tup` of consumer_state, partitions, segments and
transaction_index, the mean time inside PostgreSQL of a call of queen.pop_claim, ack_batch
and push_bundle (pg_stat_user_functions), the load average and the consumers' own CPU (in
cores: near 1, the load generator is the limit, not the broker). The verdict compares the
last minute held with the last minute before the hold: consumed msg/s within 10 %, pop p99
within 2x, and the lag bounded (the last minute's lag no more than twice the first held
minute's, plus one minute of pushes' worth of slack). `--minute` shortens the "minute" for
a quick look (the bounds are for real minutes). A benchmark, not a test: results go to
bench/results/held_xmin.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import time
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import asyncpg
import httpx
from common import broker, database, function_times, log, track_functions, write_results
from pop import prefill

QUEUE = "bench.held"
PARTITIONS = 100
BATCH = 10
PAYLOAD = {"orderId": 8891, "customer": "customer-42", "total": 42.5}
# A consumer that found nothing looks again after this long (seconds).
EMPTY_BACKOFF = 0.02
TABLES = ("consumer_state", "partitions", "segments", "transaction_index")


def own_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process: the consumers' event loop."""
    times = os.times()
    return times.user + times.system


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Figures:
    """What happened in the current minute."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.pushed = 0
        self.consumed = 0
        self.pop_ms: list[float] = []
        self.started = time.monotonic()


async def consumer(client: httpx.AsyncClient, figures: Figures, stop: asyncio.Event) -> None:
    path = f"/api/v1/pop/queue/{QUEUE}"
    while not stop.is_set():
        started = time.monotonic()
        # No long poll: the figure is what a claim costs (the scan SKIP LOCKED makes), not
        # how long a consumer waited for a push.
        r = await client.get(path, params={"batch": str(BATCH), "wait": "false"})
        figures.pop_ms.append((time.monotonic() - started) * 1000)
        messages = r.json()["messages"] if r.status_code == 200 else []
        if not messages:
            await asyncio.sleep(EMPTY_BACKOFF)
            continue
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                 "leaseId": m["leaseId"], "status": "completed"} for m in messages]
        a = await client.post("/api/v1/ack/batch", json={"acknowledgments": acks})
        a.raise_for_status()
        figures.consumed += len(messages)


async def producer(client: httpx.AsyncClient, figures: Figures, rate: float,
                   stop: asyncio.Event) -> None:
    """`rate` messages per second at most, in bodies of BATCH, partitions in turn; paced by
    the clock, with up to 32 requests in flight (a push waits for a free one, and a schedule
    that fell behind starts again from now rather than bursting to catch up)."""
    interval = BATCH / rate
    next_at = time.monotonic()
    n = 0
    in_flight: set[asyncio.Task[None]] = set()

    async def one(partition: int) -> None:
        body = {"items": [{"queue": QUEUE, "partition": f"p{partition}", "payload": PAYLOAD}
                          for _ in range(BATCH)]}
        r = await client.post("/api/v1/push", json=body)
        r.raise_for_status()
        figures.pushed += BATCH

    while not stop.is_set():
        next_at = max(next_at + interval, time.monotonic() - interval)
        delay = next_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if len(in_flight) >= 32:
            await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
        task = asyncio.create_task(one(n % PARTITIONS))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        n += 1
    await asyncio.gather(*in_flight, return_exceptions=True)


def produce(url: str, rate: float, pushed: Synchronized, stop: EventType, parent: int) -> None:
    """The producer, in a process of its own: in one event loop beside the consumers it took
    their CPU (on 2 cores the bench process itself was the limit). `pushed` counts messages
    pushed so far. It stops with the bench: when told to, or when its `parent` is gone (a
    bench killed outright would leave it pushing at a port nobody serves any more)."""
    async def run() -> None:
        figures = Figures()
        done = asyncio.Event()
        async with httpx.AsyncClient(base_url=url, timeout=30,
                                     limits=httpx.Limits(max_connections=40)) as client:
            pushing = asyncio.create_task(producer(client, figures, rate, done))
            while not stop.is_set() and os.getppid() == parent:
                await asyncio.sleep(0.2)
                pushed.value = figures.pushed
            done.set()
            await pushing
            pushed.value = figures.pushed

    asyncio.run(run())


# A producer rate no broker reaches: its 32 requests in flight are the only pacing.
FLAT_OUT = 1e9
# Every producer process started: stopped on the way out, however the bench ends.
RUNNING: list[Producer] = []


class Producer:
    """`produce` in a process of its own, pushing `rate` messages per second until
    `finish`, which returns how many it pushed."""

    def __init__(self, context, url: str, rate: float) -> None:  # type: ignore[no-untyped-def]
        self.pushed = context.Value("q", 0)
        self._stop = context.Event()
        # A daemon: a bench that fails mid-run does not wait on it at exit.
        self._process = context.Process(target=produce, daemon=True,
                                        args=(url, rate, self.pushed, self._stop, os.getpid()))
        self._process.start()
        RUNNING.append(self)

    def stop_now(self) -> None:
        """Stop it whatever it is doing (the bench is being stopped)."""
        self._stop.set()
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()

    async def finish(self) -> int:
        self._stop.set()
        await asyncio.to_thread(self._process.join)
        if self._process.exitcode != 0:  # its figures stopped where it failed
            raise SystemExit(f"the producer process failed (exit code {self._process.exitcode})")
        return int(self.pushed.value)


async def dead_tuples(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch("SELECT relname, n_dead_tup FROM pg_stat_user_tables "
                            "WHERE schemaname = 'queen' AND relname = ANY($1::text[])",
                            list(TABLES))
    found = {r["relname"]: int(r["n_dead_tup"]) for r in rows}
    return {t: found.get(t, 0) for t in TABLES}


# The consume and push path's functions whose time inside PostgreSQL is read every minute.
FUNCTIONS = ("pop_claim", "ack_batch", "push_bundle")


def ms_per_call(now: dict[str, tuple[int, float]],
                before: dict[str, tuple[int, float]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in FUNCTIONS:
        calls = now.get(name, (0, 0.0))[0] - before.get(name, (0, 0.0))[0]
        total = now.get(name, (0, 0.0))[1] - before.get(name, (0, 0.0))[1]
        out[name] = round(total / calls, 3) if calls else None
    return out


async def lag(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(
        "SELECT coalesce(sum(p.next_offset), 0) - coalesce(sum(cs.cursor_offset), 0) "
        "FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id "
        "LEFT JOIN queen.consumer_state cs ON cs.partition_id = p.id "
        "WHERE q.name = $1", QUEUE))


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run(url: str, db_url: str, args: argparse.Namespace) -> dict:
    # Ctrl-C or SIGTERM cancel the run, which then unwinds: producers, brokers, PostgreSQL.
    loop, main = asyncio.get_running_loop(), asyncio.current_task()
    assert main is not None
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, main.cancel)
    try:
        return await measure(url, db_url, args)
    finally:
        for producer in RUNNING:
            await asyncio.to_thread(producer.stop_now)


async def measure(url: str, db_url: str, args: argparse.Namespace) -> dict:
    minute = args.minute
    limits = httpx.Limits(max_connections=args.consumers + 40)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:
        conn = await asyncpg.connect(db_url)
        holder = await asyncpg.connect(db_url)
        figures = Figures()

        # 1. Capacity: pop+ack on a prefilled queue, alone or beside pushes at full speed.
        await asyncio.to_thread(prefill, url, QUEUE, PARTITIONS,
                                int(args.prefill_per_partition), PAYLOAD)
        context = multiprocessing.get_context("spawn")
        stop = asyncio.Event()
        consumers = [asyncio.create_task(consumer(client, figures, stop))
                     for _ in range(args.consumers)]
        flat_out = None
        if args.capacity == "loaded":
            flat_out = Producer(context, url, FLAT_OUT)
        figures.reset()
        await asyncio.sleep(minute)
        capacity = figures.consumed / (time.monotonic() - figures.started)
        if flat_out is not None:
            pushed_meanwhile = await flat_out.finish()
            log(f"pushed beside it: {pushed_meanwhile / minute:,.0f} msg/s")
        stop.set()
        await asyncio.gather(*consumers)
        log(f"capacity ({args.capacity}): {capacity:,.0f} msg/s (pop+ack, batch {BATCH}, "
            f"{args.consumers} consumers); load {load_average()}")
        # Drain what the capacity run left, so the steady phase starts level.
        stop = asyncio.Event()
        consumers = [asyncio.create_task(consumer(client, figures, stop))
                     for _ in range(args.consumers)]
        while await lag(conn) > 0:
            await asyncio.sleep(1)

        # 2. and 3. The steady load, then the hold.
        rate = capacity * args.share
        figures.reset()
        pushing = Producer(context, url, rate)
        pushed = pushing.pushed
        pushed_before = 0
        cpu_before = own_cpu_seconds()
        functions_before = await function_times(conn, FUNCTIONS)
        minutes: list[dict] = []
        total = args.before_minutes + args.hold_minutes
        holding = False
        for m in range(total):
            if m == args.before_minutes:
                await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                await holder.fetchval("SELECT id FROM queen.partitions LIMIT 1")
                holding = True
                log("holding xmin: a REPEATABLE READ transaction is open")
            await asyncio.sleep(minute)
            elapsed = time.monotonic() - figures.started
            cpu_now = own_cpu_seconds()
            functions_now = await function_times(conn, FUNCTIONS)
            row = {"minute": m + 1, "held": holding,
                   "pushed_per_s": round((pushed.value - pushed_before) / elapsed),
                   "consumed_per_s": round(figures.consumed / elapsed),
                   "pop_p50_ms": round(percentile(figures.pop_ms, 0.5), 1),
                   "pop_p99_ms": round(percentile(figures.pop_ms, 0.99), 1),
                   "lag": await lag(conn), "dead_tuples": await dead_tuples(conn),
                   # Mean ms inside PostgreSQL per call, this minute.
                   "function_ms": ms_per_call(functions_now, functions_before),
                   "load_average": load_average(),
                   # The consumers' own process, in cores: near 1, it is their limit.
                   "consumers_cpu": round((cpu_now - cpu_before) / elapsed, 2)}
            cpu_before = cpu_now
            functions_before = functions_now
            figures.reset()
            pushed_before = pushed.value
            minutes.append(row)
            log(json.dumps(row))
        if holding:
            await holder.execute("COMMIT")
        stop.set()
        await pushing.finish()
        await asyncio.gather(*consumers)
        await conn.close()
        await holder.close()

    before = minutes[args.before_minutes - 1]
    last = minutes[-1]
    first_held = minutes[args.before_minutes]
    consumed_ratio = last["consumed_per_s"] / max(before["consumed_per_s"], 1)
    p99_ratio = last["pop_p99_ms"] / max(before["pop_p99_ms"], 0.1)
    lag_bound = 2 * first_held["lag"] + rate * minute
    verdict = {
        "consumed_last_held_over_before": round(consumed_ratio, 3),
        "consumed_within_10_percent": consumed_ratio >= 0.9,
        "pop_p99_last_held_over_before": round(p99_ratio, 2),
        "pop_p99_within_2x": p99_ratio <= 2.0,
        "lag_last": last["lag"], "lag_bound": round(lag_bound),
        "lag_bounded": last["lag"] <= lag_bound,
        "dead_tuples_before": before["dead_tuples"], "dead_tuples_last": last["dead_tuples"],
    }
    return {"capacity": args.capacity, "capacity_msg_per_s": round(capacity),
            "rate_msg_per_s": round(rate),
            "minute_seconds": minute, "consumers": args.consumers, "minutes": minutes,
            "verdict": verdict}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before-minutes", type=int, default=2)
    parser.add_argument("--hold-minutes", type=int, default=10)
    parser.add_argument("--minute", type=float, default=60.0,
                        help="seconds in a 'minute' (shorter for a quick look)")
    parser.add_argument("--share", type=float, default=0.7)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--prefill-per-partition", type=int, default=600)
    parser.add_argument("--capacity", choices=["loaded", "alone"], default="loaded",
                        help="measure the consume capacity beside pushes at full speed, or alone")
    parser.add_argument("--workers", type=int, default=None,
                        help="broker workers (default: the broker's own default)")
    parser.add_argument("--before", type=Path, help="run the queen-trio checked out here")
    args = parser.parse_args()
    from queen_trio.settings import default_workers

    workers = args.workers or default_workers()
    with database() as db_url:
        track_functions(db_url)
        kwargs = {"code": args.before} if args.before else {"workers": workers}
        with broker(db_url, **kwargs) as (url, _, _):  # type: ignore[arg-type]
            result = asyncio.run(run(url, db_url, args))
    result["workers"] = None if args.before else workers
    path = write_results("held_xmin" if not args.before else "held_xmin-before", result)
    print("| minute | held | pushed/s | consumed/s | pop p50/p99 ms | lag | dead: "
          + " / ".join(TABLES) + " | ms per call: " + " / ".join(FUNCTIONS)
          + " | load | consumers' CPU |")
    print("|---:|---|---:|---:|---:|---:|---|---|---|---:|")
    for row in result["minutes"]:
        dead = " / ".join(f"{row['dead_tuples'][t]:,}" for t in TABLES)
        functions = " / ".join(str(row["function_ms"][f]) for f in FUNCTIONS)
        print(f"| {row['minute']} | {'yes' if row['held'] else 'no'} | {row['pushed_per_s']:,} | "
              f"{row['consumed_per_s']:,} | {row['pop_p50_ms']} / {row['pop_p99_ms']} | "
              f"{row['lag']:,} | {dead} | {functions} | {row['load_average']} | "
              f"{row['consumers_cpu']} |")
    print(json.dumps(result["verdict"]))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
