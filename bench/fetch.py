"""Offset reads against pops (docs/offset-reads.md, docs/performance.md#offset-reads).

    python bench/fetch.py [--messages 50000] [--partitions 10]

`--messages` small JSON messages are pushed into `--partitions` partitions (100 a push). One
reader then reads them all by offset (`POST /api/v1/fetch`, every partition in one call, until
each reaches its high watermark), and one consumer pops them all (autoAck, batch 100) from a
copy of the same queue. Records per second for each. Results go to bench/results/fetch.json.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import httpx
from common import broker, database, log, write_results


def fill(client: httpx.Client, queue: str, messages: int, partitions: int) -> None:
    for start in range(0, messages, 100):
        items = [{"queue": queue, "partition": f"p{n % partitions}",
                  "payload": {"n": n, "text": "a small JSON message"}}
                 for n in range(start, min(messages, start + 100))]
        client.post("/api/v1/push", json={"items": items}).raise_for_status()


def read_by_offset(client: httpx.Client, queue: str, partitions: int) -> int:
    offsets = {f"p{n}": 0 for n in range(partitions)}
    ends: dict[str, int] = {}
    read = 0
    while True:
        entries = [{"queue": queue, "partition": p, "offset": o} for p, o in offsets.items()
                   if p not in ends or o < ends[p]]
        if not entries:
            return read
        body = client.post("/api/v1/fetch", json={"entries": entries}).json()
        for e in body["entries"]:
            ends.setdefault(e["partition"], e["highWatermark"])
            if e["records"]:
                offsets[e["partition"]] = e["records"][-1]["offset"] + 1
                read += len(e["records"])
            else:
                ends[e["partition"]] = offsets[e["partition"]]


def pop_all(client: httpx.Client, queue: str, messages: int) -> int:
    got = 0
    while got < messages:
        r = client.get(f"/api/v1/pop/queue/{queue}", params={"batch": 100, "autoAck": "true"})
        if r.status_code == 204:
            continue
        got += len(r.json()["messages"])
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=10)
    args = parser.parse_args()
    results: dict[str, Any] = {"messages": args.messages, "partitions": args.partitions}
    with database() as db_url, broker(db_url) as (url, _proc, _own), \
            httpx.Client(base_url=url, timeout=120) as client:
        for queue in ("bench.fetch", "bench.popped"):
            fill(client, queue, args.messages, args.partitions)
        started = time.perf_counter()
        read = read_by_offset(client, "bench.fetch", args.partitions)
        fetch_seconds = time.perf_counter() - started
        assert read == args.messages, (read, args.messages)
        started = time.perf_counter()
        popped = pop_all(client, "bench.popped", args.messages)
        pop_seconds = time.perf_counter() - started
        results["fetch_records_per_second"] = round(read / fetch_seconds)
        results["pop_autoack_b100_messages_per_second"] = round(popped / pop_seconds)
        log(f"fetch: {results['fetch_records_per_second']} records/s; pop autoAck b100: "
            f"{results['pop_autoack_b100_messages_per_second']} messages/s")
    log(f"wrote {write_results('fetch', results)}")


if __name__ == "__main__":
    main()
