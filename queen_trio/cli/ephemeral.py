"""`queen-trio ephemeral list|depth|push|pop`: the ephemeral queues (docs/ephemeral.md)."""

from __future__ import annotations

import json
import sys

import click

from ..exits import Exit
from .api import Api, segment
from .connection import Connection, connection_options, request_options
from .failures import CliError
from .help import examples
from .output import Output, col, compact, line


@click.group(epilog=examples("queen-trio ephemeral list", "queen-trio ephemeral depth inbox",
                             "echo '{\"ask\": 1}' | queen-trio ephemeral push inbox",
                             "queen-trio ephemeral pop inbox --wait 5 --auto-ack"))
def ephemeral() -> None:
    """Ephemeral queues: in-memory rings, lost on a restart; their declarations kept."""


LIST_COLUMNS = [
    col("QUEUE", "queue"), col("TIER", "tier"), col("DEPTH", "depth"), col("BYTES", "bytes"),
    col("PARTITIONS", "partitions"), col("GROUPS", "groups"),
    col("DROPS", lambda q: ", ".join(f"{k} {v}" for k, v in q["drops"].items())),
    col("OPTIONS", lambda q: compact(q["options"]), wide=True),
]


@ephemeral.command("list", epilog=examples("queen-trio ephemeral list -o wide"))
@request_options()
def list_queues(connection: Connection, out: Output) -> int:
    """Every ephemeral queue, declared and implicit, with its depth, bytes and drops, and
    the broker process that owns them."""
    body = Api(connection).get("/api/v1/ephemeral/queues")
    if out.human:
        click.echo(f"owner: {body.get('owner')}")
    out.rows(body["queues"], LIST_COLUMNS, name="queue", document=body)
    return Exit.OK


@ephemeral.command(epilog=examples("queen-trio ephemeral depth inbox --group workers"))
@click.argument("queue")
@click.option("--group", help="pending as this group sees it")
@request_options()
def depth(connection: Connection, out: Output, queue: str, group: str | None) -> int:
    """One ephemeral queue's depth: per partition and per group. Exits 4 when the queue
    does not exist."""
    api = Api(connection)
    response = api.send("GET", f"/api/v1/ephemeral/queues/{segment(queue)}/depth",
                        params={"group": group})
    if response.status_code == 404:
        raise CliError(f"no ephemeral queue named {queue!r}", Exit.EMPTY)
    body = api.call("GET", f"/api/v1/ephemeral/queues/{segment(queue)}/depth",
                    params={"group": group})
    fields = [col("QUEUE", "queue"), col("TIER", "tier"), col("PENDING", "pending"),
              col("BYTES", "bytes"), col("DROPS", lambda d: compact(d["drops"]))]
    out.record(body, fields, name=queue, sections=[
        ("partitions", body["partitions"], [col("PARTITION", "partition"),
                                            col("PENDING", "pending"), col("BYTES", "bytes")]),
        ("groups", body["groups"], [col("GROUP", lambda g: g["group"] or "queue mode"),
                                    col("PENDING", "pending"), col("SKIPPED", "skipped")])])
    return Exit.OK


@ephemeral.command(epilog=examples(
    "printf '{\"a\": 1}\\n{\"a\": 2}\\n' | queen-trio ephemeral push inbox"))
@click.argument("queue")
@click.option("--partition", help="the ring (default: Default)")
@request_options()
def push(connection: Connection, out: Output, queue: str, partition: str | None) -> int:
    """Push NDJSON from stdin: one payload per line, all in one request (all or nothing)."""
    payloads = []
    for number, text in enumerate(sys.stdin, 1):
        if not text.strip():
            continue
        try:
            payloads.append({"payload": json.loads(text)})
        except json.JSONDecodeError as exc:
            raise CliError(f"line {number} is not JSON: {exc.msg}", Exit.USAGE) from None
    body: dict[str, object] = {"queue": queue, "messages": payloads}
    if partition is not None:
        body["partition"] = partition
    reply = Api(connection).post("/api/v1/ephemeral/push", body)
    out.say(f"pushed {reply['pushed']} to {queue}", reply)
    return Exit.OK


@ephemeral.command(epilog=examples(
    "queen-trio ephemeral pop inbox --group workers --batch 10 --wait 5"))
@click.argument("queue")
@click.option("--partition")
@click.option("--group", help="a consumer group (default: queue mode)")
@click.option("--batch", type=int, default=1, show_default=True)
@click.option("--wait", "wait_seconds", type=float, default=0.0,
              help="long poll up to this many seconds")
@click.option("--auto-ack", is_flag=True, help="commit at delivery (at-most-once)")
@connection_options()
def pop(connection: Connection, queue: str, partition: str | None, group: str | None,
        batch: int, wait_seconds: float, auto_ack: bool) -> int:
    """Pop messages, one JSON line each ({id, partition, attempts, payload}). Exits 4 when
    there was none."""
    params: dict[str, object] = {"queue": queue, "partition": partition, "group": group,
                                 "batch": batch}
    if wait_seconds:
        params.update(wait="true", timeout=int(wait_seconds * 1000))
    if auto_ack:
        params["autoAck"] = "true"
    body = Api(connection).call("GET", "/api/v1/ephemeral/pop", params=params,
                                wait=wait_seconds)
    for message in body["messages"]:
        line(message)
    if not body["messages"] and sys.stdout.isatty():
        click.echo("no message", err=True)
    return Exit.OK if body["messages"] else Exit.EMPTY
