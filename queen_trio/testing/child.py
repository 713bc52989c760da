"""The test brokers' process: `python -m queen_trio.testing.child DATA_ROOT`.

`TestBroker` (process.py) starts it, so that the test process never imports trio-asyncio:
that package installs a global event-loop policy, after which every `asyncio.run` and
`IsolatedAsyncioTestCase` there runs on trio-asyncio's loop instead of asyncio's own. This
process runs one PostgreSQL and the brokers asked for, and talks JSON lines: requests on
stdin, one answer line each on its stdout (stdout is then pointed at stderr, so a stray print
cannot break an answer).

    {"op": "start", "database_url": null, "keep_data": false}   -> {"ok": {"embedded": true}}
    {"op": "open", "settings": {...}}                           -> {"ok": {"id", "url", "settings"}}
    {"op": "reset" | "now" | "close", "id": 1}                  -> {"ok": ...}
    {"op": "recorded_since", "id": 1, "since": "...", "limit": 200} -> {"ok": {...}}

A request that fails answers {"error": "..."}. At the end of stdin (the test process closed
it, or died) every broker stops, the cluster stops and DATA_ROOT is removed (unless
keep_data).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import shutil
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

# Light: the template cache needs neither trio nor asyncpg to copy and start a cluster.
from . import cluster_cache

if TYPE_CHECKING:
    import trio

    from ..storage.embedded import EmbeddedPostgres
    from .inprocess import RunningBroker, TestPostgres

log = logging.getLogger("queen_trio.testing")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    data_root = Path(args[0])
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    first = json.loads(_read_first_line() or b"{}")
    if first.get("op") != "start":
        answers.write(b'{"error": "the first request must be start"}\n')
        return 2
    try:
        early = None if first.get("database_url") else _start_copy_early(data_root)
        # The broker's modules (trio-asyncio, asyncpg, hypercorn) load meanwhile.
        import trio

        from ..logs import configure_logging

        configure_logging(first.get("log_level") or "warning")
        trio.run(_serve, first, early, data_root, answers)
    finally:
        if not first.get("keep_data"):
            shutil.rmtree(data_root, ignore_errors=True)
    return 0


def _read_first_line() -> bytes:
    """Byte by byte: nothing after the first line may be read ahead of trio's reader."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte:
            break
        line += byte
    return bytes(line)


def _start_copy_early(data_root: Path) -> Future[EmbeddedPostgres | cluster_cache.Build | None]:
    """In a thread, while the broker's modules load: copy and start the cached template, or
    (none cached) begin building it. None if that failed (the trio side tries again)."""
    future: Future[EmbeddedPostgres | cluster_cache.Build | None] = Future()

    def run() -> None:
        try:
            template = cluster_cache.find_template()
            future.set_result(cluster_cache.begin_build() if template is None else
                              cluster_cache.start_copy(template, data_root / "cluster"))
        except BaseException as exc:
            log.warning("the cached template cluster does not start", extra={"error": str(exc)})
            shutil.rmtree(data_root / "cluster", ignore_errors=True)
            future.set_result(None)

    threading.Thread(target=run, name="queen-test-cluster", daemon=True).start()
    return future


class _Hosted:
    """A broker this process runs, until `stop` is set; `done` once it has shut down."""

    def __init__(self, running: RunningBroker, stop: trio.Event, done: trio.Event) -> None:
        self.running, self.stop, self.done = running, stop, done


async def _serve(first: dict[str, Any],
                 early: Future[EmbeddedPostgres | cluster_cache.Build | None] | None,
                 data_root: Path, answers: BinaryIO) -> None:
    import trio

    from . import inprocess
    from .options import settings_to_json

    keep_data = bool(first.get("keep_data"))
    brokers: dict[int, _Hosted] = {}

    async def run_broker(server: TestPostgres, overrides: dict[str, Any], number: int, *,
                         task_status: trio.TaskStatus[_Hosted]) -> None:
        stop, done = trio.Event(), trio.Event()
        try:
            async with inprocess.serve_test_broker(
                    server, overrides, spool_dir=data_root / f"spool-{number}",
                    keep_data=keep_data) as running:
                task_status.started(_Hosted(running, stop, done))
                await stop.wait()
        finally:
            done.set()

    async def handle(request: dict[str, Any], server: TestPostgres,
                     nursery: trio.Nursery) -> Any:
        op = request.get("op")
        if op == "open":
            number = max(brokers, default=0) + 1
            hosted: _Hosted = await nursery.start(run_broker, server, request["settings"],
                                                  number)
            brokers[number] = hosted
            return {"id": number, "url": hosted.running.url,
                    "settings": settings_to_json(hosted.running.settings)}
        hosted = brokers[request["id"]]
        if op == "reset":
            await hosted.running.reset()
            return None
        if op == "now":
            return (await hosted.running.now()).isoformat()
        if op == "recorded_since":
            since = datetime.datetime.fromisoformat(request["since"])
            return await hosted.running.recorded_since(since, limit=request.get("limit", 200))
        if op == "close":
            del brokers[request["id"]]
            hosted.stop.set()
            await hosted.done.wait()
            return None
        raise ValueError(f"unknown request {op!r}")

    def answer(message: dict[str, Any]) -> None:
        answers.write(json.dumps(message).encode() + b"\n")

    try:
        async with inprocess.open_test_postgres(
                data_root=data_root, database_url=first.get("database_url"),
                early=early) as server:
            answer({"ok": {"embedded": server.embedded}})
            async with trio.open_nursery() as nursery:
                async for request in _requests():
                    try:
                        result = await handle(request, server, nursery)
                    except Exception as exc:
                        answer({"error": f"{type(exc).__name__}: {exc}"})
                    else:
                        answer({"ok": result})
                for hosted in brokers.values():
                    hosted.stop.set()
    except Exception as exc:
        # Start-up failed (no cluster, an unreachable server): say so, then exit.
        answer({"error": f"{type(exc).__name__}: {exc}"})
        raise


async def _requests() -> Any:
    """Each JSON line of stdin, until its end."""
    import trio

    stream = trio.lowlevel.FdStream(os.dup(0))
    buffer = b""
    async with stream:
        while True:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)


if __name__ == "__main__":
    raise SystemExit(main())
