"""The official streaming SDK (queen-mq 2.6.0 `queen.streams`), unchanged, against a broker:
`python streams_flow.py URL SCENARIO...`; prints one JSON report (scenario -> findings).

Each scenario uses queues of its own, so several run at once. A scenario waits for its sink
to hold what it expects, giving up after a deadline (the test then fails on the findings, not
on a time)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sys
import time

from queen import Queen
from queen.streams import Stream
from queen.streams.helpers.rate_limiter import token_bucket_gate

BASE = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)  # a minute boundary, epoch ms
DEADLINE = 40.0
RUN = {"batch_size": 200, "max_partitions": 4, "max_wait_millis": 300}


async def drain(q: Queen, queue: str, want: int, deadline: float = DEADLINE,
                group: str = "reader", settle: float = 0.0,
                with_created: bool = False) -> list[dict]:
    """Sink messages (partition, data, and createdAt if asked) until `want` arrived (then
    `settle` more seconds, to catch any extra) or the deadline passed."""
    got: list[dict] = []
    until = time.monotonic() + deadline
    settled_at: float | None = None
    while time.monotonic() < until:
        msgs = await q.queue(queue).group(group).batch(1000).wait(True).timeout_millis(200).pop()
        if msgs:
            got.extend({"partition": m["partition"], "data": m["data"],
                        **({"createdAt": m["createdAt"]} if with_created else {})}
                       for m in msgs)
            await q.ack(msgs, True, {"group": group})
        elif want == 0:
            break
        if want and len(got) >= want:
            if settled_at is None:
                settled_at = time.monotonic() + settle
            if time.monotonic() >= settled_at:
                break
    return got


async def push(q: Queen, queue: str, partition: str, items: list) -> None:
    for start in range(0, len(items), 500):
        await q.queue(queue).partition(partition).push(
            [{"data": d} for d in items[start:start + 500]])


def event_time(m: dict) -> int:
    return m["data"]["ts"]


async def stateless(url: str, q: Queen, tag: str) -> dict:
    src, sink_a, sink_b = f"{tag}.sl.src", f"{tag}.sl.a", f"{tag}.sl.b"
    for p in ("p0", "p1", "p2"):
        await push(q, src, p, [{"n": n} for n in range(20)])
    a = await (Stream.from_(q.queue(src))
               .filter(lambda m: m["data"]["n"] % 3 != 0)
               .map(lambda m: {"n": m["data"]["n"], "sq": m["data"]["n"] ** 2})
               .to(q.queue(sink_a))
               .run(query_id=f"{tag}.sl.a", url=url, **RUN))
    b = await (Stream.from_(q.queue(src))
               .flat_map(lambda m: [{"n": m["data"]["n"], "c": c} for c in (0, 1)])
               .to(q.queue(sink_b))
               .run(query_id=f"{tag}.sl.b", url=url, **RUN))
    got_a = await drain(q, sink_a, 3 * 13, settle=0.5)
    got_b = await drain(q, sink_b, 3 * 40, settle=0.5)
    await a.stop()
    await b.stop()
    return {"a": got_a, "b": got_b, "errors": a.metrics()["errorsTotal"] + b.metrics()["errorsTotal"]}


def _events(windows: int, per: int, step_ms: int) -> list[dict]:
    return [{"ts": BASE + w * 10_000 + i * step_ms, "amount": w * 100 + i}
            for w in range(windows) for i in range(per)]


async def windows(url: str, q: Queen, tag: str) -> dict:
    """Tumbling, sliding, session and cron windows in event time, and key_by."""
    src = f"{tag}.win.src"
    events = _events(4, 5, 1000)
    closing = {"ts": BASE + 120_000, "amount": 0}  # moves the watermark past every window
    agg = {"count": lambda v: 1, "sum": lambda v: v["amount"]}
    runners = []
    sinks = {}
    for kind, stream in {
        "tumbling": Stream.from_(q.queue(src)).window_tumbling(seconds=10, event_time=event_time),
        "sliding": Stream.from_(q.queue(src)).window_sliding(size=20, slide=10,
                                                              event_time=event_time),
        "session": Stream.from_(q.queue(src)).window_session(gap=3, event_time=event_time),
        "cron": Stream.from_(q.queue(src)).window_cron(every="minute", event_time=event_time),
        "keyed": Stream.from_(q.queue(src)).key_by(lambda m: "odd" if m["data"]["amount"] % 2
                                                    else "even")
                 .window_tumbling(seconds=10, event_time=event_time),
    }.items():
        sinks[kind] = f"{tag}.win.{kind}"
        runners.append(await stream.aggregate(agg).to(q.queue(sinks[kind]))
                       .run(query_id=f"{tag}.win.{kind}", url=url, **RUN))
    await push(q, src, "p0", events)
    await push(q, src, "p0", [closing])
    want = {"tumbling": 4, "sliding": 5, "session": 4, "cron": 1, "keyed": 8}
    out = {}
    for kind, sink in sinks.items():
        out[kind] = [g["data"] for g in await drain(q, sink, want[kind], settle=0.5)]
    for r in runners:
        await r.stop()
    out["errors"] = sum(r.metrics()["errorsTotal"] for r in runners)
    return out


async def late(url: str, q: Queen, tag: str) -> dict:
    """Event time: a late event dropped, and included."""
    out = {}
    for policy in ("drop", "include"):
        src, sink = f"{tag}.late.{policy}.src", f"{tag}.late.{policy}.sink"
        runner = await (Stream.from_(q.queue(src))
                        .window_tumbling(seconds=10, event_time=event_time, on_late=policy)
                        .aggregate({"count": lambda v: 1, "sum": lambda v: v["amount"]})
                        .to(q.queue(sink)).run(query_id=f"{tag}.late.{policy}", url=url, **RUN))
        await push(q, src, "p0", [{"ts": BASE + 1000, "amount": 1},
                                  {"ts": BASE + 2000, "amount": 2},
                                  {"ts": BASE + 25_000, "amount": 0}])
        first = await drain(q, sink, 1, settle=0.3)
        await push(q, src, "p0", [{"ts": BASE + 3000, "amount": 7}])
        then = await drain(q, sink, 1, deadline=3 if policy == "drop" else DEADLINE)
        await runner.stop()
        out[policy] = {"first": [g["data"] for g in first], "then": [g["data"] for g in then],
                       "late": runner.metrics()["lateEventsTotal"],
                       "errors": runner.metrics()["errorsTotal"]}
    return out


async def idle_flush(url: str, q: Queen, tag: str) -> dict:
    """Processing time: a quiet partition's window is emitted by the idle flush."""
    src, sink = f"{tag}.idle.src", f"{tag}.idle.sink"
    runner = await (Stream.from_(q.queue(src))
                    .window_tumbling(seconds=1, idle_flush_ms=300)
                    .aggregate({"count": lambda v: 1})
                    .to(q.queue(sink)).run(query_id=f"{tag}.idle", url=url, **RUN))
    await push(q, src, "quiet", [{"n": n} for n in range(5)])
    got = await drain(q, sink, 1, settle=0.0)
    total = sum(g["data"]["count"] for g in got)
    if total < 5:  # the five straddled a second: the second window comes at the next flush
        got += await drain(q, sink, 1)
    await asyncio.sleep(1.5)  # any duplicate emit would arrive now
    got += await drain(q, sink, 0, deadline=0.5)
    await runner.stop()
    return {"counts": [g["data"]["count"] for g in got],
            "flushes": runner.metrics()["flushCyclesTotal"],
            "errors": runner.metrics()["errorsTotal"]}


