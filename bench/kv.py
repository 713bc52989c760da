"""KV and lock throughput and latency (issue 21).

    python bench/kv.py [--connections 64] [--seconds 10] [--workers 1]

Starts a broker process on a fresh database, then for each operation runs `connections`
concurrent HTTP clients (asyncio + httpx, keep-alive) for `seconds`, and reports calls per
second and p50/p99 latency in ms as the client sees them:
- get: POST /api/v1/kv one `get` of one of 1000 keys;
- put: one unconditional `put` of one of 1000 keys (TTL 300 s);
- CAS incr: one `incr` on one of 64 counters (contended row locks);
- lock acquire/release: acquire a per-client lock, then release it (two calls; the figure is
  pairs per second).
Results go to bench/results/kv.json.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import httpx
from common import broker, database, log, write_results


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


async def run_op(url: str, name: str, connections: int, seconds: float) -> dict:
    latencies: list[float] = []
    failures = 0
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)

    async def one_client(n: int, http: httpx.AsyncClient) -> None:
        nonlocal failures
        rnd = random.Random(n)
        while time.monotonic() < deadline:
            started = time.perf_counter()
            if name == "lock acquire/release":
                r = await http.post("/api/v1/locks", json={"operations": [
                    {"op": "acquire", "name": f"bench-{n}", "ttlSeconds": 30,
                     "owner": f"c{n}"}]})
                ok = r.status_code == 200 and r.json()["results"][0]["acquired"]
                if ok:
                    token = r.json()["results"][0]["token"]
                    r = await http.post("/api/v1/locks", json={"operations": [
                        {"op": "release", "name": f"bench-{n}", "token": token}]})
                    ok = r.status_code == 200 and r.json()["results"][0]["released"]
            else:
                key = f"k{rnd.randrange(1000)}"
                op = {"get": {"op": "get", "ns": "bench", "key": key},
                      "put": {"op": "put", "ns": "bench", "key": key, "value": {"n": n},
                              "ttlSeconds": 300},
                      "CAS incr": {"op": "incr", "ns": "bench", "key": f"c{rnd.randrange(64)}",
                                   "delta": 1, "forever": True}}[name]
                r = await http.post("/api/v1/kv", json={"operations": [op]})
                ok = r.status_code == 200
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                failures += 1

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as http:
        begun = time.monotonic()
        await asyncio.gather(*(one_client(n, http) for n in range(connections)))
        took = time.monotonic() - begun
    return {"op": name, "per_second": round(len(latencies) / took, 1),
            "p50_ms": round(pct(latencies, 0.50), 2), "p99_ms": round(pct(latencies, 0.99), 2),
            "mean_ms": round(statistics.fmean(latencies) * 1000, 2) if latencies else None,
            "calls": len(latencies), "failures": failures}


async def main(args: argparse.Namespace) -> None:
    with database() as url, broker(url, workers=args.workers) as (shared, _proc, _own):
        async with httpx.AsyncClient(base_url=shared) as http:  # the keys `get` reads
            for start in range(0, 1000, 200):
                await http.post("/api/v1/kv", json={"operations": [
                    {"op": "put", "ns": "bench", "key": f"k{n}", "value": {"n": n},
                     "forever": True} for n in range(start, start + 200)]})
        results = []
        for name in ("get", "put", "CAS incr", "lock acquire/release"):
            figures = await run_op(shared, name, args.connections, args.seconds)
            log(f"{name}: {figures}")
            results.append(figures)
    path = write_results("kv", {"connections": args.connections, "seconds": args.seconds,
                                "workers": args.workers, "results": results})
    log(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=1)
    asyncio.run(main(parser.parse_args()))
