"""`queen-trio context set|use|list|current|delete`: named brokers in the config file."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..exits import Exit
from .config import Config, config_path
from .connection import check_server
from .failures import CliError
from .help import examples
from .output import Output, col, confirm, output_options


def _config() -> Config:
    return Config.load(config_path(os.environ))


@click.group(epilog=examples(
    "queen-trio context set prod --server https://queen.example.com --token-file ~/.queen",
    "queen-trio context use prod", "queen-trio context list"))
def context() -> None:
    """Named brokers: a server and maybe a token each, and the current one.

    Kept in ~/.config/queen-trio/config.yaml ($XDG_CONFIG_HOME, or QUEEN_CONFIG), written
    0600. A context's token is sent only to that context's server."""


@context.command("set", epilog=examples(
    "queen-trio context set local --server http://localhost:6632",
    "queen-trio context set prod --server https://queen.example.com --token \"$TOKEN\" --use"))
@click.argument("name")
@click.option("--server", required=True, metavar="URL", help="the broker's base URL")
@click.option("--token", metavar="T", help="a bearer token, stored in the file")
@click.option("--token-file", type=click.Path(path_type=Path), metavar="F",
              help="a file holding the token, read at each use (the file is not copied)")
@click.option("--use", is_flag=True, help="make it the current context")
def set_context(name: str, server: str, token: str | None, token_file: Path | None,
                use: bool) -> None:
    """Create or replace context NAME. The first context becomes the current one."""
    if token and token_file:
        raise click.UsageError("give --token or --token-file, not both")
    config = _config()
    entry = {"server": check_server(server)}
    if token:
        entry["token"] = token
    if token_file:
        entry["token-file"] = str(token_file.expanduser().resolve())
    existed = name in config.contexts
    config.contexts[name] = entry
    if use or config.current is None:
        config.current = name
    config.save()
    click.echo(f"context {name} {'updated' if existed else 'created'}"
               f"{' (current)' if config.current == name else ''}")


@context.command("use", epilog=examples("queen-trio context use prod"))
@click.argument("name")
def use_context(name: str) -> None:
    """Make NAME the current context."""
    config = _config()
    config.context(name)
    config.current = name
    config.save()
    click.echo(f"current context: {name}")


@context.command("list", epilog=examples("queen-trio context list",
                                          "queen-trio context list -o name"))
@output_options
def list_contexts(out: Output) -> None:
    """Every context; the current one is marked."""
    config = _config()
    rows = [{"name": name, "current": name == config.current, "server": c["server"],
             "token": "file" if "token-file" in c else ("yes" if "token" in c else "no")}
            for name, c in config.contexts.items()]
    out.rows(rows, [col("CURRENT", lambda r: "*" if r["current"] else ""), col("NAME", "name"),
                    col("SERVER", "server"), col("TOKEN", "token")])


@context.command("current", epilog=examples("queen-trio context current"))
def current_context() -> int:
    """Print the current context's name; exits 4 when there is none."""
    config = _config()
    if config.current is None or config.current not in config.contexts:
        raise CliError("no current context (queen-trio context use NAME)", Exit.EMPTY)
    click.echo(config.current)
    return Exit.OK


@context.command("delete", epilog=examples("queen-trio context delete old --yes"))
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="do not ask on a terminal")
def delete_context(name: str, yes: bool) -> None:
    """Remove context NAME (and, if it was current, the current context)."""
    config = _config()
    config.context(name)
    confirm(f"Delete context {name}?", yes)
    del config.contexts[name]
    if config.current == name:
        config.current = None
    config.save()
    click.echo(f"context {name} deleted")