async def gate(url: str, q: Queen, tag: str) -> dict:
    """A token bucket (capacity 5, 2 a second) over a 1 s lease, for 5 lease periods; and one
    refilling 0.25 a second (a token every 4 lease periods) on a queue with retryLimit 1, for
    10 periods."""
    out = {}
    for name, capacity, refill, seconds, retry_limit in (("fast", 5, 2.0, 5.0, 3),
                                                         ("slow", 1, 0.25, 10.0, 1)):
        src, sink = f"{tag}.gate.{name}.src", f"{tag}.gate.{name}.sink"
        await q.queue(src).config({"lease_time": 1, "retry_limit": retry_limit}).create()
        await push(q, src, "p0", [{"n": n} for n in range(60)])
        started = time.monotonic()
        runner = await (Stream.from_(q.queue(src))
                        .gate(token_bucket_gate(capacity=capacity, refill_per_sec=refill))
                        .to(q.queue(sink)).run(query_id=f"{tag}.gate.{name}", url=url, **RUN))
        out[name] = {"runner": runner, "started": started, "seconds": seconds, "sink": sink,
                     "src": src, "capacity": capacity, "refill": refill}

    async def finish(name: str) -> dict:
        g = out[name]
        await asyncio.sleep(max(0.0, g["seconds"] - (time.monotonic() - g["started"])))
        stopping = time.time()
        await g["runner"].stop()
        elapsed = time.monotonic() - g["started"]
        passed = await drain(q, g["sink"], 0, deadline=1.0, with_created=True)
        # The gate's clock starts at its first pass (the runner registers and pops first),
        # so the lower bound counts refills from there: the sink's createdAt of that pass.
        first_pass = (dt.datetime.fromisoformat(passed[0]["createdAt"].replace("Z", "+00:00"))
                      .timestamp() if passed else stopping)
        dlq = await q.queue(g["src"]).dlq().limit(100).get()
        return {"elapsed": elapsed, "first_pass_to_stop": stopping - first_pass,
                "passed": [p["data"]["n"] for p in passed],
                "capacity": g["capacity"], "refill": g["refill"],
                "dead_letters": len((dlq or {}).get("messages", []) if isinstance(dlq, dict)
                                    else dlq or []),
                "errors": g["runner"].metrics()["errorsTotal"],
                "last_error": g["runner"].metrics()["lastError"]}

    fast, slow = await asyncio.gather(finish("fast"), finish("slow"))
    return {"fast": fast, "slow": slow}


