"""`queen-trio serve`: the listening socket, the data directory, the database, the broker, and
hypercorn on top.

Start-up is a sequence of separate steps, each refusing the start (ConfigError) before the
next one touches anything:

1. bind the listening socket (`listen.bind_listener`): a bad HOST or a taken port;
2. read the JWKS, when one is configured;
3. take `<data-dir>/broker.lock` (`storage.datadir`): a second broker on the directory;
4. start (or adopt) the embedded cluster, when there is no database URL;
5. open the broker and hand the socket to hypercorn as `fd://N`.

With --workers N (N > 1) a supervisor (web/supervisor.py) takes steps 1 to 4 once and runs
step 5 in each worker process (web/worker.py).

Shutdown: the first SIGTERM or SIGINT answers parked long polls 204 at once, stops accepting,
lets in-flight requests finish (within the graceful deadline), flushes the lane, closes the
pool and stops the embedded cluster. A second signal exits at once (143 or 130) with one line
that says whether the cluster was left running for the next start to adopt.
"""

from __future__ import annotations

import gc
import importlib
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, nullcontext

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.typing import ASGIFramework

from ..broker import Broker, open_broker
from ..errors import ConfigError
from ..settings import Settings
from ..storage.database import require_reachable
from ..storage.datadir import claim_data_dir
from ..storage.embedded import EmbeddedPostgres
from .auth import Authenticator
from .connections import ConnectionGate, PeerChannelServer
from .connections import serve as serve_connections
from .listen import BACKLOG, bind_listener, bind_peer, bind_worker_ports
from .peer import PeerChannel, PeerGuard
from .routes import create_app

log = logging.getLogger("queen_trio.server")


def hypercorn_config(settings: Settings,
                     listeners: Sequence[socket.socket] | None = None) -> HypercornConfig:
    """hypercorn's configuration; with `listeners`, hypercorn takes over those bound sockets."""
    config = HypercornConfig()
    # fd:// hands hypercorn the socket itself: it closes the descriptor when it stops.
    config.bind = ([f"fd://{sock.detach()}" for sock in listeners] if listeners
                   else [f"{settings.host}:{settings.port}"])
    config.graceful_timeout = settings.graceful_timeout_seconds
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = 75
    config.keep_alive_max_requests = 1_000_000
    config.backlog = BACKLOG
    return config


def load_app(spec: str) -> ASGIFramework:
    """`module:attr` (--app): another ASGI app served in the broker's place."""
    module, _, attr = spec.partition(":")
    try:
        app: ASGIFramework = getattr(importlib.import_module(module), attr)
        return app
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--app {spec!r} cannot be loaded: {exc}") from None


@attrs.define
class Lifecycle:
    """What a second signal needs to know to say what it leaves behind, and to take down
    (a supervisor's workers) before it exits."""

    cluster: EmbeddedPostgres | None = None
    abandon: Callable[[], None] | None = None
    # How the exit line names this process.
    name: str = "queen-trio"

    def left_behind(self) -> str:
        if self.cluster is None:
            return "no embedded PostgreSQL was running"
        running = self.cluster.postmaster()
        if running is None:
            return "the embedded PostgreSQL is not running"
        return (f"the embedded PostgreSQL (pid {running.pid}) was left running for the next "
                "start to adopt")


Body = Callable[[trio.Event, Lifecycle, trio.TaskStatus[str]], Awaitable[None]]


async def serve(settings: Settings, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
                stop: trio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or `stop`); see the module's docstring for the steps."""

    async def body(stop: trio.Event, lifecycle: Lifecycle,
                   task_status: trio.TaskStatus[str]) -> None:
        await _serve(settings, stop, lifecycle, task_status)

    await run_until_signalled(body, Lifecycle(), task_status=task_status, stop=stop)


async def run_until_signalled(body: Body, lifecycle: Lifecycle, *,
                              task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
                              stop: trio.Event | None = None) -> None:
    """`body` until it returns; the first SIGTERM/SIGINT sets its `stop`, a second exits."""
    stop = stop or trio.Event()
    # Opened first and kept to the very end: a second signal is honoured at every step,
    # the cluster's stop included.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as watcher:
            watcher.start_soon(_watch_signals, signals, stop, lifecycle)
            await body(stop, lifecycle, task_status)
            watcher.cancel_scope.cancel()
    log.info("queen-trio stopped")


async def _serve(settings: Settings, stop: trio.Event, lifecycle: Lifecycle,
                 task_status: trio.TaskStatus[str]) -> None:
    listeners = [bind_listener(settings), *bind_worker_ports(settings)]
    warn_if_open(settings)
    try:
        if settings.app is not None:  # the ceiling: no database, no broker
            await serve_app(settings, None, None, listeners, stop, task_status=task_status)
            return
        auth = Authenticator(settings.auth)
        await auth.start()  # a JWKS that cannot be read refuses to start
        with (claim_data_dir(settings.data_dir, settings.data_dir_fix) if settings.uses_data_dir
              else nullcontext()):
            async with running_database(settings, lifecycle) as url:
                if stop.is_set():
                    return
                await serve_app(settings, url, auth, listeners, stop, task_status=task_status)
    finally:
        for sock in listeners:
            if sock.fileno() != -1:  # not handed to hypercorn
                sock.close()


