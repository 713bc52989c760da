"""Push -> consume latency with one waiting consumer, and what happens in between.

    python bench/latency.py [--workers 1] [--messages 300] [--rounds 3]

1. **Latency.** One consumer parks a long poll (`wait=true`, batch 10, autoAck); a producer
   pushes one message every 20 ms carrying its send time; the consumer's receive time minus
   it is the latency. Each round runs twice: with httpx clients (the official Python client's
   stack), then with a raw HTTP/1.1 client (bench/pop.py RawClient), which leaves out most of
   the client's own cost. With `--workers 2` the producer talks to worker 1 and the consumer to
   worker 2 (the wake-up then comes through NOTIFY). p50 and p99 per round, and their median.
2. **The path, counted.** In-process (no HTTP), one broker and one parked waiter: a push is
   committed, and the script counts what the broker does from that commit to the waiter's
   reply: database calls (each one trio-asyncio crossing), the statements they run (each a
   round trip), and the trio tasks started. Counted, not timed, so it is the same on a busy
   machine.

Results go to bench/results/latency.json (latency-workers-N.json with more workers).
"""

from __future__ import annotations

import argparse
import json
import statistics
from functools import partial

import trio
from common import broker, database, log, write_results
from pop import push_to_consume


class _Counts:
    """Database calls, statements (round trips) and trio tasks started, while counting."""

    def __init__(self) -> None:
        self.calls = self.statements = self.tasks = 0
        self.on = False


def _counting(counts: _Counts):  # type: ignore[no-untyped-def]
    """Patches that count Database calls and asyncpg statements (a benchmark's probe into
    asyncpg's internals: every fetch, and execute with arguments, goes through _do_execute),
    and a trio instrument that counts tasks. Returns (install, uninstall, instrument)."""
    import asyncpg

    from queen_trio.storage.database import Database

    originals = (Database.call, asyncpg.Connection._do_execute, asyncpg.Connection.execute)

    async def call(self, work):  # type: ignore[no-untyped-def]
        if counts.on:
            counts.calls += 1
        return await originals[0](self, work)

    def do_execute(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if counts.on:
            counts.statements += 1
        return originals[1](self, *args, **kwargs)

    async def execute(self, query, *args, **kwargs):  # type: ignore[no-untyped-def]
        if counts.on and not args:  # a simple query: no _do_execute behind it
            counts.statements += 1
        return await originals[2](self, query, *args, **kwargs)

    def install() -> None:
        Database.call = call  # type: ignore[method-assign]
        asyncpg.Connection._do_execute = do_execute  # type: ignore[method-assign]
        asyncpg.Connection.execute = execute  # type: ignore[method-assign]

    def uninstall() -> None:
        (Database.call, asyncpg.Connection._do_execute,  # type: ignore[method-assign]
         asyncpg.Connection.execute) = originals

    class Tasks(trio.abc.Instrument):
        def task_spawned(self, task: trio.lowlevel.Task) -> None:
            if counts.on:
                counts.tasks += 1

    return install, uninstall, Tasks()


async def count_the_path(db_url: str) -> dict:
    """What a waiter costs from the push's commit to its reply: a push with a parked waiter,
    less the same push with nobody waiting."""
    import tempfile
    from pathlib import Path

    import httpx

    from queen_trio.broker import open_broker
    from queen_trio.settings import Settings
    from queen_trio.web.routes import create_app

    counts = _Counts()
    install, uninstall, instrument = _counting(counts)
    settings = Settings(database_url=db_url, spool_dir=Path(tempfile.mkdtemp()))
    install()
    trio.lowlevel.add_instrument(instrument)
    try:
        async with open_broker(settings, db_url) as b:
            transport = httpx.ASGITransport(app=create_app(b))
            async with httpx.AsyncClient(transport=transport, base_url="http://b",
                                         timeout=30) as c:
                body = {"items": [{"queue": "path", "payload": 1}]}
                await c.post("/api/v1/configure", json={"queue": "path"})
                for _ in range(3):  # warm: the queue's facts cached, the group joined
                    await c.post("/api/v1/push", json=body)
                    await c.get("/api/v1/pop/queue/path", params={"autoAck": "true"})

                counts.on = True
                await c.post("/api/v1/push", json=body)
                await c.get("/api/v1/pop/queue/path", params={"autoAck": "true"})
                counts.on = False
                alone = (counts.calls, counts.statements, counts.tasks)
                counts.calls = counts.statements = counts.tasks = 0

                # A woken pop, three times (the first ones warm what a fresh pool connection
                # prepares); the last is counted.
                for _ in range(3):
                    counts.calls = counts.statements = counts.tasks = 0
                    reply: dict = {}

                    async def waiter(reply: dict = reply) -> None:
                        reply["r"] = await c.get("/api/v1/pop/queue/path", params={
                            "wait": "true", "timeout": "10000", "autoAck": "true"})

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(waiter)
                        while b.consumer.statistics().parked < 1:
                            await trio.sleep(0.01)
                        counts.on = True
                        await c.post("/api/v1/push", json=body)
                        while "r" not in reply:
                            await trio.sleep(0.001)
                        counts.on = False
                    assert reply["r"].status_code == 200, reply["r"].text
    finally:
        trio.lowlevel.remove_instrument(instrument)
        uninstall()
    woken = (counts.calls, counts.statements, counts.tasks)
    return {"push_and_plain_pop": dict(zip(("database_calls", "statements", "tasks_started"),
                                           alone, strict=True)),
            "push_and_woken_pop": dict(zip(("database_calls", "statements", "tasks_started"),
                                           woken, strict=True))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict = {"workers": args.workers, "messages": args.messages, "rounds": [],
                     "raw_client_rounds": []}
    with database() as db_url:
        with broker(db_url, workers=args.workers) as (_, _, own):
            for r in range(args.rounds):
                # Alternating: the clients of the official stack (httpx), then a raw one.
                row = trio.run(push_to_consume, own[0], args.messages, own[-1])
                log(f"round {r + 1}: {row}")
                results["rounds"].append(row)
                raw = trio.run(partial(push_to_consume, own[0], args.messages, own[-1],
                                       client="raw"))
                log(f"round {r + 1}, raw client: {raw}")
                results["raw_client_rounds"].append(raw)
        results["path"] = trio.run(count_the_path, db_url)
    for key, rounds in (("", results["rounds"]), ("raw_client_", results["raw_client_rounds"])):
        results[f"{key}p50_ms"] = statistics.median(r["p50_ms"] for r in rounds)
        results[f"{key}p99_ms"] = statistics.median(r["p99_ms"] for r in rounds)
    name = "latency" if args.workers == 1 else f"latency-workers-{args.workers}"
    path = write_results(name, results)
    where = "different workers" if args.workers > 1 else "one worker"
    print(f"push -> consume, producer and consumer on {where}: p50 {results['p50_ms']} ms, "
          f"p99 {results['p99_ms']} ms with httpx clients; p50 {results['raw_client_p50_ms']} "
          f"ms, p99 {results['raw_client_p99_ms']} ms with raw HTTP/1.1 clients (medians of "
          f"{args.rounds} rounds)")
    print(f"what a push and its pop cost, counted: {json.dumps(results['path'])}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
