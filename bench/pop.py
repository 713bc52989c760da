"""Consumption benchmarks.

    python bench/pop.py [--seconds 10] [--only autoack,popack,wildcard,latency] [--workers 1]

1. autoAck pop throughput at batch 1/10/100 (wrk, 64 connections, 100 prefilled partitions);
2. pop+ack throughput at batch 1/10/100 (wrk: each connection pops, then acks what it got
   with /ack/batch under the pop's lease);
3. wildcard pop latency (one sequential consumer) at 10, 1,000 and 10,000 partitions;
4. push -> consume latency with a consumer parked in a long poll (one message every 20 ms).

Throughput is counted in the database (cursor movement), not from wrk's request count, so it
is exactly the messages consumed. With `--workers N` the broker is `serve --workers N` and the
latency's producer and consumer talk to different workers. Results go to
bench/results/pop.json (pop-workers-N.json with more than one worker).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from common import broker, database, log, served_app, write_results, wrk

QUEUE = "bench.pop"


def prefill(url: str, queue: str, partitions: int, per_partition: int, payload: dict,
            senders: int = 8) -> None:
    """Push `per_partition` messages into each of `partitions` partitions, in bodies of up to
    500, from `senders` threads (each partition from one): one sender took minutes for the
    millions a fast machine consumes in a run."""
    from concurrent.futures import ThreadPoolExecutor

    def fill(first: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            for p in range(first, partitions, senders):
                left = per_partition
                while left:
                    n = min(left, 500)
                    body = {"items": [{"queue": queue, "partition": f"p{p}", "payload": payload}
                                      for _ in range(n)]}
                    r = client.post("/api/v1/push", json=body)
                    r.raise_for_status()
                    left -= n

    with ThreadPoolExecutor(senders) as pool:
        for done in [pool.submit(fill, first) for first in range(min(senders, partitions))]:
            done.result()


def consumed(db_url: str, queue: str) -> int:
    import asyncio

    import asyncpg

    async def run() -> int:
        conn = await asyncpg.connect(db_url)
        try:
            return int(await conn.fetchval(
                "SELECT coalesce(sum(cs.cursor_offset), 0) FROM queen.consumer_state cs "
                "JOIN queen.queues q ON q.id = cs.queue_id WHERE q.name = $1", queue))
        finally:
            await conn.close()

    return asyncio.run(run())


def lua_file(text: str) -> Path:
    path = Path(tempfile.mkstemp(suffix=".lua")[1])
    path.write_text(text)
    return path


AUTOACK_LUA = """
local path = "/api/v1/pop/queue/%s?batch=%d&autoAck=true"
function request() return wrk.format("GET", path) end
"""

# Per thread: acks waiting to be sent (wrk calls request() per connection, state is per thread).
POPACK_LUA = """
local pop_path = "/api/v1/pop/queue/%s?batch=%d"
local pending = {}
local headers = {["Content-Type"] = "application/json"}
function request()
  local body = table.remove(pending)
  if body then return wrk.format("POST", "/api/v1/ack/batch", headers, body) end
  return wrk.format("GET", pop_path)
