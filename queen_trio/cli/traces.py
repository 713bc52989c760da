"""`queen-trio trace NAME` (a trace's timeline, to debug a flow end to end) and
`queen-trio traces names`."""

from __future__ import annotations

import click

from ..exits import Exit
from .api import Api, segment
from .connection import Connection, request_options
from .help import examples
from .output import Output, Row, col, compact, when

PAGE = 500


def fetch_trace(api: Api, name: str) -> list[Row]:
    """Every event of the trace, oldest first (follows pagination)."""
    events: list[Row] = []
    while True:
        body = api.get(f"/api/v1/traces/by-name/{segment(name)}", limit=PAGE,
                       offset=len(events))
        events.extend(body["traces"])
        if not body["traces"] or len(events) >= body["total"]:
            return events


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def timeline_title(name: str, events: list[Row]) -> str:
    """The line above a trace's table (also in a failing test's report: pytest_plugin.py)."""
    if not events:
        return f"trace {name!r}: no events"
    messages = {(e["partition_id"], e["transaction_id"]) for e in events}
    return (f"trace {name!r}: {plural(len(events), 'event')} on "
            f"{plural(len(messages), 'message')}")


EVENT_COLUMNS = [
    col("TIME", lambda e: e["created_at"]),
    col("QUEUE/PARTITION", lambda e: f"{e['queue_name']}/{e['partition_name']}"),
    col("GROUP", "consumer_group"), col("EVENT", "event_type"),
    col("TRANSACTION", "transaction_id"), col("DATA", lambda e: compact(e["data"])),
]


@click.command(epilog=examples("queen-trio trace order-8891",
                               "queen-trio trace order-8891 -o json | jq '.[].data'"))
@click.argument("name")
@request_options(url_alias=True)
def trace(connection: Connection, out: Output, name: str) -> int:
    """Print every event recorded under trace NAME, oldest first: time, queue/partition,
    group, event, transaction id, data. Exits 4 when the trace has no events.

    --url is another name for --server."""
    events = fetch_trace(Api(connection), name)
    if out.human:
        click.echo(timeline_title(name, events))
        if not events:
            return Exit.EMPTY
    out.rows(events, EVENT_COLUMNS, name="id")
    return Exit.OK if events else Exit.EMPTY


@click.group(epilog=examples("queen-trio traces names"))
def traces() -> None:
    """Trace names recorded by consumers (POST /api/v1/traces)."""


@traces.command("names", epilog=examples("queen-trio traces names --limit 20",
                                         "queen-trio traces names -o name"))
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@request_options()
def names(connection: Connection, out: Output, limit: int) -> None:
    """Every trace name, most recently seen first, with its event and message counts."""
    body = Api(connection).get("/api/v1/traces/names", limit=limit)
    out.rows(body["trace_names"], [
        col("NAME", "trace_name"), col("EVENTS", "trace_count"),
        col("MESSAGES", "message_count"), col("LAST SEEN", lambda r: when(r["last_seen"]))],
        name="trace_name")
