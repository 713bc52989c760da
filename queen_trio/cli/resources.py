"""Resources: `queue`, `partition`, `messages` and `dlq`."""

from __future__ import annotations

import json
from typing import Any

import click

from ..exits import Exit
from .api import Api, segment
from .connection import Connection, request_options
from .failures import CliError
from .help import examples
from .output import Output, col, confirm, figure_columns, when
from .times import TIME, iso

# -- queue -------------------------------------------------------------------------------------

@click.group(epilog=examples("queen-trio queue list", "queen-trio queue describe orders"))
def queue() -> None:
    """Queues: list, describe, configure, delete."""


QUEUE_COLUMNS = [
    col("NAME", "name"), col("PARTITIONS", "partitions"), *figure_columns("messages"),
    col("NAMESPACE", "namespace", wide=True), col("TASK", "task", wide=True),
    col("PRIORITY", "priority", wide=True),
    col("CREATED", lambda q: when(q["createdAt"]), wide=True),
    col("LAST ACTIVITY", lambda q: when(q["lastActivity"]), wide=True),
]


@queue.command("list", epilog=examples(
    "queen-trio queue list", "queen-trio queue list --namespace shop -o wide",
    "queen-trio queue list -o name | xargs -n1 queen-trio status"))
@click.option("--namespace", help="queues of this namespace only")
@click.option("--task", help="queues of this task only")
@click.option("--search", help="names containing this text")
@click.option("--limit", type=click.IntRange(1, 1000), default=1000, show_default=True)
@request_options()
def list_queues(connection: Connection, out: Output, namespace: str | None, task: str | None,
                search: str | None, limit: int) -> None:
    """Every queue with its partitions and message counters, newest first."""
    body = Api(connection).get("/api/v1/resources/queues", namespace=namespace, task=task,
                               search=search, limit=limit)
    out.rows(body["queues"], QUEUE_COLUMNS)


PARTITION_COLUMNS = [
    col("PARTITION", "name"), *figure_columns("stats"),
    col("GROUPS", "groups"), col("LAST ACTIVITY", lambda p: when(p.get("lastActivity"))),
    col("OLDEST", lambda p: when(p.get("oldestMessage")), wide=True),
    col("ID", "id", wide=True),
]


@queue.command("describe", epilog=examples("queen-trio queue describe orders",
                                           "queen-trio queue describe orders -o yaml"))
@click.argument("name")
@request_options()
def describe_queue(connection: Connection, out: Output, name: str) -> None:
    """A queue's options, counters and partitions. An unknown queue exits 5."""
    api = Api(connection)
    detail = api.get(f"/api/v1/resources/queues/{segment(name)}")
    config = api.get(f"/api/v1/status/queues/{segment(name)}")["queue"]["config"]
    record = {**detail, "options": config}
    fields = [col("name", "name"), col("namespace", "namespace"), col("task", "task"),
              col("priority", "priority"), col("created", lambda r: when(r["createdAt"])),
              *figure_columns("totals", upper=False),
              *(col(key, ("options", key)) for key in config
                if key not in ("priority", "maxQueueSize"))]
    out.record(record, fields, name=detail["name"],
               sections=[("Partitions", detail["partitions"], PARTITION_COLUMNS)])


def option_value(text: str) -> tuple[str, Any]:
    """`name=value`, the value read as JSON when it is JSON (120, true, null), else text."""
    name, equals, raw = text.partition("=")
    if not equals or not name:
        raise click.BadParameter(f"{text!r} is not NAME=VALUE", param_hint="--set")
    try:
        return name, json.loads(raw)
    except ValueError:
        return name, raw


@queue.command("configure", epilog=examples(
    "queen-trio queue configure orders --set leaseTime=120 --set retryLimit=5",
    "queen-trio queue configure orders --set delayedProcessing=null  # back to its default",
    "queen-trio queue configure orders --namespace shop --task orders"))
@click.argument("name")
@click.option("--set", "settings", multiple=True, metavar="OPTION=VALUE",
              help="a queue option by its wire name (leaseTime, retryLimit, maxSize, ...); "
                   "null resets it; repeatable")
@click.option("--namespace")
@click.option("--task")
@click.option("--replace", is_flag=True,
              help="the given options are the whole configuration (others reset)")
