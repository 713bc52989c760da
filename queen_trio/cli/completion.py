"""`queen-trio completion bash|zsh|fish`: the shell script that completes commands, options
and choices (click's completion protocol through `_QUEEN_TRIO_COMPLETE`)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from .help import examples

PROG = "queen-trio"
COMPLETE_VAR = "_QUEEN_TRIO_COMPLETE"


@click.command(epilog=examples(
    "source <(queen-trio completion bash)  # in ~/.bashrc",
    "queen-trio completion zsh > \"${fpath[1]}/_queen-trio\"",
    "queen-trio completion fish > ~/.config/fish/completions/queen-trio.fish"))
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script for SHELL."""
    completer = get_completion_class(shell)
    assert completer is not None  # the choice lists only the shells click knows
    root = click.get_current_context().find_root().command
    click.echo(completer(root, {}, PROG, COMPLETE_VAR).source())
