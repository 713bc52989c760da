"""`queen-trio serve`: run the broker. The one command that imports the server, and only
when it runs; nothing here loads the client's libraries (httpx, rich, PyYAML)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..exits import Exit, report_boot_failure
from ..logs import configure_logging
from ..settings import LOG_LEVELS, ConfigError, Settings, default_data_dir, default_workers
from .help import examples

DEFAULTS = Settings()


@click.command(epilog=examples(
    "queen-trio serve  # embedded PostgreSQL, port 6632",
    "queen-trio serve --host 127.0.0.1 --port 7000 --access-log",
    "DATABASE_URL=postgresql://user:pw@db/queen queen-trio serve"),
    short_help="Run the broker (HTTP, port 6632 by default).")
@click.option("--host", help=f"listen address (HOST; default {DEFAULTS.host})")
@click.option("--port", type=int, help=f"listen port (PORT; default {DEFAULTS.port})")
@click.option("--data-dir", type=click.Path(path_type=Path),
              help="embedded PostgreSQL and spool directory (QUEEN_DATA_DIR; default "
                   f"{default_data_dir()})")
@click.option("--database-url", help="external PostgreSQL, postgresql://... (DATABASE_URL or "
                                     "PG_*; default: none, the embedded PostgreSQL)")
@click.option("--log-level", metavar="LEVEL",
              help=f"{', '.join(LOG_LEVELS)} (LOG_LEVEL; default {DEFAULTS.log_level})")
@click.option("--access-log", flag_value=True, default=None,
              help="log one line per request on queen_trio.access (LOG_REQUESTS; default off)")
@click.option("--workers", type=int, metavar="N",
              help="broker processes sharing the port (QUEEN_WORKERS; default 1 on 2 usable "
                   f"CPUs or fewer, else one per CPU up to 8; here {default_workers()})")
@click.option("--worker-ports", type=int, metavar="BASE",
              help="tests and benchmarks: worker K also listens on BASE + K - 1")
@click.option("--app", metavar="MODULE:ATTR",
              help="tests and benchmarks: serve this ASGI app instead of the broker")
def serve(host: str | None, port: int | None, data_dir: Path | None,
          database_url: str | None, log_level: str | None, access_log: bool | None,
          workers: int | None, worker_ports: int | None, app: str | None) -> int:
    """Run the broker until SIGTERM or Ctrl-C. A flag wins over its variable; every setting
    and its variable: docs/operations.md."""
    # Flags default to None, so that an unset flag leaves its variable (or default) in force.
    try:
        settings = Settings.from_env(host=host, port=port, data_dir=data_dir,
                                     database_url=database_url, log_level=log_level,
                                     log_requests=access_log, workers=workers,
                                     worker_ports=worker_ports, app=app)
    except ConfigError as exc:
        print(f"queen-trio: configuration error: {exc}", file=sys.stderr)
        return Exit.USAGE
    configure_logging(settings.log_level, settings.log_format,
                      access_log=settings.log_requests)
    import trio

    if settings.workers > 1:
        from ..web.supervisor import serve_workers as serve_forever
    else:
        from ..web.server import serve as serve_forever
    try:
        trio.run(serve_forever, settings)
    except KeyboardInterrupt:  # Ctrl-C before the broker's own handler was in place
        print("queen-trio: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except Exception as exc:  # a boot failure: name the cause, no traceback wall
        return report_boot_failure(exc)
    return Exit.OK