async def serve_app(settings: Settings, database_url: str | None, auth: Authenticator | None,
                    listeners: Sequence[socket.socket], stop: trio.Event, *,
                    migrate: bool = True, task_status: trio.TaskStatus[str]) -> None:
    """Step 5: the broker (or --app) served on `listeners` until `stop`."""
    config = hypercorn_config(settings, listeners)
    gate = connection_gate(settings)
    if settings.app is not None:
        await serve_http(load_app(settings.app), config, gate, stop, None,
                         task_status=task_status)
        return
    assert database_url is not None and auth is not None
    # The peer listener: hypercorn serves it like the others; the other broker processes
    # relay ephemeral requests to this process through it (docs/ephemeral.md#owner).
    peer, peer_address = bind_peer(settings)
    config.bind.append(f"fd://{peer.detach()}")
    async with open_broker(settings, database_url, migrate=migrate,
                           peer_address=peer_address) as broker:
        app = create_app(broker, auth)
        gate.attach(app)
        # What boot made (modules, the app, the broker) lives as long as the process: out of
        # the collector's reach, a full collection walks only what came after, not every
        # module again (tens of milliseconds a time on a small machine; docs/performance.md).
        gc.collect()
        gc.freeze()
        peer_port = int(peer_address.rsplit(":", 1)[1])
        await serve_http(PeerGuard(app, peer_port), config, gate, stop, broker,
                         peer=(peer_port, PeerChannel(app)), task_status=task_status)


@asynccontextmanager
async def running_database(settings: Settings, lifecycle: Lifecycle) -> AsyncIterator[str]:
    """The database URL: the configured one, or the embedded cluster's, started (or adopted)
    here and stopped on the way out. The caller holds the data directory's lock."""
    if settings.database_url is not None:
        if settings.require_database:
            await require_reachable(settings.database_url,
                                    connect_seconds=settings.db_connection_timeout_ms / 1000,
                                    source=settings.source("require_database"))
        yield settings.database_url
        return
    embedded = lifecycle.cluster = EmbeddedPostgres(
        settings.data_dir, max_connections=settings.embedded_max_connections)
    try:
        url = await trio.to_thread.run_sync(embedded.start)
        # The URL's password stays out of the logs: it is in the password file.
        log.info("embedded PostgreSQL running", extra={
            "url": embedded.redacted_url(), "password_file": str(embedded.password_file),
            "data_dir": str(settings.data_dir)})
        yield url
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(embedded.stop)


def warn_if_open(settings: Settings) -> None:
    if not settings.auth.enabled and not _is_loopback(settings.host):
        log.warning("listening beyond this machine with authentication off: anyone who can "
                    "reach the port can read, write and delete every queue (set JWT_ENABLED, "
                    "or HOST=127.0.0.1)", extra={"host": settings.host, "port": settings.port})


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def connection_gate(settings: Settings) -> ConnectionGate:
    return ConnectionGate(max_connections=settings.max_connections,
                          read_timeout=settings.request_read_timeout_ms / 1000)


async def serve_http(app: ASGIFramework, config: HypercornConfig, gate: ConnectionGate,
                     stop: trio.Event, broker: Broker | None, *,
                     peer: tuple[int, PeerChannelServer] | None = None,
                     task_status: trio.TaskStatus[str]) -> None:
    """hypercorn until `stop`. hypercorn returns only once in-flight requests are done (or
    the graceful deadline passed); only then does open_broker flush the lane and close."""

    async def answer_waiters_at_stop() -> None:
        await stop.wait()
        if broker is None:
            return
        broker.consumer.stop_waiting()
        # The ephemeral pops parked at this process (its own and those relayed to it)
        # answer now with what they have, as the durable ones do.
        broker.ephemeral.stop_waiting()
        # A request hypercorn cancelled at the graceful deadline may still sit in a shielded
        # database call: a frozen server must not hold the exit, so cut its connections.
        await trio.sleep(config.graceful_timeout)
        still_open = gate.statistics().open
        # On a loaded machine hypercorn may simply be slow to return with no connection left:
        # nothing to warn about then (an idle broker whose database is down logged a warning
        # here at every stop).
        if still_open:
            log.warning("requests still running at the graceful deadline; cutting the database "
                        "connections", extra={"seconds": config.graceful_timeout,
                                              "connections": still_open})
        else:
            log.debug("the server still closing at the graceful deadline, with no connection "
                      "open; cutting the database connections")
        await broker.db.abort()

    async def run_hypercorn(*, task_status: trio.TaskStatus[list[str]]) -> None:
        await serve_connections(app, config, gate, shutdown_trigger=stop.wait, peer=peer,
                                task_status=task_status)
        nursery.cancel_scope.cancel()  # done in time: no connection needs cutting

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_waiters_at_stop)
        bound: list[str] = await nursery.start(run_hypercorn)
        log.info("queen-trio listening", extra={"bind": bound})
        task_status.started(bound[0] if bound else "")


async def _watch_signals(signals: AsyncIterator[int], stop: trio.Event,
                         lifecycle: Lifecycle) -> None:
    async for signum in signals:
        name = signal.Signals(signum).name
        if not stop.is_set():
            log.info("shutting down", extra={"signal": name})
            stop.set()
            continue
        # The second one: out at once, and say what is left behind.
        if lifecycle.abandon is not None:
            lifecycle.abandon()
        print(f"{lifecycle.name}: second {name}: exiting now; {lifecycle.left_behind()}",
              file=sys.stderr, flush=True)
        os._exit(128 + signum)
