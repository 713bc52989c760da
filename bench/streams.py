"""Streams through the official SDK (issue 20).

    python bench/streams.py [--partitions 20] [--per-partition 250] [--workers 1]

Pushes `partitions` x `per-partition` messages into a source queue first, then starts an SDK
runner (queen-mq 2.6.0 `queen.streams`, batch 200, 4 partitions per pop) and times it until
its sink holds everything: a stateless map (one sink message per source message) and a
tumbling aggregation in event time (10 s windows, 25 s of events per partition: 3 windows per
partition). Reports messages per second through each and the runner's cycles per second.
Target: the 20 x 250 tumbling pipeline in under 10 s on the 2-core machine. Results go to
bench/results/streams.json.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from common import broker, database, log, write_results
from queen import Queen
from queen.streams import Stream

BASE = 1_700_000_000_000 - (1_700_000_000_000 % 60_000)
RUN = {"batch_size": 200, "max_partitions": 4, "max_wait_millis": 200}


async def fill(q: Queen, queue: str, partitions: int, per: int, *, events: bool) -> None:
    async def one(p: int) -> None:
        items = [{"data": {"ts": BASE + i * 100, "amount": i}} for i in range(per)]
        if events:  # moves the watermark past every window
            items.append({"data": {"ts": BASE + 120_000, "amount": 0}})
        for start in range(0, len(items), 500):
            await q.queue(queue).partition(f"p{p:03d}").push(items[start:start + 500])

    await asyncio.gather(*(one(p) for p in range(partitions)))


async def drain(q: Queen, queue: str, want: int) -> int:
    got = 0
    while got < want:
        msgs = await q.queue(queue).group("bench").batch(5000).wait(True).timeout_millis(200).pop()
        if msgs:
            got += len(msgs)
            await q.ack(msgs, True, {"group": "bench"})
    return got


async def pipeline(url: str, kind: str, partitions: int, per: int) -> dict:
    tag = f"bench{int(time.time() * 1000) % 1_000_000}"
    src, sink = f"{tag}.{kind}.src", f"{tag}.{kind}.sink"
    async with Queen(url) as q:
        await fill(q, src, partitions, per, events=kind == "tumbling")
        stream = Stream.from_(q.queue(src))
        if kind == "map":
            stream = stream.map(lambda m: {"double": m["data"]["amount"] * 2})
            want = partitions * per
        else:
            stream = (stream.window_tumbling(seconds=10, event_time=lambda m: m["data"]["ts"])
                      .aggregate({"count": lambda v: 1, "sum": lambda v: v["amount"]}))
            want = partitions * 3
        started = time.monotonic()
        runner = await stream.to(q.queue(sink)).run(query_id=f"{tag}.{kind}", url=url, **RUN)
        await drain(q, sink, want)
        seconds = time.monotonic() - started
        await runner.stop()
        m = runner.metrics()
    messages = partitions * per + (partitions if kind == "tumbling" else 0)
    return {"messages": messages, "seconds": round(seconds, 3),
            "messagesPerSecond": round(messages / seconds),
            "cycles": m["cyclesTotal"], "cyclesPerSecond": round(m["cyclesTotal"] / seconds, 1),
            "sinkMessages": want, "errors": m["errorsTotal"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--per-partition", type=int, default=250)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    results: dict = {"partitions": args.partitions, "perPartition": args.per_partition,
                     "workers": args.workers}
    with database() as url, broker(url, workers=args.workers) as (http, _proc, _own):
        for kind in ("map", "tumbling"):
            results[kind] = asyncio.run(pipeline(http, kind, args.partitions, args.per_partition))
            log(f"{kind}: {results[kind]}")
    write_results("streams", results)


if __name__ == "__main__":
    main()
