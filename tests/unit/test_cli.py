"""`queen-trio --help` says what the program is; every command's help shows an example, and
serve's its defaults."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import click

from queen_trio.cli.main import root


def help_of(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "queen_trio", *args, "--help"],
                          capture_output=True, text=True, check=True)
    return done.stdout


def leaves(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from leaves(command, (*path, name))
        else:
            yield (*path, name)


def help_in_process(path: tuple[str, ...]) -> str:
    ctx = click.Context(root, info_name="queen-trio")
    command: click.Command = root
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
        ctx = click.Context(command, info_name=name, parent=ctx)
    return command.get_help(ctx)


def test_the_top_level_help_says_what_it_is_and_lists_commands_with_examples() -> None:
    text = help_of()
    assert "message-queue broker" in text and "PostgreSQL" in text
    for command in ("serve", "push", "pop", "tail", "apply", "replay", "context", "trace"):
        assert f"\n  {command} " in text
    assert "Examples:" in text and "queen-trio serve --port 7000" in text
    assert "4 empty result" in text and "QUEEN_SERVER" in text


def test_every_command_and_group_has_an_example_in_its_help() -> None:
    paths = list(leaves(root))
    assert len(paths) > 30
    missing = [" ".join(p) for p in paths
               if "queen-trio " + " ".join(p) not in help_in_process(p).partition("Examples:")[2]]
    assert missing == []
    groups = [name for name, c in root.commands.items() if isinstance(c, click.Group)]
    assert [g for g in groups if "Examples:" not in help_in_process((g,))] == []


def test_client_commands_take_the_connection_flags() -> None:
    local = {("serve",), ("completion",), *(("context", c) for c in
                                            ("set", "use", "list", "current", "delete"))}
    for path in leaves(root):
        if path in local:
            continue
        text = help_in_process(path)
        for flag in ("--server", "--token", "--token-file", "--context", "--timeout"):
            assert flag in text, (path, flag)


def test_serve_help_shows_every_default() -> None:
    text = " ".join(help_of("serve").split())
    for shown in ("HOST; default 127.0.0.1", "PORT; default 6632",
                  "QUEEN_DATA_DIR; default $XDG_DATA_HOME/queen-trio",
                  "DATABASE_URL; default unset: the embedded PostgreSQL",
                  "LOG_LEVEL; default info", "LOG_REQUESTS; default off",
                  "QUEEN_WORKERS; default one per usable CPU, at most 8"):
        assert shown in text
    # A default computed at start is shown as this machine computes it.
    assert text.count("; here ") == 2 and "; here /" in text


def test_trace_help_names_its_url_alias_and_its_empty_exit() -> None:
    text = " ".join(help_in_process(("trace",)).split())
    assert "--server, --url URL" in text and "default http://localhost:6632" in text
    assert "Exits 4 when the trace has no events" in text


def test_an_unknown_command_is_a_usage_error_in_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "queen_trio", "bogus"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "No such command 'bogus'" in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