@request_options()
def configure_queue(connection: Connection, out: Output, name: str, settings: tuple[str, ...],
                    namespace: str | None, task: str | None, replace: bool) -> int:
    """Create a queue or change its options (merged: an option not given keeps its value)."""
    options = dict(option_value(s) for s in settings)
    body: dict[str, Any] = {"queue": name, "options": options,
                            "mode": "replace" if replace else "merge"}
    if namespace is not None:
        body["namespace"] = namespace
    if task is not None:
        body["task"] = task
    reply = Api(connection).post("/api/v1/configure", body)
    ignored = reply.get("ignoredOptions") or []
    out.say(f"queue {name} configured" + (f"; unknown options ignored: {', '.join(ignored)}"
                                          if ignored else ""), reply, name)
    return Exit.REFUSED if ignored else Exit.OK


@queue.command("delete", epilog=examples("queen-trio queue delete orders",
                                         "queen-trio queue delete orders --yes"))
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="do not ask on a terminal")
@request_options()
def delete_queue(connection: Connection, out: Output, name: str, yes: bool) -> int:
    """Delete a queue with its partitions, messages, groups and dead letters. Asks first on
    a terminal. An unknown queue exits 5."""
    confirm(f"Delete queue {name} and every message in it?", yes)
    reply = Api(connection).delete(f"/api/v1/resources/queues/{segment(name)}")
    if not reply.get("existed"):
        raise CliError(f"queue {name} not found", Exit.NOT_FOUND)
    out.say(f"queue {name} deleted", reply, name)
    return Exit.OK


# -- partition ---------------------------------------------------------------------------------

@click.group(epilog=examples("queen-trio partition list --queue orders"))
def partition() -> None:
    """Partitions of the queues."""


@partition.command("list", epilog=examples("queen-trio partition list",
                                           "queen-trio partition list --queue orders -o wide"))
@click.option("--queue", "queue_name", help="partitions of this queue only")
@click.option("--limit", type=click.IntRange(1, 1000), default=1000, show_default=True)
@request_options()
def list_partitions(connection: Connection, out: Output, queue_name: str | None,
                    limit: int) -> None:
    """Partitions by queue then name, with what each holds and has left to consume."""
    body = Api(connection).get("/api/v1/resources/partitions", queue=queue_name, limit=limit)
    out.rows(body["partitions"], [
        # The API's `pending` here is what the slowest group has not consumed, in flight
        # included: named for what it counts.
        col("QUEUE", "queue"), col("PARTITION", "name"), col("TOTAL", "total"),
        col("UNCONSUMED", "pending"), col("LAST ACTIVITY", lambda p: when(p["lastActivity"])),
        col("CREATED", lambda p: when(p["createdAt"]), wide=True), col("ID", "id", wide=True)],
        name=lambda p: f"{p['queue']}/{p['name']}")


# -- messages ----------------------------------------------------------------------------------

@click.group(epilog=examples("queen-trio messages list --queue orders --status pending"))
def messages() -> None:
    """Messages: list, get, delete, retry."""


MESSAGE_COLUMNS = [
    col("TRANSACTION", "transactionId"), col("QUEUE/PARTITION", "queuePath"),
    col("STATUS", "status"), col("CREATED", lambda m: when(m["createdAt"])),
    col("PARTITION ID", "partitionId", wide=True), col("ID", "id", wide=True),
    col("LEASE EXPIRES", lambda m: when(m["leaseExpiresAt"]), wide=True),
]


@messages.command("list", epilog=examples(
    "queen-trio messages list --queue orders",
    "queen-trio messages list --queue orders --status dead_letter --from '1d ago'"))
@click.option("--queue", "queue_name")
@click.option("--partition", "partition_name")
@click.option("--namespace")
@click.option("--task")
@click.option("--status", type=click.Choice(["pending", "processing", "completed",
                                             "dead_letter"]))
@click.option("--from", "start", type=TIME, help="created at or after (default: 1 h ago)")
@click.option("--to", "end", type=TIME, help="created at or before")
@click.option("--limit", type=click.IntRange(1, 1000), default=200, show_default=True)
@request_options()
def list_messages(connection: Connection, out: Output, queue_name: str | None,
                  partition_name: str | None, namespace: str | None, task: str | None,
                  status: str | None, start: Any, end: Any, limit: int) -> None:
    """Messages newest first, without payloads (get one for its payload)."""
    body = Api(connection).get(
        "/api/v1/messages", queue=queue_name, partition=partition_name, namespace=namespace,
        task=task, status=status, limit=limit, **{"from": start and iso(start),
                                                   "to": end and iso(end)})
    out.rows(body["messages"], MESSAGE_COLUMNS,
             name=lambda m: f"{m['partitionId']}/{m['transactionId']}")


