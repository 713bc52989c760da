"""Ephemeral queues beside durable ones, in the same run: push and pop messages per second at
batch 1, 10 and 100, and a request/reply round trip (p50/p99).

    python bench/ephemeral.py [--workers 1] [--seconds 3] [--trips 300] [--client raw|httpx]

- **Push**: 8 producers push batches of B for `--seconds` to the producer's URL; messages per
  second.
- **Pop**: a queue filled beforehand; 8 consumers pop batches of B (autoAck) for `--seconds`
  from the consumer's URL; messages per second.
- **Round trip**: a responder long-polls the request queue and pushes each reply to the
  reply queue; the requester pushes a request and long-polls its reply, one at a time. The
  requester talks to the producer's URL, the responder to the consumer's.

With `--workers 2` the producer's URL is worker 1's and the consumer's worker 2's (so on
ephemeral queues half the requests are relayed to the owner, and on durable ones the wake-up
comes through NOTIFY). Which worker owns the rings is decided at boot by whichever takes the
owner's lock first, and the ephemeral round trip depends on it: with the owner on the
requester's worker, the responder's long poll is relayed and waits at the owner before the
request comes; with the owner on the responder's worker, the requester's push and then its
pop are relayed one after the other, both on the trip's path. So with several workers the
ephemeral round trip is measured in both placements (`ephemeral_owner_requester`,
`ephemeral_owner_responder`, producer and consumer always on different workers), and
`ephemeral` (and the speedup) takes the slower of the two at p50 and at p99.

`--client raw` (default) uses bench/pop.py's RawClient, which leaves out the client's own
cost; `httpx` the official client's stack.

Results go to bench/results/ephemeral[-workers-N].json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import httpx
import trio
from common import broker, database, log, write_results
from pop import RawClient

CONCURRENCY = 8


class HttpxClient:
    def __init__(self, url: str) -> None:
        self._client = httpx.AsyncClient(base_url=url, timeout=60)

    async def __aenter__(self) -> HttpxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def request(self, method: str, path: str, body: object = None) -> tuple[int, bytes]:
        r = await self._client.request(method, path, json=body)
        return r.status_code, r.content


def client(kind: str, url: str) -> Any:
    return RawClient(url) if kind == "raw" else HttpxClient(url)


def push_request(kind: str, queue: str, payloads: list[Any]) -> tuple[str, dict]:
    if kind == "ephemeral":
        return "/api/v1/ephemeral/push", {"queue": queue,
                                          "messages": [{"payload": p} for p in payloads]}
    return "/api/v1/push", {"items": [{"queue": queue, "payload": p} for p in payloads]}


def pop_path(kind: str, queue: str, batch: int, *, wait_ms: int = 0) -> str:
    wait = f"&wait=true&timeout={wait_ms}" if wait_ms else ""
    if kind == "ephemeral":
        return f"/api/v1/ephemeral/pop?queue={queue}&batch={batch}&autoAck=true{wait}"
    return f"/api/v1/pop/queue/{queue}?batch={batch}&autoAck=true{wait}"


def popped(kind: str, status: int, body: bytes) -> int:
    import json

    if status == 204 or not body:
        return 0
    return len(json.loads(body)["messages"])


async def push_rate(kind: str, client_kind: str, url: str, batch: int, seconds: float) -> float:
    queue = f"bench.{kind}.push.{batch}"
    sent = 0

    async def producer() -> None:
        nonlocal sent
        async with client(client_kind, url) as c:
            path, body = push_request(kind, queue, [{"n": i} for i in range(batch)])
            while trio.current_time() < deadline:
                status, _ = await c.request("POST", path, body)
                assert status == 201, status
                sent += batch

    deadline = trio.current_time() + seconds
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(CONCURRENCY):
            nursery.start_soon(producer)
    return sent / (time.perf_counter() - started)


async def pop_rate(kind: str, client_kind: str, push_url: str, pop_url: str, batch: int,
                   seconds: float) -> float:
    queue = f"bench.{kind}.pop.{batch}"
    # Fill beforehand: more than the consumers can take in `seconds` at this machine's pace.
    fill = {1: 4_000, 10: 20_000, 100: 60_000}[batch]
    async with client(client_kind, push_url) as c:
        for start in range(0, fill, 500):
            path, body = push_request(kind, queue, [{"n": i} for i in range(start, start + 500)])
            status, _ = await c.request("POST", path, body)
            assert status == 201, status
    got = 0

    async def consumer() -> None:
        # An empty answer is not the end: a durable partition is leased to one consumer at a
        # time, and the others' pops find nothing meanwhile.
        nonlocal got
        async with client(client_kind, pop_url) as c:
            path = pop_path(kind, queue, batch)
            while trio.current_time() < deadline and got < fill:
                status, body = await c.request("GET", path)
                got += popped(kind, status, body)

    deadline = trio.current_time() + seconds
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(CONCURRENCY):
            nursery.start_soon(consumer)
    if got >= fill:
        log(f"  {kind} pop batch {batch}: the queue ran dry; the rate is a lower bound")
    return got / (time.perf_counter() - started)


async def round_trips(kind: str, client_kind: str, requester_url: str, responder_url: str,
                      trips: int) -> dict[str, float]:
    import json

    requests, replies = f"bench.{kind}.rr.req", f"bench.{kind}.rr.reply"
    times: list[float] = []
    done = trio.Event()

    async def responder() -> None:
        async with client(client_kind, responder_url) as c:
            # Never cancelled mid-request (a raw connection would keep a stale reply): each
            # long poll ends within its own 500 ms.
            while not done.is_set():
                status, body = await c.request("GET", pop_path(kind, requests, 10,
                                                               wait_ms=500))
                if popped(kind, status, body):
                    for m in json.loads(body)["messages"]:
                        payload = m.get("payload", m.get("data"))
                        path, reply = push_request(kind, replies, [payload])
                        await c.request("POST", path, reply)

    async def requester() -> None:
        async with client(client_kind, requester_url) as c, \
                client(client_kind, requester_url) as waiter:
            for i in range(trips):
                started = time.perf_counter()
                path, body = push_request(kind, requests, [{"i": i}])
                status, _ = await c.request("POST", path, body)
                assert status == 201, status
                while True:
                    status, answer = await waiter.request(
                        "GET", pop_path(kind, replies, 1, wait_ms=5000))
                    if popped(kind, status, answer):
                        break
                times.append((time.perf_counter() - started) * 1000)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(responder)
        await trio.sleep(0.2)
        nursery.start_soon(requester)
    times.sort()
    return {"p50_ms": round(statistics.median(times), 3),
            "p99_ms": round(times[int(len(times) * 0.99) - 1], 3), "trips": trips}


async def owner_url(urls: list[str]) -> str:
    """The worker that owns the ephemeral rings (its /metrics says so; each worker answers
    /metrics itself)."""
    import json

    for _ in range(50):
        for url in urls:
            async with RawClient(url) as c:
                status, body = await c.request("GET", "/metrics")
            if status == 200 and (json.loads(body).get("ephemeral") or {}).get("owner"):
                return url
        await trio.sleep(0.1)
    raise RuntimeError("no worker owns the ephemeral queues")


async def run(urls: list[str], seconds: float, trips: int,
              client_kind: str) -> dict[str, Any]:
    push_url, pop_url = urls[0], urls[-1]
    results: dict[str, Any] = {"push": {}, "pop": {}, "round_trip": {}}
    for batch in (1, 10, 100):
        for kind in ("durable", "ephemeral"):
            rate = await push_rate(kind, client_kind, push_url, batch, seconds)
            results["push"].setdefault(str(batch), {})[kind] = round(rate)
            log(f"push batch {batch} {kind}: {rate:,.0f} msg/s")
    for batch in (1, 10, 100):
        for kind in ("durable", "ephemeral"):
            rate = await pop_rate(kind, client_kind, push_url, pop_url, batch, seconds)
            results["pop"].setdefault(str(batch), {})[kind] = round(rate)
            log(f"pop batch {batch} {kind}: {rate:,.0f} msg/s")
    rtt = await round_trips("durable", client_kind, push_url, pop_url, trips)
    results["round_trip"]["durable"] = rtt
    log(f"round trip durable: {rtt}")
    if push_url == pop_url:
        rtt = await round_trips("ephemeral", client_kind, push_url, pop_url, trips)
    else:
        owner = await owner_url(urls)
        other = next(url for url in (push_url, pop_url) if url != owner)
        placements = {"ephemeral_owner_requester": (owner, other),
                      "ephemeral_owner_responder": (other, owner)}
        for name, (requester, responder) in placements.items():
            results["round_trip"][name] = await round_trips(
                "ephemeral", client_kind, requester, responder, trips)
            log(f"round trip {name}: {results['round_trip'][name]}")
        measured = [results["round_trip"][name] for name in placements]
        rtt = {"p50_ms": max(r["p50_ms"] for r in measured),
               "p99_ms": max(r["p99_ms"] for r in measured), "trips": trips}
    results["round_trip"]["ephemeral"] = rtt
    log(f"round trip ephemeral: {rtt}")
    d, e = results["round_trip"]["durable"], results["round_trip"]["ephemeral"]
    results["round_trip"]["speedup"] = {"p50": round(d["p50_ms"] / e["p50_ms"], 2),
                                        "p99": round(d["p99_ms"] / e["p99_ms"], 2)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--trips", type=int, default=300)
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw")
    args = parser.parse_args()
    with database() as db_url, broker(db_url, workers=args.workers) as (_, _, own):
        results = trio.run(run, own, args.seconds, args.trips, args.client)
    results.update(workers=args.workers, client=args.client, seconds=args.seconds)
    name = "ephemeral" if args.workers == 1 else f"ephemeral-workers-{args.workers}"
    if args.client != "raw":
        name += f"-{args.client}"
    path = write_results(name, results)
    rt = results["round_trip"]
    print(f"round trip ({args.client} client, {args.workers} worker(s)): durable p50 "
          f"{rt['durable']['p50_ms']} ms p99 {rt['durable']['p99_ms']} ms; ephemeral p50 "
          f"{rt['ephemeral']['p50_ms']} ms p99 {rt['ephemeral']['p99_ms']} ms; speedup "
          f"{rt['speedup']}")
    for name in ("ephemeral_owner_requester", "ephemeral_owner_responder"):
        if name in rt:
            print(f"  {name}: p50 {rt[name]['p50_ms']} ms p99 {rt[name]['p99_ms']} ms")
    for what in ("push", "pop"):
        for batch, row in results[what].items():
            print(f"{what} batch {batch}: durable {row['durable']:,} msg/s, ephemeral "
                  f"{row['ephemeral']:,} msg/s")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
