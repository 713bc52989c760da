"""`queen-trio serve`: run the broker. The one command that imports the server, and only
when it runs; nothing here loads the client's libraries (httpx, rich, PyYAML)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..exits import Exit, report_boot_failure
from ..logs import configure_logging
from ..settings import ConfigError, Settings, declarations, parse_bool, plain, shown_default
from .help import examples

Command = TypeVar("Command", bound=Callable[..., Any])


def setting_flags(*names: str) -> Callable[[Command], Command]:
    """The flags of these settings, as their declarations in queen_trio/settings.py give them.
    Each defaults to None, so that an unset flag leaves its variable (or default) in force;
    `Settings.from_env` parses a flag's text as it would its variable's."""
    declared = {field.name: (field, setting) for field, setting in declarations(Settings)}

    def add(command: Command) -> Command:
        for name in reversed(names):  # the first name stands first in --help
            field, setting = declared[name]
            if setting.flag is None:
                raise TypeError(f"the setting {name} has no flag")
            default = plain(shown_default(field, setting))
            factory = getattr(field.default, "factory", None)  # a default of this machine
            if factory is not None:
                default += f"; here {factory()}"
            where = f" ({setting.env}; default {default})" if setting.env else ""
            shape: dict[str, Any] = ({"flag_value": True} if setting.parser(field) is parse_bool
                                     else {"metavar": setting.metavar})
            command = click.option(setting.flag, name, default=None, **shape,
                                   help=plain(setting.doc) + where)(command)
        return command
    return add


@click.command(epilog=examples(
    "queen-trio serve  # embedded PostgreSQL, port 6632",
    "queen-trio serve --host 127.0.0.1 --port 7000 --access-log",
    "DATABASE_URL=postgresql://user:pw@db/queen queen-trio serve"),
    short_help="Run the broker (HTTP, port 6632 by default).")
@setting_flags(*(field.name for field, setting in declarations(Settings) if setting.flag))
def serve(**flags: Any) -> int:
    """Run the broker until SIGTERM or Ctrl-C. A flag wins over its variable; every setting
    and its variable: docs/operations.md."""
    try:
        settings = Settings.from_env(**flags)
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