def message_path(partition_id: str, transaction_id: str) -> str:
    return f"/api/v1/messages/{segment(partition_id)}/{segment(transaction_id)}"


@messages.command("get", epilog=examples(
    "queen-trio messages get 0190a1b2-... order-8891",
    "queen-trio messages get 0190a1b2-... order-8891 -o json | jq .payload"))
@click.argument("partition_id")
@click.argument("transaction_id")
@request_options()
def get_message(connection: Connection, out: Output, partition_id: str,
                transaction_id: str) -> None:
    """One message with its payload, status and per-group state. Unknown: exits 5."""
    body = Api(connection).get(message_path(partition_id, transaction_id))
    fields = [col(key, key) for key in ("transactionId", "id", "queuePath", "status",
                                        "createdAt", "traceId", "producerSub", "retryCount",
                                        "errorMessage", "leaseExpiresAt", "payload")]
    out.record(body, fields, name=f"{partition_id}/{transaction_id}", sections=[
        ("Consumer groups", body.get("consumerGroups") or [],
         [col("GROUP", "name"), col("STATUS", "status"), col("CONSUMED", "consumed"),
          col("LEASE EXPIRES", lambda g: when(g.get("leaseExpiresAt")))])])


@messages.command("delete", epilog=examples("queen-trio messages delete 0190a1b2-... order-8891"))
@click.argument("partition_id")
@click.argument("transaction_id")
@click.option("--yes", "-y", is_flag=True, help="do not ask on a terminal")
@request_options()
def delete_message(connection: Connection, out: Output, partition_id: str,
                   transaction_id: str, yes: bool) -> int:
    """Delete one message: no group gets it any more, no count includes it. Asks first on a
    terminal. An unknown message exits 5."""
    confirm(f"Delete message {transaction_id}?", yes)
    reply = Api(connection).delete(message_path(partition_id, transaction_id))
    if reply.get("success") is False:
        raise CliError(reply.get("message") or "message not found", Exit.NOT_FOUND)
    out.say(f"message {transaction_id} deleted", reply, transaction_id)
    return Exit.OK


@messages.command("retry", epilog=examples(
    "queen-trio messages retry 0190a1b2-... order-8891",
    "queen-trio messages retry 0190a1b2-... order-8891 --group billing"))
@click.argument("partition_id")
@click.argument("transaction_id")
@click.option("--group", help="this group's dead letter (default: every group's)")
@request_options()
def retry_message(connection: Connection, out: Output, partition_id: str,
                  transaction_id: str, group: str | None) -> int:
    """Deliver a dead letter again: the group's next pop of the partition gets it first. A
    message no group dead-lettered exits 5."""
    reply = Api(connection).post(f"{message_path(partition_id, transaction_id)}/retry",
                                 consumerGroup=group)
    if reply.get("success") is False:
        raise CliError(reply.get("error") or reply.get("message") or "not retried")
    groups = ", ".join(reply.get("consumerGroups") or []) or "-"
    out.say(f"message {transaction_id} will be delivered again to {groups}", reply,
            transaction_id)
    return Exit.OK


# -- dlq ---------------------------------------------------------------------------------------

@click.group(epilog=examples("queen-trio dlq list orders"))
def dlq() -> None:
    """Dead letters."""


@dlq.command("list", epilog=examples("queen-trio dlq list orders",
                                     "queen-trio dlq list orders --group billing -o json"))
@click.argument("queue_name", metavar="QUEUE")
@click.option("--group", help="dead letters of this consumer group only")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@request_options()
def list_dead_letters(connection: Connection, out: Output, queue_name: str,
                      group: str | None, limit: int) -> int:
    """A queue's dead letters, newest failure first, with their payloads. Exits 4 when there
    are none."""
    body = Api(connection).get("/api/v1/dlq", queue=queue_name, consumerGroup=group,
                               limit=limit)
    out.rows(body["messages"], [
        col("TRANSACTION", "transactionId"), col("PARTITION", "partition"),
        col("GROUP", "consumerGroup"), col("ERROR", "errorMessage"),
        col("RETRIES", "retryCount"), col("FAILED", lambda m: when(m["failedAt"])),
        col("DATA", "data", wide=True), col("PARTITION ID", "partitionId", wide=True)],
        name=lambda m: f"{m['partitionId']}/{m['transactionId']}")
    return Exit.OK if body["messages"] else Exit.EMPTY
