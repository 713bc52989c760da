"""What a relay to the ephemeral owner costs: sequential pushes of one message, served by the
owner directly and relayed through the other worker; wall time per call and each process's
CPU per call (from /proc).

    python bench/ephemeral_relay.py [--calls 2000] [--rounds 2]

Always 2 workers (one owns the rings, the other relays to it). Prints one line per round and
placement; writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import trio
from common import broker, database
from pop import RawClient

PUSH = "/api/v1/ephemeral/push"
BODY = {"queue": "relay.cost", "messages": [{"payload": 1}]}


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def worker_pids(urls: list[str]) -> tuple[dict[str, int], str]:
    """Each worker's pid, and the owner's URL."""
    pids, owner_url = {}, ""
    async with RawClient(urls[0]) as c:
        owner = json.loads((await c.request("GET", "/api/v1/ephemeral/queues"))[1])["owner"]
    for url in urls:
        async with RawClient(url) as c:
            worker = json.loads((await c.request("GET", "/health"))[1])["worker_id"]
        pids[url] = int(worker.rsplit(":", 1)[1].split("/")[0])
        if owner.startswith(worker + "/"):
            owner_url = url
    return pids, owner_url


async def run(urls: list[str], calls: int, rounds: int) -> None:
    pids, owner_url = await worker_pids(urls)
    other_url = next(u for u in urls if u != owner_url)
    for _ in range(rounds):
        for label, url in (("direct", owner_url), ("relayed", other_url)):
            async with RawClient(url) as c:
                for _ in range(200):  # warm: connections, caches
                    await c.request("POST", PUSH, BODY)
                owner_cpu, other_cpu = cpu_seconds(pids[owner_url]), cpu_seconds(pids[other_url])
                walls = []
                for _ in range(calls):
                    started = time.perf_counter()
                    await c.request("POST", PUSH, BODY)
                    walls.append(time.perf_counter() - started)
                owner_ms = (cpu_seconds(pids[owner_url]) - owner_cpu) / calls * 1000
                other_ms = (cpu_seconds(pids[other_url]) - other_cpu) / calls * 1000
            walls.sort()
            print(f"{label:8} wall p50 {walls[calls // 2] * 1000:.2f} ms "
                  f"p99 {walls[int(calls * 0.99)] * 1000:.2f} ms; CPU per call: owner "
                  f"{owner_ms:.2f} ms, relaying worker {other_ms:.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with database() as url, broker(url, workers=2) as (_, _, urls):
        trio.run(run, urls, args.calls, args.rounds)


if __name__ == "__main__":
    main()
