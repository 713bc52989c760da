"""Which broker a command talks to, with which token: flags, then the environment, then the
current context (docs/cli.md, "Connecting")."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import click

from ..exits import Exit
from .config import Config, config_path
from .failures import CliError
from .output import output_options

DEFAULT_SERVER = "http://localhost:6632"
DEFAULT_TIMEOUT = 30.0


@attrs.frozen
class Connection:
    server: str
    token: str | None
    timeout: float
    context: str | None  # the context in force, if any


@attrs.frozen
class Flags:
    server: str | None = None
    token: str | None = None
    token_file: Path | None = None
    context: str | None = None
    timeout: float | None = None


def resolve(flags: Flags, env: Mapping[str, str] | None = None) -> Connection:
    """Each setting from the first source that has it: flag, variable, current context. A
    context's token goes only to that context's server."""
    env = os.environ if env is None else env
    if flags.token and flags.token_file:
        raise CliError("give --token or --token-file, not both", Exit.USAGE)
    config = Config.load(config_path(env))
    explicit = flags.context or env.get("QUEEN_CONTEXT")
    name = explicit or config.current
    if explicit:
        context = config.context(explicit)
    else:  # a current-context removed from the file by hand is no context
        context = config.contexts.get(name or "", {})
    server = check_server(flags.server or env.get("QUEEN_SERVER") or context.get("server")
                          or DEFAULT_SERVER)
    if flags.token_file:
        token: str | None = read_token(flags.token_file)
    else:
        token = flags.token or env.get("QUEEN_TOKEN") or None
    if token is None and context and same_server(context["server"], server):
        if context.get("token-file"):
            token = read_token(Path(context["token-file"]))
        else:
            token = context.get("token")
    return Connection(server, token or None, flags.timeout or DEFAULT_TIMEOUT,
                      name if context else None)


def check_server(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"the server must be an http:// or https:// URL, not {url!r}",
                       Exit.USAGE)
    return url.rstrip("/")


def same_server(a: str, b: str) -> bool:
    """Whether two URLs name the same origin (scheme, host, port) and base path."""
    def origin(url: str) -> tuple[str, str, int, str]:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            port = -1
        return scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/")
    return origin(a) == origin(b)


def read_token(path: Path) -> str:
    try:
        token = path.expanduser().read_text().strip()
    except OSError as exc:
        raise CliError(f"cannot read the token file {path}: {exc.strerror}", Exit.USAGE) from None
    if not token:
        raise CliError(f"the token file {path} is empty", Exit.USAGE)
    return token


FLAG_NAMES = ("server", "token", "token_file", "context", "timeout")


def connection_flags(*server_names: str) -> list[Callable[[Any], Any]]:
    """The click options of the connection flags."""
    return [
        click.option(*(server_names or ("--server",)), "server", metavar="URL",
                     help=f"the broker (QUEEN_SERVER; default {DEFAULT_SERVER})"),
        click.option("--token", metavar="T", help="a bearer token (QUEEN_TOKEN)"),
        click.option("--token-file", type=click.Path(path_type=Path), metavar="F",
                     help="read the bearer token from a file"),
        click.option("--context", metavar="NAME",
                     help="a context of the config file (QUEEN_CONTEXT; default: current)"),
        click.option("--timeout", type=click.FloatRange(min=0.1), metavar="S",
                     help=f"seconds to wait for an answer (default {DEFAULT_TIMEOUT:g})"),
    ]


def global_flags() -> Flags:
    """The connection flags given before the command (`queen-trio --server URL queue list`),
    which the root command keeps in its context's `obj`."""
    context = click.get_current_context(silent=True)
    found = context.find_root().obj if context is not None else None
    return found if isinstance(found, Flags) else Flags()


def connection_options(*, url_alias: bool = False) -> Callable[[Callable[..., Any]], Any]:
    """--server, --token, --token-file, --context and --timeout, handed to the command as one
    resolved `connection` argument (`url_alias`: `--url` also names the server). A flag
    given after the command wins over the same flag given before it."""
    server_names = ("--server", "--url") if url_alias else ("--server",)

    def decorate(command: Callable[..., Any]) -> Any:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            before = global_flags()
            flags = Flags(**{key: kwargs.pop(key) for key in FLAG_NAMES})
            flags = Flags(**{key: getattr(flags, key) if getattr(flags, key) is not None
                             else getattr(before, key) for key in FLAG_NAMES})
            return command(*args, connection=resolve(flags), **kwargs)

        for option in reversed(connection_flags(*server_names)):
            wrapper = option(wrapper)
        return wrapper

    return decorate


def request_options(*, url_alias: bool = False) -> Callable[[Callable[..., Any]], Any]:
    """The options of a command that asks the broker and prints its answer: the output options
    (`out`) and the connection options (`connection`)."""
    def decorate(command: Callable[..., Any]) -> Any:
        return output_options(connection_options(url_alias=url_alias)(command))

    return decorate
