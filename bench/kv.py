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
`--client raw` (the default) is a minimal HTTP/1.1 client on asyncio streams, one socket per
connection; `--client httpx` is one shared `httpx.AsyncClient`, which at 64 connections spends a
whole core in its own connection pool and measured the client instead of the broker (issue 21's
closing note). Results go to bench/results/kv.json.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import re
import statistics
import time

import httpx
from common import broker, database, log, tree_cpu_seconds, write_results


class RawClient:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the status and the body
    (Content-Length or chunked). Cheap enough that 64 of them in one process leave the CPU to
    the broker."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self._host, self._port = host, int(port or 80)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict) -> tuple[int, dict]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        data = json.dumps(body, separators=(",", ":")).encode()
        self._writer.write(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n%s"
                           % (path.encode(), self._host.encode(), len(data), data))
        head = (await self._reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        status = int(head.split(" ", 2)[1])
        length = re.search(r"\r\ncontent-length: *(\d+)", head)
        if length:
            payload = await self._reader.readexactly(int(length.group(1)))
        else:  # chunked
            parts = []
            while size := int((await self._reader.readuntil(b"\r\n")).strip(), 16):
                parts.append(await self._reader.readexactly(size))
                await self._reader.readexactly(2)
            await self._reader.readexactly(2)
            payload = b"".join(parts)
        return status, json.loads(payload)

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()


class HttpxClient:
    """A facade over one shared httpx.AsyncClient (`--client httpx`)."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def post(self, path: str, body: dict) -> tuple[int, dict]:
        r = await self._http.post(path, json=body)
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, {}

    async def aclose(self) -> None:
        return None


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

    async def one_client(n: int, http: RawClient | HttpxClient) -> None:
        nonlocal failures
        rnd = random.Random(n)
        while time.monotonic() < deadline:
            started = time.perf_counter()
            if name == "lock acquire/release":
                status, answer = await http.post("/api/v1/locks", {"operations": [
                    {"op": "acquire", "name": f"bench-{n}", "ttlSeconds": 30,
                     "owner": f"c{n}"}]})
                ok = status == 200 and answer["results"][0]["acquired"]
                if ok:
                    token = answer["results"][0]["token"]
                    status, answer = await http.post("/api/v1/locks", {"operations": [
                        {"op": "release", "name": f"bench-{n}", "token": token}]})
                    ok = status == 200 and answer["results"][0]["released"]
            else:
                key = f"k{rnd.randrange(1000)}"
                op = {"get": {"op": "get", "ns": "bench", "key": key},
                      "put": {"op": "put", "ns": "bench", "key": key, "value": {"n": n},
                              "ttlSeconds": 300},
                      "CAS incr": {"op": "incr", "ns": "bench", "key": f"c{rnd.randrange(64)}",
                                   "delta": 1, "forever": True}}[name]
                status, answer = await http.post("/api/v1/kv", {"operations": [op]})
                ok = status == 200
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                failures += 1
                why[f"{status} {answer.get('reason') or answer.get('error') or ''}".strip()] += 1

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as shared:
        clients = [RawClient(url) if client == "raw" else HttpxClient(shared)
                   for _ in range(connections)]
        begun, cpu = time.monotonic(), time.process_time()
        broker_cpu = tree_cpu_seconds(broker_pid) if broker_pid else 0.0
        await asyncio.gather(*(one_client(n, c) for n, c in enumerate(clients)))
        took, cpu = time.monotonic() - begun, time.process_time() - cpu
        broker_cpu = (tree_cpu_seconds(broker_pid) if broker_pid else 0.0) - broker_cpu
        for c in clients:
            await c.aclose()
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
    asyncio.run(main(parser.parse_args()))
