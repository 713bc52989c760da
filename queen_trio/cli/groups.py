"""Consumer groups: `group list|describe|seek|delete`, and `replay` (a seek that says when)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..exits import Exit
from .api import Api, segment
from .connection import Connection, request_options
from .consuming import is_throwaway
from .failures import CliError
from .help import examples
from .output import QUEUE_MODE, Output, Row, col, confirm, group_label, when
from .times import iso, parse_time


@click.group(epilog=examples("queen-trio group list", "queen-trio group describe billing"))
def group() -> None:
    """Consumer groups: list, describe, seek, delete."""


def kind(name: str) -> str:
    if name == QUEUE_MODE:
        return "queue mode"
    return "tail (throwaway)" if is_throwaway(name) else ""


GROUP_COLUMNS = [
    col("GROUP", lambda g: group_label(g["name"])), col("QUEUE", "queueName"),
    col("STATE", "state"),
    col("LAG", "totalLag"), col("MAX LAG (S)", "maxTimeLag"),
    col("PROCESSING", "processing"), col("DLQ", "deadLetters"), col("KIND", "kind"),
    col("SUBSCRIPTION", "subscriptionMode", wide=True),
    col("FROM", lambda g: when(g["subscriptionTimestamp"]), wide=True),
    col("CONSUMED", "totalConsumed", wide=True),
    col("LAST CONSUMED", lambda g: when(g["lastConsumedAt"]), wide=True),
]


def list_groups(api: Api) -> list[Row]:
    """Every (group, queue), each marked with its kind: a throwaway tail group is
    `"throwaway": true`."""
    return [{**g, "kind": kind(g["name"]), "throwaway": is_throwaway(g["name"])}
            for g in api.get("/api/v1/consumer-groups")]


@group.command("list", epilog=examples(
    "queen-trio group list", "queen-trio group list -o wide",
    "queen-trio group list -o json | jq -r '.[] | select(.throwaway) | .name'"))
@request_options()
def list_command(connection: Connection, out: Output) -> None:
    """Every consumer group on every queue, with its lag and state. Throwaway groups of
    `queen-trio tail` are marked in KIND (and `throwaway` in JSON)."""
    out.rows(list_groups(Api(connection)), GROUP_COLUMNS,
             name=lambda g: g["name"])


@group.command("describe", epilog=examples("queen-trio group describe billing"))
@click.argument("name")
@request_options()
def describe(connection: Connection, out: Output, name: str) -> None:
    """A group's partitions on each queue: lag, lease, retries. An unknown group exits 5."""
    body = Api(connection).get(f"/api/v1/consumer-groups/{segment(name)}")
    if not body:
        raise CliError(f"consumer group {name} not found", Exit.NOT_FOUND)
    rows = [{"queue": queue_name, **p} for queue_name, detail in body.items()
            for p in detail["partitions"]]
    out.rows(rows, [
        col("QUEUE", "queue"), col("PARTITION", "partition"), col("LAG", "offsetLag"),
        col("LAG (S)", "timeLagSeconds"), col("LEASED", "leaseActive"),
        col("PROCESSING", "processing"), col("RETRIES", "retryCount"),
        col("DLQ", "deadLetters", wide=True), col("CONSUMED", "totalConsumed", wide=True),
        col("LAST CONSUMED", lambda p: when(p["lastConsumedAt"]), wide=True),
        col("PARTITION ID", "partitionId", wide=True)],
        name=lambda p: f"{p['queue']}/{p['partition']}", document=body)


def seek(api: Api, group_name: str, queue_name: str, to: str,
         partition: str | None) -> tuple[Row, str, int]:
    """Move the group's cursors on the queue; the reply, the target in words and how many
    partitions moved."""
    if to.strip().lower() == "end":
        body: dict[str, Any] = {"toEnd": True}
        target = "the end"
    else:
        at = iso(parse_time(to))
        body, target = {"timestamp": at}, at
    path = f"/api/v1/consumer-groups/{segment(group_name)}/queues/{segment(queue_name)}"
    if partition is not None:
        path += f"/partitions/{segment(partition)}"
    reply = api.post(f"{path}/seek", body)
    return reply, target, reply.get("partitionsUpdated", int(bool(reply.get("updated"))))


