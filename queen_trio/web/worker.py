"""One worker process of a supervisor (`queen-trio serve --workers N`): a full broker on the
supervisor's listening socket.

The supervisor starts `python -m queen_trio.web.worker` with one end of a socket pair as its
standard input: the lifeline. Over it the worker receives its handoff (settings, the database
URL, the listening descriptors it inherited) and answers READY once it serves. Past that the
lifeline carries nothing: when it reads end-of-file the supervisor is gone (even by SIGKILL),
and the worker stops, within EXIT_WITHIN_SECONDS whatever it was doing.

A worker skips the steps its supervisor took once for all: binding the socket, the data
directory's lock, the embedded cluster, the migrations (unless the database was unreachable
then: each worker keeps trying, as a single broker does).
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import struct
import sys
import threading
import time

import attrs
import trio

from ..exits import Exit, report_boot_failure
from ..logs import configure_logging
from ..settings import Settings
from .auth import Authenticator
from .server import Lifecycle, run_until_signalled, serve_app

log = logging.getLogger("queen_trio.worker")

READY = b"R"
LENGTH = struct.Struct(">I")
# With its supervisor gone, a worker answers what it can (long polls 204) and exits by then.
EXIT_WITHIN_SECONDS = 1.5


@attrs.frozen
class Handoff:
    """What a worker is given: its settings (worker_index set), the database URL (the
    embedded cluster's, credentials included), whether the schema is current, and the
    listening descriptors it inherited (the shared one first)."""

    settings: Settings
    database_url: str | None
    migrated: bool
    listen_fds: tuple[int, ...]

    def encode(self) -> bytes:
        body = pickle.dumps(self)
        return LENGTH.pack(len(body)) + body


def _receive_handoff(lifeline: socket.socket) -> Handoff:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = lifeline.recv(n - len(data))
            if not chunk:
                raise EOFError("the supervisor closed the lifeline before the handoff")
            data += chunk
        return data

    (length,) = LENGTH.unpack(exactly(LENGTH.size))
    # The other end is our own parent, over a private socket pair: trusted.
    handoff = pickle.loads(exactly(length))  # noqa: S301
    assert isinstance(handoff, Handoff)
    return handoff


def _watch_lifeline(lifeline: socket.socket, token: trio.lowlevel.TrioToken,
                    stop: trio.Event) -> None:
    """In a thread of its own, so a busy or stuck event loop cannot delay it."""
    try:
        while lifeline.recv(64):
            pass
    except OSError:
        pass
    try:
        token.run_sync_soon(stop.set)
    except trio.RunFinishedError:
        return
    print("queen-trio worker: the supervisor is gone; stopping", file=sys.stderr, flush=True)
    time.sleep(EXIT_WITHIN_SECONDS)
    os._exit(Exit.REFUSED)


async def run_worker(handoff: Handoff, lifeline: socket.socket) -> None:
    settings = handoff.settings
    token = trio.lowlevel.current_trio_token()

    async def body(stop: trio.Event, lifecycle: Lifecycle,
                   task_status: trio.TaskStatus[str]) -> None:
        threading.Thread(target=_watch_lifeline, args=(lifeline, token, stop), daemon=True,
                         name="lifeline").start()
        listeners = [socket.socket(fileno=fd) for fd in handoff.listen_fds]
        auth = None
        if settings.app is None:
            auth = Authenticator(settings.auth)
            await auth.start()
        async with trio.open_nursery() as nursery:
            await nursery.start(_serve_and_report, settings, handoff, auth, listeners, stop)
            lifeline.sendall(READY)

    lifecycle = Lifecycle(name=f"queen-trio worker {settings.worker_index}")
    await run_until_signalled(body, lifecycle)


async def _serve_and_report(settings: Settings, handoff: Handoff, auth: Authenticator | None,
                            listeners: list[socket.socket], stop: trio.Event, *,
                            task_status: trio.TaskStatus[str]) -> None:
    await serve_app(settings, handoff.database_url, auth, listeners, stop,
                    migrate=not handoff.migrated, task_status=task_status)


def main() -> int:
    lifeline = socket.socket(fileno=sys.stdin.fileno())
    try:
        handoff = _receive_handoff(lifeline)
    except (EOFError, OSError) as exc:
        print(f"queen-trio worker: no handoff from a supervisor: {exc}", file=sys.stderr)
        return Exit.USAGE
    settings = handoff.settings
    configure_logging(settings.log_level, settings.log_format,
                      access_log=settings.log_requests, worker=settings.worker_index)
    try:
        trio.run(run_worker, handoff, lifeline)
    except Exception as exc:  # a boot failure: name the cause; the supervisor exits with it
        return report_boot_failure(exc, f"queen-trio worker {settings.worker_index}")
    return Exit.OK


if __name__ == "__main__":
    # Through the package's copy of this module, so the handoff unpickles to its classes.
    from queen_trio.web.worker import main as worker_main

    raise SystemExit(worker_main())