end
function response(status, hdrs, body)
  if status ~= 200 or body == nil or string.sub(body, 1, 1) ~= "{" then return end
  if not string.find(body, '"messages"') then return end
  local lease = string.match(body, '"leaseId":"([^"]*)"')
  local items = {}
  for tx, pid in string.gmatch(body, '"transactionId":"([^"]+)","traceId":[^,]+,"data":.-"partitionId":"([^"]+)"') do
    items[#items + 1] = '{"transactionId":"' .. tx .. '","partitionId":"' .. pid .. '","leaseId":"' .. lease .. '"}'
  end
  if #items > 0 then
    pending[#pending + 1] = '{"acknowledgments":[' .. table.concat(items, ",") .. ']}'
  end
end
"""


def throughput(url: str, db_url: str, script: str, seconds: int, label: str,
               queue: str = QUEUE) -> dict:
    before = consumed(db_url, queue)
    started = time.monotonic()
    run = wrk(url, lua_file(script), connections=64, seconds=seconds)
    elapsed = time.monotonic() - started
    after = consumed(db_url, queue)
    result = {"msg_per_s": round((after - before) / elapsed), "requests_per_s": run["requests_per_s"],
              "p50_ms": run["p50_ms"], "p99_ms": run["p99_ms"], "non_2xx": run["non_2xx"]}
    log(f"{label}: {json.dumps(result)}")
    return result


async def wildcard_latency(url: str, partitions: int, pops: int) -> dict:
    queue = f"bench.wild.{partitions}"
    per_partition = max(2, 2 * pops // partitions + 1)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        step = max(1, 500 // per_partition)
        for start in range(0, partitions, step):
            items = [{"queue": queue, "partition": f"p{p}", "payload": {"p": p}}
                     for p in range(start, min(start + step, partitions))
                     for _ in range(per_partition)]
            (await client.post("/api/v1/push", json={"items": items})).raise_for_status()
        samples = []
        for _ in range(pops):
            t = time.perf_counter()
            r = await client.get(f"/api/v1/pop/queue/{queue}", params={"batch": "1",
                                                                      "autoAck": "true"})
            samples.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.status_code
    samples.sort()
    return {"partitions": partitions, "p50_ms": round(statistics.median(samples), 2),
            "p99_ms": round(samples[int(len(samples) * 0.99) - 1], 2)}


class RawClient:
    """A keep-alive HTTP/1.1 client on one trio socket, for the latency figure without the
    client's own cost: httpx spends about a millisecond of CPU per request here, this a few
    tens of µs, so what is left is the broker's (and the network's)."""

    def __init__(self, url: str) -> None:
        host_port = url.split("://", 1)[1].rstrip("/")
        self._host, port = host_port.rsplit(":", 1)
        self._port = int(port)
        self._buffer = b""

    async def __aenter__(self) -> RawClient:
        self._stream = await trio.open_tcp_stream(self._host, self._port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.aclose()

    async def request(self, method: str, path: str, body: object = None) -> tuple[int, bytes]:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nhost: {self._host}\r\n"
        if body is not None:
            head += f"content-type: application/json\r\ncontent-length: {len(data)}\r\n"
        await self._stream.send_all(head.encode() + b"\r\n" + data)
        while b"\r\n\r\n" not in self._buffer:
            self._buffer += await self._stream.receive_some(65536)
        header, _, rest = self._buffer.partition(b"\r\n\r\n")
        lines = header.split(b"\r\n")
        length = next((int(value) for name, _, value in (line.partition(b":") for line in lines[1:])
                       if name.strip().lower() == b"content-length"), 0)
        while len(rest) < length:
            rest += await self._stream.receive_some(65536)
        self._buffer = rest[length:]
        return int(lines[0].split(b" ", 2)[1]), rest[:length]


async def push_to_consume(url: str, messages: int, consumer_url: str | None = None, *,
                          client: str = "httpx") -> dict:
    """`consumer_url`: the consumer talks to another worker than the producer. `client`:
    "httpx" (as the official clients' stack costs) or "raw" (RawClient: the broker's part)."""
    queue = "bench.latency"
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as setup:
        await setup.post("/api/v1/configure", json={"queue": queue})
    pop_path = f"/api/v1/pop/queue/{queue}?wait=true&timeout=5000&batch=10&autoAck=true"

    async def send(producer: Any, body: dict) -> None:
        if client == "raw":
            status, _ = await producer.request("POST", "/api/v1/push", body)
            assert status < 300, status
        else:
            (await producer.post("/api/v1/push", json=body)).raise_for_status()

    async def receive(consumer: Any) -> tuple[float, list[dict]]:
        if client == "raw":
            status, data = await consumer.request("GET", pop_path)
            now = time.perf_counter()
            return now, json.loads(data)["messages"] if status == 200 else []
        r = await consumer.get(pop_path)
        now = time.perf_counter()
        return now, r.json()["messages"] if r.status_code == 200 else []

    def open_client(base: str) -> Any:
        return RawClient(base) if client == "raw" else httpx.AsyncClient(base_url=base,
                                                                         timeout=60)

    async with open_client(url) as producer, open_client(consumer_url or url) as consumer:
        done = trio.Event()

        async def consume() -> None:
            while len(latencies) < messages:
                now, delivered = await receive(consumer)
                for m in delivered:
                    latencies.append((now - m["data"]["sent"]) * 1000)
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await trio.sleep(0.5)
            for _ in range(messages):
                await send(producer, {"items": [{"queue": queue,
                                                 "payload": {"sent": time.perf_counter()}}]})
                await trio.sleep(0.02)
            await done.wait()
    latencies.sort()
    return {"messages": len(latencies), "p50_ms": round(statistics.median(latencies), 2),
            "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--only", default="autoack,popack,wildcard,latency")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    only = set(args.only.split(","))
    payload = {"orderId": 8891, "customer": "customer-42", "total": 42.5}
    results: dict = {"seconds": args.seconds, "workers": args.workers}
    with served_app(args.workers) as (ceiling_url, _, _):
        ceiling = wrk(ceiling_url + "/", lua_file('function request() return wrk.format("GET", "/") end'),
                      connections=64, seconds=args.seconds)
        results["ceiling_requests_per_s"] = ceiling["requests_per_s"]
        log(f"ceiling: {ceiling['requests_per_s']} req/s")
    # Each throughput run gets its own queue, prefilled for what it can consume: wrk stops
    # with pops in flight, and their leases would starve the next run for a lease time.
    per_partition = {("autoack", 1): 150, ("autoack", 10): 1200, ("autoack", 100): 8000,
                     ("popack", 1): 150, ("popack", 10): 800, ("popack", 100): 3000}
    scripts = {"autoack": AUTOACK_LUA, "popack": POPACK_LUA}
    with database() as db_url, broker(db_url, workers=args.workers) as (url, _proc, own):
        # Latency first, on a quiet database.
        if "latency" in only:
            results["push_to_consume"] = trio.run(push_to_consume, own[0], 300, own[-1])
            log(f"push->consume: {results['push_to_consume']}")
        if "wildcard" in only:
            results["wildcard"] = [trio.run(wildcard_latency, url, n, 300) for n in (10, 1000, 10000)]
            log(f"wildcard: {results['wildcard']}")
        for kind in ("autoack", "popack"):
            if kind not in only:
                continue
            results[kind] = {}
            for b in (1, 10, 100):
                queue = f"{QUEUE}.{kind}.{b}"
                log(f"{kind} batch {b}: prefilling {100 * per_partition[kind, b]} messages ...")
                prefill(url, queue, 100, per_partition[kind, b], payload)
                results[kind][b] = throughput(url, db_url, scripts[kind] % (queue, b),
                                              args.seconds, f"{kind} batch {b}", queue)
    print(json.dumps(results, indent=2))
    name = "pop" if args.workers == 1 else f"pop-workers-{args.workers}"
    print(f"results: {write_results(name, results)}")


if __name__ == "__main__":
    main()
