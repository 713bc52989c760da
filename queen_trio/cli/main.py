"""The `queen-trio` command tree, and `main`: every failure one line on stderr and an exit
status from `queen_trio.exits`, never a traceback.

Only click and the standard library load at start: `serve` imports the server when it runs,
and the client commands import httpx, rich, PyYAML and the JSONPath library when they need
them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click
from click.shell_completion import shell_complete

from .. import __version__
from ..exits import Exit
from . import (
    consuming,
    contexts,
    coordination,
    ephemeral,
    groups,
    manifests,
    probes,
    producing,
    resources,
    stream_queries,
    timers,
    traces,
)
from .completion import COMPLETE_VAR, PROG, completion
from .connection import Flags, connection_flags
from .failures import CliError, StdoutClosed, Terminated
from .serve import serve
from .spool import spool
from .streams import quiet_stdout

DESCRIPTION = """\
queen-trio: a partitioned message-queue broker, wire-compatible with Queen MQ, storing its
messages in PostgreSQL (an embedded cluster unless DATABASE_URL is set). Producers push JSON
messages over HTTP; consumers pop, ack and long-poll them. `serve` runs the broker; every
other command is a client of a running broker's HTTP API.
"""

EPILOG = """\b
Examples:
  queen-trio serve                                  embedded PostgreSQL, port 6632
  queen-trio serve --port 7000 --data-dir ./data    another port and data directory
  DATABASE_URL=postgresql://user:pw@db/queen queen-trio serve
  echo '{"orderId": 1}' | queen-trio push orders    push one message
  queen-trio tail orders -f | jq .data              follow a queue
  queen-trio queue list                             queues and their counts
  queen-trio trace order-8891                       the timeline of trace order-8891

\b
Connection: --server URL, --token T, --token-file F, --context NAME (QUEEN_SERVER,
QUEEN_TOKEN, QUEEN_CONTEXT, QUEEN_CONFIG); flags win over variables, variables over the
current context. Output: -o table|wide|json|ndjson|yaml|name (a table on a terminal, JSON
when piped).

\b
Exit statuses: 0 ok, 1 refused or partial, 2 usage or configuration, 3 authentication,
4 empty result, 5 not found, 6 unreachable or 5xx, 130 interrupted.
Every setting and its variable: docs/operations.md. Every command: docs/cli.md.
"""


class Tree(click.Group):
    """Commands listed in the order they were added (related ones together), not sorted."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=Tree, help=DESCRIPTION, epilog=EPILOG,
             context_settings={"help_option_names": ["-h", "--help"],
                               "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s %(version)s")
def root(**flags: object) -> None:
    # The connection flags may come before the command too (`queen-trio --server URL queue
    # list`); the command's own win (cli/connection.py).
    click.get_current_context().obj = Flags(**flags)  # type: ignore[arg-type]


for flag in connection_flags():
    root = flag(root)


for command in (serve, probes.ping, probes.version, probes.status, probes.lag,
                resources.queue, resources.partition, resources.messages, resources.dlq,
                groups.group, groups.replay, producing.push, consuming.pop, consuming.ack,
                consuming.tail, manifests.apply, traces.trace, traces.traces, probes.metrics,
                coordination.kv, coordination.locks, stream_queries.streams, timers.timers,
                timers.fetch, ephemeral.ephemeral, spool, contexts.context, completion):
    root.add_command(command)


# One line each in the command lists (the docstrings' first sentences say more).
SHORT_HELP = {
    ("status",): "The broker's figures, or one queue's.",
    ("lag",): "Consumer groups behind their queues.",
    ("replay",): "Rewind a group on a queue (prints the UTC time sent).",
    ("push",): "Push NDJSON from stdin (--ack-source: the lossless copy).",
    ("pop",): "Pop messages, one JSON line each.",
    ("ack",): "Ack a message, or every line pop or tail printed.",
    ("tail",): "Print messages as they come, one JSON line each.",
    ("apply",): "Make the broker match Queue and ConsumerGroup manifests.",
    ("trace",): "A trace's timeline.",
    ("fetch",): "A partition's records by offset, one JSON line each.",
    ("metrics",): "The broker's figures, JSON or Prometheus.",
    ("context",): "Named brokers (server, token) and the current one.",
    ("queue", "configure"): "Create a queue or change its options.",
    ("queue", "delete"): "Delete a queue and everything in it.",
    ("queue", "list"): "Every queue with its counters.",
    ("group", "delete"): "Delete a group's cursors, leases and subscription.",
    ("group", "seek"): "Move a group's cursors to a time or the end.",
}
for path, text in SHORT_HELP.items():
    target: click.Command = root
    for name in path:
        target = target.commands[name]  # type: ignore[attr-defined]
    target.short_help = text


def main(argv: Sequence[str] | None = None) -> int:
    instruction = os.environ.get(COMPLETE_VAR)
    if instruction:  # the shell asks for completions (`queen-trio completion bash`)
        return shell_complete(root, {}, PROG, COMPLETE_VAR, instruction)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        with root.make_context(PROG, args) as ctx:
            return int(root.invoke(ctx) or 0)
    except click.exceptions.Exit as done:  # --help, --version
        return done.exit_code
    except click.exceptions.NoArgsIsHelpError as bare:
        click.echo(bare.ctx.get_help())
        return Exit.OK
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else PROG
        print(f"{where}: {one_line(exc.format_message())} (see '{where} --help')",
              file=sys.stderr)
        return Exit.USAGE
    except click.ClickException as exc:  # a bad file argument, and the like
        print(f"{PROG}: {one_line(exc.format_message())}", file=sys.stderr)
        return exc.exit_code
    except click.Abort:  # a prompt read the end of its input
        print(f"{PROG}: aborted", file=sys.stderr)
        return Exit.REFUSED
    except CliError as exc:
        print(f"{PROG}: {one_line(str(exc))}", file=sys.stderr)
        return exc.status
    except (StdoutClosed, BrokenPipeError):  # the reader went away: that is its choice
        quiet_stdout()
        return Exit.OK
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except Terminated as stop:
        return 128 + stop.signum
    except Exception as exc:  # a bug of ours: still one line, naming it
        print(f"{PROG}: internal error: {type(exc).__name__}: {one_line(str(exc))}",
              file=sys.stderr)
        return Exit.REFUSED


def one_line(text: str) -> str:
    return " ".join(text.split())
