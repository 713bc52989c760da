"""The `queen-trio` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import trio

from . import __version__
from .logs import configure_logging
from .settings import ConfigError, Settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queen-trio", description=__doc__)
    parser.add_argument("--version", action="version", version=f"queen-trio {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the broker")
    serve.add_argument("--host", help="listen address (HOST, default 0.0.0.0)")
    serve.add_argument("--port", type=int, help="listen port (PORT, default 6632)")
    serve.add_argument("--data-dir", type=Path,
                       help="embedded PostgreSQL and spool directory (QUEEN_DATA_DIR)")
    serve.add_argument("--database-url", help="external PostgreSQL (DATABASE_URL or PG_*)")
    serve.add_argument("--log-level", help="LOG_LEVEL (default warning)")
    trace = commands.add_parser("trace", help="print a trace's timeline")
    trace.add_argument("name", help="the trace name (traceNames of POST /api/v1/traces)")
    trace.add_argument("--url", default="http://localhost:6632", help="the broker's base URL")
    trace.add_argument("--token", help="a bearer token, when the broker checks them")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "trace":
        from .ops.trace_cli import run

        return run(args.url, args.name, args.token)
    try:
        settings = Settings.from_env(
            host=args.host, port=args.port, data_dir=args.data_dir,
            database_url=args.database_url, log_level=args.log_level,
        )
    except ConfigError as exc:
        print(f"queen-trio: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    from .web.server import serve

    try:
        trio.run(serve, settings)
    except Exception as exc:  # a boot failure: name the cause, no traceback wall
        causes = list(_leaves(exc))
        for cause in causes:
            kind = ("configuration error" if isinstance(cause, ConfigError)
                    else type(cause).__name__)
            print(f"queen-trio: {kind}: {cause}", file=sys.stderr)
        return 2 if all(isinstance(c, ConfigError) for c in causes) else 1
    return 0


def _leaves(exc: BaseException):  # type: ignore[no-untyped-def]
    """The exceptions inside (nested) exception groups: the causes worth naming."""
    inner = getattr(exc, "exceptions", None)
    if not inner:
        yield exc
        return
    for sub in inner:
        yield from _leaves(sub)


if __name__ == "__main__":
    raise SystemExit(main())