async def restart(url: str, q: Queen, tag: str) -> dict:
    """Stop the runner, push more, start it again with the same query id: it resumes from the
    cursor with its state and watermark. Then a changed chain is refused, and reset."""
    src, sink = f"{tag}.rs.src", f"{tag}.rs.sink"

    def chain() -> Stream:
        return (Stream.from_(q.queue(src)).window_tumbling(seconds=10, event_time=event_time)
                .aggregate({"count": lambda v: 1, "sum": lambda v: v["amount"]})
                .to(q.queue(sink)))

    events = _events(4, 5, 1000)
    runner = await chain().run(query_id=f"{tag}.rs", url=url, **RUN)
    await push(q, src, "p0", events[:12])  # windows 0 and 1 full, window 2 open (2 of 5)
    first = await drain(q, sink, 2, settle=0.5)
    await runner.stop()
    await push(q, src, "p0", events[12:] + [{"ts": BASE + 120_000, "amount": 0}])
    runner = await chain().run(query_id=f"{tag}.rs", url=url, **RUN)
    second = await drain(q, sink, 2, settle=0.5)
    await runner.stop()
    errors = runner.metrics()["errorsTotal"]
    changed = (Stream.from_(q.queue(src)).window_tumbling(seconds=5, event_time=event_time)
               .aggregate({"count": lambda v: 1}).to(q.queue(sink)))
    try:
        r = await changed.run(query_id=f"{tag}.rs", url=url, **RUN)
        await r.stop()
        refused = None
    except Exception as exc:  # StreamsConfigHashMismatch
        refused = f"{type(exc).__name__}: {exc}"
    r = await changed.run(query_id=f"{tag}.rs", url=url, reset=True, **RUN)
    await r.stop()
    return {"first": [g["data"] for g in first], "second": [g["data"] for g in second],
            "errors": errors, "refused": refused}


