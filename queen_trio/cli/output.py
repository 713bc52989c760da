"""How results are printed: `-o table|wide|json|ndjson|yaml|name` and `--no-headers`.

A table on a terminal, JSON when piped. Tables fit the terminal's width (COLUMNS wins), one
line per row, long cells cut with an ellipsis; NO_COLOR turns every style off. rich and PyYAML
load only when a table or YAML is printed.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import click

from ..exits import Exit
from .failures import CliError

FORMATS = ("table", "wide", "json", "ndjson", "yaml", "name")
Row = dict[str, Any]


@attrs.frozen
class Column:
    header: str
    value: Callable[[Row], Any]
    wide: bool = False  # shown by -o wide only


def col(header: str, key: str | tuple[str, ...] | Callable[[Row], Any], *,
        wide: bool = False) -> Column:
    """A column of `key` (a field, a path of fields, or a function of the row)."""
    if callable(key):
        return Column(header, key, wide)
    path = (key,) if isinstance(key, str) else key

    def getter(row: Row) -> Any:
        value: Any = row
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        return value

    return Column(header, getter, wide)


# Queue mode's internal group name: kept in JSON, YAML, NDJSON and names (the API's), shown
# as "queue mode" in tables, which people read.
QUEUE_MODE = "__QUEUE_MODE__"


def group_label(name: Any) -> Any:
    return "queue mode" if name == QUEUE_MODE else name


def figure_columns(*path: str, upper: bool = True) -> list[Column]:
    """A queue's or a partition's message counters (`path` leads to the API's counters) as
    every table shows them, adding up: total = pending (not delivered yet) + processing
    (delivered, not acked) + consumed (acked or dead-lettered), each where the slowest
    consumer group stands; and the dead letters apart, since they are every group's
    (docs/cli.md#message-counters)."""

    def counter(name: str) -> Callable[[Row], Any]:
        def get(row: Row) -> Any:
            value: Any = row
            for part in path:
                value = value.get(part, {}) if isinstance(value, dict) else {}
            return value.get(name) if isinstance(value, dict) else None
        return get

    def consumed(row: Row) -> Any:
        total, pending, processing = (counter(n)(row) for n in ("total", "pending",
                                                                "processing"))
        if None in (total, pending, processing):
            return None
        return total - pending - processing

    named = [("total", counter("total")), ("pending", counter("pending")),
             ("processing", counter("processing")), ("consumed", consumed),
             ("dead letters (every group)" if not upper else "DLQ", counter("deadLetter"))]
    return [Column(header.upper() if upper else header, get, False) for header, get in named]


def when(value: Any) -> str:
    """An ISO timestamp, shortened for a table: 2026-12-01T07:24:02.123456Z -> 2026-12-01
    07:24:02."""
    if not isinstance(value, str) or len(value) < 19 or value[10] != "T":
        return cell(value)
    return f"{value[:10]} {value[11:19]}"


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return compact(value)
    return str(value)


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def colourless() -> bool:
    return bool(os.environ.get("NO_COLOR"))


@attrs.define
class Output:
    format: str
    headers: bool = True

    @classmethod
    def choose(cls, format: str | None, no_headers: bool = False) -> Output:
        if format is None:
            format = "table" if sys.stdout.isatty() else "json"
        return cls(format, not no_headers)

    @property
    def human(self) -> bool:
        return self.format in ("table", "wide")

    def rows(self, rows: Sequence[Row], columns: Sequence[Column], *,
             name: str | Callable[[Row], str] = "name", document: Any = None) -> None:
        """A list: a table, or `document` (default: the rows) as JSON or YAML, or one JSON
        line or one name per row."""
        if self.human:
            shown = [c for c in columns if self.format == "wide" or not c.wide]
            self.table([c.header for c in shown],
                       [[c.value(row) for c in shown] for row in rows])
        elif self.format == "ndjson":
            for row in rows:
                line(row)
        elif self.format == "name":
            named = name if callable(name) else (lambda row: str(row[name]))
            for row in rows:
                click.echo(named(row))
        else:
            self.document(list(rows) if document is None else document)

    def record(self, record: Row, fields: Sequence[Column], *, name: str = "",
               sections: Iterable[tuple[str, Sequence[Row], Sequence[Column]]] = ()) -> None:
        """One object: FIELD  VALUE lines then titled tables, or the object itself."""
        if self.human:
            shown = [f for f in fields if self.format == "wide" or not f.wide]
            self.table(["FIELD", "VALUE"], [[f.header, f.value(record)] for f in shown],
                       headers_shown=False)
            for title, rows, columns in sections:
                click.echo(f"\n{title}:")
                kept = [c for c in columns if self.format == "wide" or not c.wide]
                self.table([c.header for c in kept], [[c.value(r) for c in kept] for r in rows])
        elif self.format == "ndjson":
            line(record)
        elif self.format == "name":
            click.echo(name)
        else:
            self.document(record)

    def say(self, text: str, document: Any, name: str = "") -> None:
        """A sentence for people, `document` for programs."""
        if self.human:
            click.echo(text)
        elif self.format == "ndjson":
            line(document)
        elif self.format == "name":
            if name:
                click.echo(name)
        else:
            self.document(document)

    def document(self, value: Any) -> None:
        if self.format == "yaml":
            import yaml

            click.echo(yaml.safe_dump(value, sort_keys=False, allow_unicode=True,
                                      default_flow_style=False), nl=False)
        else:
            click.echo(json.dumps(value, indent=2, ensure_ascii=False))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], *,
              headers_shown: bool | None = None) -> None:
        render_table(headers, [[cell(v) for v in row] for row in rows],
                     show_header=self.headers if headers_shown is None else headers_shown)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *,
                 show_header: bool = True) -> None:
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    texts = [[Text(v) for v in row] for row in rows]  # Text drops control characters
    natural = [max([cell_len(h) if show_header else 1, *(cell_len(r[i].plain) for r in texts)])
               for i, h in enumerate(headers)]
    width = table_width() or sum(natural) + 2 * len(natural)
    plain = colourless()
    console = Console(width=width, no_color=plain, highlight=False, markup=False,
                      emoji=False, soft_wrap=False)
    table = Table(box=None, show_header=show_header, header_style="" if plain else "bold",
                  pad_edge=False, show_edge=False, padding=(0, 1))
    floors = [min(n, max(cell_len(h), 4)) for n, h in zip(natural, headers, strict=True)]
    if floors:  # the first column names the row: it keeps a third of the width if it can
        floors[0] = min(natural[0], max(floors[0], width // 3))
    for header, fitted in zip(headers, fit(natural, floors, width), strict=True):
        table.add_column(header, width=fitted, no_wrap=True, overflow="ellipsis")
    for row in texts:
        table.add_row(*row)
    with console.capture() as captured:
        console.print(table)
    # Cells are padded to their column's width: the last one's padding is only noise.
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def table_width() -> int | None:
    """COLUMNS, else the terminal's width; None when piped (nothing is cut)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size((80, 24)).columns
    return None


def fit(natural: Sequence[int], floors: Sequence[int], width: int) -> list[int]:
    """Column widths that fit `width` with two spaces between columns: the widest column gives
    way first, down to its floor (its header), then below it if it must."""
    widths = list(natural)
    budget = max(width - 2 * (len(widths) - 1), len(widths))
    while sum(widths) > budget:
        above = [i for i, w in enumerate(widths) if w > floors[i]] or \
                [i for i, w in enumerate(widths) if w > 1]
        if not above:
            break
        widest = max(above, key=lambda i: (widths[i], i))
        widths[widest] -= 1
    return widths


def line(value: Any) -> None:
    """One JSON line, flushed now: the reader sees each message as it comes."""
    sys.stdout.write(json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n")
    sys.stdout.flush()


def output_options(command: Callable[..., Any]) -> Any:
    """-o/--output and --no-headers, handed to the command as one `out` argument."""
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = Output.choose(kwargs.pop("output"), kwargs.pop("no_headers"))
        return command(*args, out=out, **kwargs)

    wrapper = click.option("--no-headers", is_flag=True,
                           help="tables without their header line")(wrapper)
    return click.option("-o", "--output", type=click.Choice(FORMATS), metavar="FORMAT",
                        help="table, wide, json, ndjson, yaml or name (default: table on a "
                             "terminal, json when piped)")(wrapper)


def confirm(question: str, yes: bool) -> None:
    """Ask before a delete when a person is at a terminal (unless --yes); scripts are not
    asked. A "no" is a `CliError` (1): nothing was done."""
    if yes or not sys.stdin.isatty():
        return
    if not click.confirm(question, default=False, err=True):
        raise CliError("not confirmed: nothing deleted", Exit.REFUSED)
