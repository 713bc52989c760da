"""`queen-trio spool retry`: replay the spool's failed/ records now. It works on the data
directory itself when no broker holds it, so it is, with `serve`, a door into the server's
code (opened inside the command only)."""

from __future__ import annotations

import sys

import click

from ..exits import Exit
from ..logs import configure_logging
from ..settings import ConfigError, Settings
from .connection import Connection, connection_options
from .help import examples
from .serve import setting_flags


@click.group(epilog=examples("queen-trio spool retry"))
def spool() -> None:
    """The spool of pushes taken while the database was away."""


@spool.command("retry", epilog=examples(
    "queen-trio spool retry",
    "queen-trio spool retry --url http://localhost:6632 --token \"$ADMIN_TOKEN\""))
@setting_flags("data_dir", "database_url")
@connection_options(url_alias=True)
def retry(connection: Connection, data_dir: str | None, database_url: str | None) -> int:
    """Put every record of failed/ back in line and replay it. With a broker running on the
    directory, ask it (admin route); otherwise replay the directory here. Exits 1 when
    records are left pending or failed."""
    try:
        settings = Settings.from_env(data_dir=data_dir, database_url=database_url)
    except ConfigError as exc:
        print(f"queen-trio: configuration error: {exc}", file=sys.stderr)
        return Exit.USAGE
    configure_logging(settings.log_level, settings.log_format)
    from ..push import spool_cli

    return spool_cli.run(settings, connection.server, connection.token)
