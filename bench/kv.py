"""KV and lock throughput and latency (issue 21).

    python bench/kv.py [--connections 64] [--seconds 10] [--workers 1] [--client raw|httpx]

Starts a broker process on a fresh database, then for each operation runs `connections`
concurrent keep-alive HTTP/1.1 clients for `seconds`, and reports calls per second and p50/p99
latency in ms as the client sees them, and the CPU shares of the client process itself and of
the broker's processes (a client near 100 % means the bench, not the broker, is the bottleneck):
- get: POST /api/v1/kv one `get` of one of 1000 keys;
- put: one unconditional `put` of one of 1000 keys (TTL 300 s);
- CAS incr: one `incr` on one of 64 counters (contended row locks);
- lock acquire/release: acquire a per-client lock, then release it (two calls; the figure is
  pairs per second).
`--client raw` (the default) is bench/pop.py's minimal HTTP/1.1 client on a trio socket, one
per connection; `--client httpx` is one shared `httpx.AsyncClient`, which at 64 connections spends a
whole core in its own connection pool and measured the client instead of the broker (issue 21's
closing note). Results go to bench/results/kv.json.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from functools import partial

import httpx
import trio
from common import broker, database, log, tree_cpu_seconds, write_results
from pop import RawClient

# What one client's call gives back: the status and the decoded answer ({} when it has none).
Answer = tuple[int, dict]


async def raw_post(raw: RawClient, path: str, body: dict) -> Answer:
    status, data = await raw.request("POST", path, body)
    return status, json.loads(data) if data else {}


async def httpx_post(http: httpx.AsyncClient, path: str, body: dict) -> Answer:
    r = await http.post(path, json=body)
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, {}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


async def run_op(url: str, name: str, connections: int, seconds: float,
                 client: str = "raw", broker_pid: int | None = None) -> dict:
    latencies: list[float] = []
    failures = 0
    why: collections.Counter[str] = collections.Counter()  # failures by status and reason
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)

    async def one_client(n: int, post: Callable[[str, dict], Awaitable[Answer]]) -> None:
        nonlocal failures
        rnd = random.Random(n)
        while time.monotonic() < deadline:
            started = time.perf_counter()
            if name == "lock acquire/release":
                status, answer = await post("/api/v1/locks", {"operations": [
                    {"op": "acquire", "name": f"bench-{n}", "ttlSeconds": 30,
                     "owner": f"c{n}"}]})
                ok = status == 200 and answer["results"][0]["acquired"]
                if ok:
                    token = answer["results"][0]["token"]
                    status, answer = await post("/api/v1/locks", {"operations": [
                        {"op": "release", "name": f"bench-{n}", "token": token}]})
                    ok = status == 200 and answer["results"][0]["released"]
            else:
                key = f"k{rnd.randrange(1000)}"
                op = {"get": {"op": "get", "ns": "bench", "key": key},
                      "put": {"op": "put", "ns": "bench", "key": key, "value": {"n": n},
                              "ttlSeconds": 300},
                      "CAS incr": {"op": "incr", "ns": "bench", "key": f"c{rnd.randrange(64)}",
                                   "delta": 1, "forever": True}}[name]
                status, answer = await post("/api/v1/kv", {"operations": [op]})
                ok = status == 200
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                failures += 1
                why[f"{status} {answer.get('reason') or answer.get('error') or ''}".strip()] += 1

    async with (httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as shared,
                contextlib.AsyncExitStack() as raws):
        posts = [partial(raw_post, await raws.enter_async_context(RawClient(url)))
                 if client == "raw" else partial(httpx_post, shared)
                 for _ in range(connections)]
        begun, cpu = time.monotonic(), time.process_time()
        broker_cpu = tree_cpu_seconds(broker_pid) if broker_pid else 0.0
        async with trio.open_nursery() as nursery:
            for n, post in enumerate(posts):
                nursery.start_soon(one_client, n, post)
        took, cpu = time.monotonic() - begun, time.process_time() - cpu
        broker_cpu = (tree_cpu_seconds(broker_pid) if broker_pid else 0.0) - broker_cpu
    return {"op": name, "per_second": round(len(latencies) / took, 1),
            "p50_ms": round(pct(latencies, 0.50), 2), "p99_ms": round(pct(latencies, 0.99), 2),
            "mean_ms": round(statistics.fmean(latencies) * 1000, 2) if latencies else None,
            "calls": len(latencies), "failures": failures, "failed_as": dict(why),
            "client_cpu_pct": round(100 * cpu / took),
            "broker_cpu_pct": round(100 * broker_cpu / took)}


async def main(args: argparse.Namespace) -> None:
    with database() as url, broker(url, workers=args.workers) as (shared, proc, _own):
        async with httpx.AsyncClient(base_url=shared) as http:  # the keys `get` reads
            for start in range(0, 1000, 200):
                await http.post("/api/v1/kv", json={"operations": [
                    {"op": "put", "ns": "bench", "key": f"k{n}", "value": {"n": n},
                     "forever": True} for n in range(start, start + 200)]})
        results = []
        for name in ("get", "put", "CAS incr", "lock acquire/release"):
            figures = await run_op(shared, name, args.connections, args.seconds, args.client,
                                   proc.pid)
            log(f"{name}: {figures}")
            results.append(figures)
    path = write_results("kv", {"connections": args.connections, "seconds": args.seconds,
                                "workers": args.workers, "client": args.client,
                                "results": results})
    log(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw")
    trio.run(main, parser.parse_args())
