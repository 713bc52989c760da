"""The `queen-trio` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

from . import __version__
from .exits import Exit, report_boot_failure
from .logs import configure_logging
from .settings import LOG_LEVELS, ConfigError, Settings, default_data_dir, default_workers

DESCRIPTION = """\
queen-trio: a partitioned message-queue broker, wire-compatible with Queen MQ, storing its
messages in PostgreSQL (an embedded cluster unless DATABASE_URL is set). Producers push JSON
messages over HTTP; consumers pop, ack and long-poll them.
"""

EXAMPLES = """\
examples:
  queen-trio serve                                  embedded PostgreSQL, port 6632
  queen-trio serve --port 7000 --data-dir ./data    another port and data directory
  DATABASE_URL=postgresql://user:pw@db/queen queen-trio serve
  LOG_REQUESTS=true queen-trio serve                one access-log line per request
  queen-trio trace order-8891                       the timeline of trace order-8891

exit statuses: 0 ok, 1 refused or partial, 2 usage or configuration, 3 authentication,
4 empty result, 5 not found, 6 unreachable or 5xx, 130 interrupted.
Every setting and its variable: docs/operations.md.
"""


_RAW = argparse.RawDescriptionHelpFormatter


def build_parser() -> argparse.ArgumentParser:
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="queen-trio", description=DESCRIPTION,
                                     epilog=EXAMPLES, formatter_class=_RAW)
    parser.add_argument("--version", action="version", version=f"queen-trio {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", required=True,
                                     metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="run the broker (HTTP, port 6632 by default)", formatter_class=_RAW,
        description="Run the broker until SIGTERM or Ctrl-C. A flag wins over its variable.",
        epilog="examples:\n  queen-trio serve\n  queen-trio serve --host 127.0.0.1 "
               "--port 7000 --access-log\n")
    # Flags default to None, so that an unset flag leaves its variable (or default) in force.
    serve.add_argument("--host", help=f"listen address (HOST; default {defaults.host})")
    serve.add_argument("--port", type=int, help=f"listen port (PORT; default {defaults.port})")
    serve.add_argument("--data-dir", type=Path,
                       help="embedded PostgreSQL and spool directory (QUEEN_DATA_DIR; default "
                            f"{default_data_dir()})")
    serve.add_argument("--database-url",
                       help="external PostgreSQL, postgresql://... (DATABASE_URL or PG_*; "
                            "default: none, the embedded PostgreSQL)")
    serve.add_argument("--log-level", metavar="LEVEL",
                       help=f"{', '.join(LOG_LEVELS)} (LOG_LEVEL; default "
                            f"{defaults.log_level})")
    serve.add_argument("--access-log", action="store_const", const=True, default=None,
                       help="log one line per request on queen_trio.access (LOG_REQUESTS; "
                            "default off)")
    serve.add_argument("--workers", type=int, metavar="N",
                       help="broker processes sharing the port (QUEEN_WORKERS; default 1 on 2 "
                            "usable CPUs or fewer, else one per CPU up to 8; here "
                            f"{default_workers()})")
    serve.add_argument("--worker-ports", type=int, metavar="BASE",
                       help="tests and benchmarks: worker K also listens on BASE + K - 1")
    serve.add_argument("--app", metavar="MODULE:ATTR",
                       help="tests and benchmarks: serve this ASGI app instead of the broker")
    trace = commands.add_parser(
        "trace", help="print a trace's timeline from a running broker", formatter_class=_RAW,
        description="Print every event recorded under a trace name, oldest first.\n"
                    "Exits 4 when the trace has no events.",
        epilog="example:\n  queen-trio trace order-8891 --url http://localhost:6632\n")
    trace.add_argument("name", help="the trace name (traceNames of POST /api/v1/traces)")
    trace.add_argument("--url", default="http://localhost:6632",
                       help="the broker's base URL (default http://localhost:6632)")
    trace.add_argument("--token", help="a bearer token, when the broker checks them "
                                       "(default: none)")
    spool = commands.add_parser(
        "spool", help="the spool of pushes taken while the database was away",
        formatter_class=_RAW, description="Work on the spool directory (FILE_BUFFER_DIR, "
        "default <data-dir>/spool).")
    spool_commands = spool.add_subparsers(dest="spool_command", required=True,
                                          metavar="ACTION")
    retry = spool_commands.add_parser(
        "retry", help="replay the records in failed/ now", formatter_class=_RAW,
        description="Put every record of failed/ back in line and replay it. With a broker "
                    "running on the directory, ask it (admin route); otherwise replay the "
                    "directory here.\nExits 1 when records are left pending or failed.",
        epilog="examples:\n  queen-trio spool retry\n  queen-trio spool retry --url "
               "http://localhost:6632 --token $ADMIN_TOKEN\n")
    retry.add_argument("--data-dir", type=Path,
                       help=f"the data directory (QUEEN_DATA_DIR; default {default_data_dir()})")
    retry.add_argument("--database-url", help="external PostgreSQL (DATABASE_URL or PG_*; "
                                              "default: the embedded PostgreSQL)")
    retry.add_argument("--url", default="http://localhost:6632",
                       help="a running broker's base URL (default http://localhost:6632)")
    retry.add_argument("--token", help="an admin bearer token, when the broker checks them")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before the broker's own handler was in place
        print("queen-trio: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "trace":
        from .ops.trace_cli import run

        return run(args.url, args.name, args.token)
    if args.command == "spool":
        return _spool(args)
    try:
        settings = Settings.from_env(
            host=args.host, port=args.port, data_dir=args.data_dir,
            database_url=args.database_url, log_level=args.log_level,
            log_requests=args.access_log, workers=args.workers,
            worker_ports=args.worker_ports, app=args.app,
        )
    except ConfigError as exc:
        print(f"queen-trio: configuration error: {exc}", file=sys.stderr)
        return Exit.USAGE
    configure_logging(settings.log_level, settings.log_format,
                      access_log=settings.log_requests)
    if settings.workers > 1:
        from .web.supervisor import serve_workers as serve
    else:
        from .web.server import serve
    try:
        trio.run(serve, settings)
    except Exception as exc:  # a boot failure: name the cause, no traceback wall
        return report_boot_failure(exc)
    return Exit.OK


def _spool(args: argparse.Namespace) -> int:
    from .push import spool_cli

    try:
        settings = Settings.from_env(data_dir=args.data_dir, database_url=args.database_url)
    except ConfigError as exc:
        print(f"queen-trio: configuration error: {exc}", file=sys.stderr)
        return Exit.USAGE
    configure_logging(settings.log_level, settings.log_format)
    return spool_cli.run(settings, args.url, args.token)


if __name__ == "__main__":
    raise SystemExit(main())
