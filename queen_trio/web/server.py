"""`queen-trio serve`: the embedded database (if no URL), the broker, hypercorn on top."""

from __future__ import annotations

import logging
import signal

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from ..broker import open_broker
from ..settings import Settings
from ..storage.embedded import EmbeddedPostgres
from .auth import Authenticator
from .routes import create_app

log = logging.getLogger("queen_trio.server")


def hypercorn_config(settings: Settings) -> HypercornConfig:
    config = HypercornConfig()
    config.bind = [f"{settings.host}:{settings.port}"]
    config.graceful_timeout = settings.graceful_timeout_seconds
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = 75
    config.keep_alive_max_requests = 1_000_000
    config.backlog = 1024
    return config


async def serve(settings: Settings, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
                stop: trio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or `stop`): then stop accepting, finish in-flight requests
    within the graceful deadline, flush the lane, close the pool, stop the embedded database."""
    stop = stop or trio.Event()
    # Before anything else: a JWKS that cannot be read refuses to start (ConfigError).
    auth = Authenticator(settings.auth)
    await auth.start()
    embedded: EmbeddedPostgres | None = None
    url = settings.database_url
    if url is None:
        embedded = EmbeddedPostgres(settings.data_dir)
        url = await trio.to_thread.run_sync(embedded.start)
        # The URL's password stays out of the logs: it is in the password file.
        log.warning("embedded PostgreSQL running", extra={
            "url": embedded.redacted_url(), "password_file": str(embedded.password_file),
            "data_dir": str(settings.data_dir)})
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_signals, stop)
            async with open_broker(settings, url) as broker:
                app = create_app(broker, auth)
                # hypercorn returns only once in-flight requests are done (or the graceful
                # deadline passed); only then does open_broker flush the lane and close.
                async with trio.open_nursery() as http:
                    bound = await http.start(_serve_http, app, settings, stop)
                    log.warning("queen-trio listening", extra={"bind": bound})
                    task_status.started(bound[0] if bound else "")
            nursery.cancel_scope.cancel()
    finally:
        if embedded is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(embedded.stop)


async def _serve_http(app, settings: Settings, stop: trio.Event, *,  # type: ignore[no-untyped-def]
                      task_status=trio.TASK_STATUS_IGNORED) -> None:
    await hypercorn_serve(app, hypercorn_config(settings), shutdown_trigger=stop.wait,
                          task_status=task_status)


async def _stop_on_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.warning("shutting down", extra={"signal": signal.Signals(signum).name})
            stop.set()
            return
