"""Streams queries: `streams list|state|delete` (docs/streams.md)."""

from __future__ import annotations

import click

from ..exits import Exit
from .api import Api, segment
from .connection import Connection, request_options
from .help import examples
from .output import Output, col, confirm, when


@click.group("streams", epilog=examples("queen-trio streams list",
                                        "queen-trio streams state orders.per_minute"))
def streams() -> None:
    """Queries of the streaming SDK: list, state, delete."""


QUERY_COLUMNS = [
    col("NAME", "name"), col("SOURCE", "sourceQueue"), col("SINK", "sinkQueue"),
    col("LAG", "lag"), col("SHARDS", "shards"), col("STATE ROWS", "stateRows"),
    col("STATE BYTES", "stateBytes"), col("LAST CYCLE", lambda q: when(q["lastCycleAt"])),
    col("GROUPS", lambda q: ", ".join(q["consumerGroups"]), wide=True),
    col("CONFIG HASH", "configHash", wide=True), col("QUERY ID", "queryId", wide=True),
]


@streams.command("list", epilog=examples("queen-trio streams list",
                                         "queen-trio streams list -o json"))
@request_options()
def list_command(connection: Connection, out: Output) -> None:
    """Every streams query: its source and sink, its group's lag, its state's size and its
    last cycle."""
    out.rows(Api(connection).get("/streams/v1/queries")["queries"], QUERY_COLUMNS,
             name=lambda q: q["name"])


@streams.command("state", epilog=examples("queen-trio streams state orders.per_minute",
                                          "queen-trio streams state orders.per_minute "
                                          "--partition customer-7"))
@click.argument("name")
@click.option("--partition", help="this source partition only (its name or id)")
@request_options()
def state(connection: Connection, out: Output, name: str, partition: str | None) -> None:
    """A query's state shards, one per source partition: rows, bytes, watermark, lag, last
    cycle. An unknown query exits 5."""
    body = Api(connection).get(f"/streams/v1/queries/{segment(name)}",
                               **({"partition": partition} if partition else {}))
    out.rows(body["stateShards"], [
        col("QUEUE", "queue"), col("PARTITION", "partition"), col("LAG", "lag"),
        col("STATE ROWS", "stateRows"), col("STATE BYTES", "stateBytes"),
        col("WATERMARK", "watermarkMs"), col("LAST CYCLE", lambda s: when(s["lastCycleAt"])),
        col("UPDATED", lambda s: when(s["updatedAt"]), wide=True),
        col("PARTITION ID", "partitionId", wide=True)],
        name=lambda s: f"{s['queue']}/{s['partition']}", document=body)


@streams.command("delete", epilog=examples("queen-trio streams delete orders.per_minute --yes"))
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="do not ask on a terminal")
@request_options()
def delete(connection: Connection, out: Output, name: str, yes: bool) -> int:
    """Delete a query and its state (its consumer group stays: `group delete`). Asks first
    on a terminal. An unknown query exits 5."""
    confirm(f"Delete streams query {name} and its state?", yes)
    reply = Api(connection).delete(f"/streams/v1/queries/{segment(name)}")
    out.say(f"streams query {name} deleted", reply, name)
    return Exit.OK
