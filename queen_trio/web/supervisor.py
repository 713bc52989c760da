"""`queen-trio serve --workers N`: one supervisor, N broker processes on one listening socket.

The supervisor takes, once for all, the steps a single broker takes for itself: it binds the
socket (and, with --worker-ports, one per worker), takes the data directory's lock, starts or
adopts the embedded cluster (max_connections sized for every worker), adopts spool files no
live worker holds and applies the migrations. Then it starts the workers (web/worker.py),
each a full broker that inherits the sockets; the kernel spreads the connections over them.

A worker that dies is restarted, after a pause that doubles with each quick death (from
RESTART_FIRST_SECONDS up to RESTART_MAX_SECONDS) and resets once a worker stayed up for
STABLE_SECONDS. A worker that dies before it serves failed at boot: at the first start that
stops the supervisor at once, later after BOOT_FAILURES_ALLOWED in a row; the supervisor then
exits with that worker's status.

SIGTERM or SIGINT: every worker is sent SIGTERM and drains (answers long polls 204, finishes
its requests, flushes its lane); then the cluster stops. A second signal kills the workers and
exits at once. Workers run in a session of their own, so a terminal's Ctrl-C reaches the
supervisor only.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import time
from contextlib import nullcontext

import attrs
import trio
import trio_asyncio

from ..exits import WorkerFailed
from ..push.spool import claim_spool_root
from ..settings import Settings
from ..storage.database import is_connection_failure
from ..storage.datadir import claim_data_dir
from ..storage.schema import migrate
from .auth import Authenticator
from .listen import bind_listener, bind_worker_ports
from .server import Lifecycle, run_until_signalled, running_database, warn_if_open
from .worker import READY, Handoff

log = logging.getLogger("queen_trio.supervisor")

RESTART_FIRST_SECONDS = 0.1
RESTART_MAX_SECONDS = 10.0
STABLE_SECONDS = 30.0
BOOT_FAILURES_ALLOWED = 5


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


async def serve_workers(settings: Settings, *,
                        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
                        stop: trio.Event | None = None) -> None:
    """`serve` with workers: until SIGTERM/SIGINT (or `stop`)."""

    async def body(stop: trio.Event, lifecycle: Lifecycle,
                   task_status: trio.TaskStatus[str]) -> None:
        await supervise(settings, stop, lifecycle, task_status=task_status)

    await run_until_signalled(body, Lifecycle(), task_status=task_status, stop=stop)


async def supervise(settings: Settings, stop: trio.Event, lifecycle: Lifecycle, *,
                    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    listeners = [bind_listener(settings)]
    own = bind_worker_ports(settings)
    warn_if_open(settings)
    try:
        if settings.app is not None:  # the ceiling: no database, no broker
            pool = WorkerPool(settings, None, migrated=True, shared=listeners[0], own=own)
            lifecycle.abandon = pool.kill_all
            await pool.run(stop, task_status=task_status)
            return
        # Refused here, before the cluster, as a single broker refuses; each worker reads it
        # again for itself.
        await Authenticator(settings.auth).start()
        with (claim_data_dir(settings.data_dir, settings.data_dir_fix) if settings.uses_data_dir
              else nullcontext()):
            with claim_spool_root(settings.spool_root, workers=settings.workers):
                async with running_database(settings, lifecycle) as url:
                    if stop.is_set():
                        return
                    migrated = await _migrate_once(url)
                    pool = WorkerPool(settings, url, migrated=migrated, shared=listeners[0],
                                      own=own)
                    lifecycle.abandon = pool.kill_all
                    await pool.run(stop, task_status=task_status)
    finally:
        for sock in [*listeners, *own]:
            sock.close()


async def _migrate_once(url: str) -> bool:
    """Migrations once, before the workers start; False when the database is unreachable
    now (each worker then keeps trying, as a single broker does)."""
    async with trio_asyncio.open_loop():
        try:
            applied = await migrate(url)
        except Exception as exc:
            if not is_connection_failure(exc):
                raise
            # Each worker says so (host, port, error) and migrates once it answers.
            log.debug("database unreachable at start", extra={"error": str(exc)})
            return False
    if applied:
        log.info("migrations applied", extra={"versions": applied})
    return True


@attrs.define
class WorkerSlot:
    """Worker number `index` (1-based), restarted whenever it dies."""

    index: int
    process: trio.Process | None = None
    started_at: float = 0.0
    ready: trio.Event = attrs.Factory(trio.Event)
    restarts: int = 0


class WorkerPool:
    def __init__(self, settings: Settings, database_url: str | None, *, migrated: bool,
                 shared: socket.socket, own: list[socket.socket]) -> None:
        self._settings = settings
        self._url = database_url
        self._migrated = migrated
        self._shared = shared
        self._own = own
        self.slots = [WorkerSlot(k + 1) for k in range(settings.workers)]
        self._stopping = False
        self._failed: WorkerFailed | None = None
        self._done = trio.Event()

    def kill_all(self) -> None:
        """A second signal: no draining."""
        for slot in self.slots:
            if slot.process is not None and slot.process.returncode is None:
                slot.process.kill()

    async def run(self, stop: trio.Event, *,
                  task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as watching:
            watching.start_soon(self._stop_on, stop)
            await self._run_slots(task_status)
            watching.cancel_scope.cancel()
        if self._failed is not None:
            raise self._failed

    async def _run_slots(self, task_status: trio.TaskStatus[str]) -> None:
        async with trio.open_nursery() as nursery:
            for slot in self.slots:
                nursery.start_soon(self._keep_running, slot)
            async with trio.open_nursery() as startup:
                startup.start_soon(self._cancel_on_done, startup.cancel_scope)
                for slot in self.slots:
                    await slot.ready.wait()
                startup.cancel_scope.cancel()
            if not self._done.is_set():
                host, port = self._shared.getsockname()[:2]
                bind = f"http://{host}:{port}"
                log.info("workers ready", extra={
                    "bind": bind, "workers": len(self.slots),
                    "pids": [s.process.pid for s in self.slots if s.process is not None]})
                task_status.started(bind)
            await self._done.wait()
            self._stopping = True
            for slot in self.slots:
                self._terminate(slot)
            # A worker's own drain: the graceful deadline, the lane's flush, the pool's close.
            nursery.cancel_scope.deadline = (trio.current_time()
                                             + self._settings.graceful_timeout_seconds + 30)

    @staticmethod
    def _terminate(slot: WorkerSlot) -> None:
        if slot.process is not None and slot.process.returncode is None:
            slot.process.send_signal(signal.SIGTERM)

    async def _stop_on(self, stop: trio.Event) -> None:
        await stop.wait()
        self._done.set()

    async def _cancel_on_done(self, scope: trio.CancelScope) -> None:
        await self._done.wait()
        scope.cancel()

    async def _keep_running(self, slot: WorkerSlot) -> None:
        pause = RESTART_FIRST_SECONDS
        boot_failures = 0
        ever_ready = False
        while not self._stopping:
            returncode, was_ready = await self._run_once(slot)
            if self._stopping:
                return
            ever_ready = ever_ready or was_ready
            up_for = time.monotonic() - slot.started_at
            why = describe_exit(returncode)
            if not was_ready:
                boot_failures += 1
                if not ever_ready or boot_failures >= BOOT_FAILURES_ALLOWED:
                    log.error("worker failed at boot; stopping", extra={
                        "worker": slot.index, "status": why, "boot_failures": boot_failures})
                    self._failed = WorkerFailed(slot.index, returncode if returncode > 0 else 1)
                    self._done.set()
                    return
            else:
                boot_failures = 0
                if up_for >= STABLE_SECONDS:
                    pause = RESTART_FIRST_SECONDS
            log.warning("worker died; restarting", extra={
                "worker": slot.index, "pid": slot.process.pid if slot.process else None,
                "status": why, "up_seconds": round(up_for, 1), "restart_in": pause})
            with trio.move_on_after(pause):
                await self._done.wait()
            pause = min(pause * 2, RESTART_MAX_SECONDS)
            slot.restarts += 1

    async def _run_once(self, slot: WorkerSlot) -> tuple[int, bool]:
        """Start the worker and wait for it to exit: (its return code, whether it served)."""
        ours, theirs = socket.socketpair()
        fds = (self._shared.fileno(), *([self._own[slot.index - 1].fileno()]
                                        if self._own else []))
        settings = attrs.evolve(self._settings, worker_index=slot.index)
        handoff = Handoff(settings, self._url, self._migrated, fds)
        try:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "queen_trio.web.worker"], stdin=theirs.fileno(),
                pass_fds=fds, start_new_session=True)
        finally:
            theirs.close()
        slot.process, slot.started_at = process, time.monotonic()
        if self._stopping:  # the stop came while it was starting
            self._terminate(slot)
        lifeline = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        served = False
        try:
            async with trio.open_nursery() as nursery:

                async def handshake() -> None:
                    nonlocal served
                    try:
                        await lifeline.send_all(handoff.encode())
                        answer = await lifeline.receive_some(1)
                    except (OSError, trio.BrokenResourceError):
                        return  # it died first: wait_exit tells how
                    if answer == READY:
                        served = True
                        slot.ready.set()
                        if slot.restarts:
                            log.info("worker restarted", extra={"worker": slot.index,
                                                                "pid": process.pid})

                async def wait_exit() -> None:
                    await process.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(handshake)
                nursery.start_soon(wait_exit)
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:  # cancelled by the drain deadline
                    process.kill()
                    await process.wait()
            await lifeline.aclose()
        assert process.returncode is not None
        return process.returncode, served