async def many(url: str, q: Queen, tag: str) -> dict:
    """20 partitions x 250 messages through a tumbling aggregation."""
    src, sink = f"{tag}.many.src", f"{tag}.many.sink"
    runner = await (Stream.from_(q.queue(src))
                    .window_tumbling(seconds=10, event_time=event_time)
                    .aggregate({"count": lambda v: 1, "sum": lambda v: v["amount"]})
                    .to(q.queue(sink)).run(query_id=f"{tag}.many", url=url, **RUN))
    started = time.monotonic()

    async def one(p: int) -> None:
        await push(q, src, f"p{p:02d}",
                   [{"ts": BASE + i * 100, "amount": p * 1000 + i} for i in range(250)]
                   + [{"ts": BASE + 60_000, "amount": 0}])

    await asyncio.gather(*(one(p) for p in range(20)))
    got = await drain(q, sink, 20 * 3, deadline=60, settle=0.5)  # 25 s of events: 3 windows
    seconds = time.monotonic() - started
    await runner.stop()
    totals: dict = {}
    for g in got:
        t = totals.setdefault(g["partition"], {"count": 0, "sum": 0, "windows": 0})
        t["count"] += g["data"]["count"]
        t["sum"] += g["data"]["sum"]
        t["windows"] += 1
    return {"totals": totals, "seconds": seconds, "errors": runner.metrics()["errorsTotal"]}


async def crash(url: str, q: Queen, tag: str) -> dict:
    """A tumbling aggregation fed one window a second for 8 s, while the test SIGKILLs the
    broker and starts it again on the same port: pushes are retried until they land, the
    runner rides it out. One result per window: nothing lost, nothing doubled."""
    import httpx

    src, sink = "crash.src", "crash.sink"
    async with httpx.AsyncClient(base_url=url, timeout=5) as c:
        async def until_ok(method: str, path: str, body: dict) -> None:
            while True:
                try:
                    r = await c.request(method, path, json=body)
                    if r.status_code < 300:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)

        await until_ok("POST", "/api/v1/configure", {"queue": src, "options": {"leaseTime": 2}})
        runner = await (Stream.from_(q.queue(src))
                        .window_tumbling(seconds=10, event_time=event_time)
                        .aggregate({"count": lambda v: 1, "sum": lambda v: v["amount"]})
                        .to(q.queue(sink)).run(query_id="crash", url=url, **RUN))
        for w in range(8):
            await until_ok("POST", "/api/v1/push", {"items": [
                {"queue": src, "partition": "p0",
                 "payload": {"ts": BASE + w * 10_000 + i * 1000, "amount": w * 100 + i},
                 "transactionId": f"e-{w}-{i}"} for i in range(5)]})
            await asyncio.sleep(1.0)
        await until_ok("POST", "/api/v1/push", {"items": [
            {"queue": src, "partition": "p0", "payload": {"ts": BASE + 300_000, "amount": 0},
             "transactionId": "closing"}]})
        got = await drain(q, sink, 8, deadline=20, settle=2.0)
        await runner.stop()
    return {"windows": sorted(g["data"]["sum"] for g in got),
            "errors": runner.metrics()["errorsTotal"]}


SCENARIOS = {"stateless": stateless, "windows": windows, "late": late, "idle": idle_flush,
             "gate": gate, "restart": restart, "many": many, "crash": crash}


async def main(url: str, names: list[str]) -> dict:
    # Two flows may run at once against one database: the pid keeps their names apart.
    tag = f"t{int(time.time() * 1000) % 100000}x{os.getpid()}"
    async with Queen(url) as q:
        results = await asyncio.gather(*(SCENARIOS[n](url, q, f"{tag}{n[:2]}") for n in names))
    return dict(zip(names, results, strict=True))


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2:])), default=str))
