"""Brokers for tests: settings with a private spool, and the app served on a real port."""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio

from queen_trio.broker import Broker
from queen_trio.settings import Settings
from queen_trio.web.routes import create_app


def make_settings(database_url: str, **overrides: object) -> Settings:
    # Every broker of a test gets its own spool directory (one broker per directory). An
    # in-process broker is one process: workers=1, so its pool is db_pool_size whatever the
    # machine's default worker count (one per CPU) would divide it into.
    values: dict[str, object] = {"database_url": database_url, "db_pool_size": 10,
                                 "push_shards": 2, "port": 6632, "workers": 1,
                                 "spool_dir": Path(tempfile.mkdtemp(prefix="queen-spool-"))}
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


async def serve_on_port(broker: Broker, *, keep_alive_timeout: float | None = None,  # type: ignore[no-untyped-def]
                        task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve `broker` on a free loopback port, as `serve` does (the connection gate of its
    settings included); started() gives the base URL."""
    from hypercorn.config import Config

    from queen_trio.web.connections import serve
    from queen_trio.web.server import connection_gate

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1
    if keep_alive_timeout is not None:
        config.keep_alive_timeout = keep_alive_timeout
    app = create_app(broker)
    gate = connection_gate(broker.settings)
    gate.attach(app)
    stop = trio.Event()
    await serve(app, config, gate, shutdown_trigger=stop.wait, task_status=task_status)