def seek_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--to and --partition, the output and connection options: `group seek` and `replay`."""
    for option in (request_options(),
                   click.option("--partition", help="this partition only"),
                   click.option("--to", required=True, help=(
                       "'15m ago', an ISO timestamp (UTC unless it says otherwise), "
                       "'beginning' or 'end'"))):
        command = option(command)
    return command


@group.command("seek", epilog=examples(
    "queen-trio group seek billing orders --to '15m ago'",
    "queen-trio group seek billing orders --to end",
    "queen-trio group seek billing orders --to 2026-12-01T07:00:00Z --partition p1"))
@click.argument("name")
@click.argument("queue_name", metavar="QUEUE")
@seek_options
def seek_command(connection: Connection, out: Output, name: str, queue_name: str, to: str,
                 partition: str | None) -> None:
    """Move a group's cursors on QUEUE to a time (messages after it are delivered again) or
    to the end (skip everything). Prints the absolute UTC time it sent."""
    reply, target, moved = seek(Api(connection), name, queue_name, to, partition)
    out.say(f"group {name} on {queue_name}: moved to {target}; {moved} partitions moved",
            reply, name)


@group.command("delete", epilog=examples(
    "queen-trio group delete billing", "queen-trio group delete billing --queue orders --yes",
    "queen-trio group list -o json | jq -r '.[] | select(.throwaway) | .name' "
    "| xargs -n1 queen-trio group delete --yes"))
@click.argument("name")
@click.option("--queue", "queue_name", help="on this queue only")
@click.option("--keep-subscription", is_flag=True,
              help="a later pop re-joins at the group's old start")
@click.option("--yes", "-y", is_flag=True, help="do not ask on a terminal")
@request_options()
def delete(connection: Connection, out: Output, name: str, queue_name: str | None,
           keep_subscription: bool, yes: bool) -> int:
    """Delete a group's cursors, leases and subscription (its dead letters stay). Asks first
    on a terminal. A group with nothing to delete exits 5."""
    where = f" on {queue_name}" if queue_name else ""
    confirm(f"Delete consumer group {name}{where}?", yes)
    path = f"/api/v1/consumer-groups/{segment(name)}"
    if queue_name:
        path += f"/queues/{segment(queue_name)}"
    reply = Api(connection).delete(path, deleteMetadata=not keep_subscription)
    if not reply.get("deletedPartitions") and not reply.get("metadataDeleted"):
        raise CliError(f"consumer group {name}{where} not found", Exit.NOT_FOUND)
    out.say(f"group {name}{where} deleted ({reply.get('deletedPartitions')} partitions)",
            reply, name)
    return Exit.OK


@click.command(epilog=examples(
    "queen-trio replay orders --group billing --to '15m ago'",
    "queen-trio replay orders --group billing --to beginning",
    "queen-trio replay orders --group billing --to end  # skip the backlog"))
@click.argument("queue_name", metavar="QUEUE")
@click.option("--group", "group_name", required=True, help="the consumer group to rewind")
@seek_options
def replay(connection: Connection, out: Output, queue_name: str, group_name: str, to: str,
           partition: str | None) -> None:
    """Rewind (or fast-forward) a group on QUEUE: `group seek`, printing the absolute UTC
    time it sent. The group's leases there are released."""
    reply, target, moved = seek(Api(connection), group_name, queue_name, to, partition)
    out.say(f"replaying {queue_name} for {group_name} from {target} ({moved} partitions "
            "moved)" if target != "the end" else
            f"{group_name} on {queue_name} skipped to the end ({moved} partitions moved)",
            reply, group_name)
