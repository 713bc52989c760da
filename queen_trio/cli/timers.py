"""`timers list|peek|cancel` and `fetch` (docs/cli.md): timers and offset reads."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

import click

from ..exits import Exit
from .api import Api, segment
from .connection import Connection, connection_options, request_options
from .help import examples
from .output import Output, col, line, when


def _key_path(queue: str, key: str) -> str:
    # As the Python client sends it: the queue encoded whole, a "/" in the key kept raw.
    return f"/api/v1/timers/{segment(queue)}/{quote(key, safe='/')}"


@click.group(epilog=examples("queen-trio timers list", "queen-trio timers list orders",
                             "queen-trio timers cancel orders order-1/expire"))
def timers() -> None:
    """Timers: pending ones per queue, one timer, cancel."""


SUMMARY_COLUMNS = [col("QUEUE", "queue"), col("PENDING", "pending"), col("HELD", "held"),
                   col("NEXT DUE", lambda r: when(r["nextDue"]))]
TIMER_COLUMNS = [
    col("KEY", "timerKey"), col("DELIVER AT", lambda r: when(r["deliverAt"])),
    col("PARTITION", "partition"), col("TXN", "txn"), col("ATTEMPTS", "attempts"),
    col("CLAIMED", "claimed"), col("LAST ERROR", "lastError", wide=True),
    col("MESSAGE ID", "messageId", wide=True), col("BYTES", "payloadBytes", wide=True),
]


@timers.command("list", epilog=examples("queen-trio timers list",
                                        "queen-trio timers list orders --limit 50 -o wide"))
@click.argument("queue", required=False)
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True,
              help="at most this many timers of the queue")
@request_options()
def list_timers(connection: Connection, out: Output, queue: str | None, limit: int) -> None:
    """Without QUEUE: pending timers per queue and the next due time. With it: the queue's
    pending timers by key (no payloads)."""
    api = Api(connection)
    if queue is None:
        out.rows(api.get("/api/v1/status/timers")["queues"], SUMMARY_COLUMNS, name="queue")
        return
    rows: list[Any] = []
    after = ""
    while len(rows) < limit:
        page = api.get(f"/api/v1/timers/{segment(queue)}", after=after or None,
                       limit=min(1000, limit - len(rows)))
        rows.extend(page["rows"])
        if not page["truncated"]:
            break
        after = page["nextAfter"]
    out.rows(rows, TIMER_COLUMNS, name="timerKey")


@timers.command("peek", epilog=examples("queen-trio timers peek orders order-1/expire"))
@click.argument("queue")
@click.argument("key")
@request_options()
def peek(connection: Connection, out: Output, queue: str, key: str) -> int:
    """One pending timer with its payload (decoded when it is clear JSON). Exits 5 when the
    queue has no such pending timer."""
    found = Api(connection).get(_key_path(queue, key))
    if not found.get("found"):
        click.echo(f"no pending timer {key!r} on {queue!r}", err=True)
        return Exit.NOT_FOUND
    if not found["encrypted"]:
        try:
            found["payload"] = json.loads(base64.b64decode(found["payload"]))
        except ValueError:
            pass
    out.record(found, [col(k, k) for k in found if k != "found"], name=key)
    return Exit.OK


@timers.command("cancel", epilog=examples("queen-trio timers cancel orders order-1/expire"))
@click.argument("queue")
@click.argument("key")
@click.option("--txn", help="echoed back when the timer is absent")
@request_options()
def cancel(connection: Connection, out: Output, queue: str, key: str, txn: str | None) -> int:
    """Cancel a pending timer: exits 0 when cancelled, 4 when absent (never scheduled,
    cancelled, or already delivered), 1 when too late (a broker is firing it now)."""
    result = Api(connection).delete(_key_path(queue, key), txn=txn)
    out.say(f"{result['status']}: {queue} {key}", result, name=key)
    return {"cancelled": Exit.OK, "absent": Exit.EMPTY}.get(result["status"], Exit.REFUSED)


@click.command(epilog=examples("queen-trio fetch orders --partition customer-42",
                               "queen-trio fetch orders --partition p1 --offset 100 | jq .payload"))
@click.argument("queue")
@click.option("--partition", default="Default", show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True,
              help="the first offset to print")
@click.option("--max", "most", type=click.IntRange(1), help="at most this many records")
@connection_options()
def fetch(connection: Connection, queue: str, partition: str, offset: int,
          most: int | None) -> int:
    """Print a partition's records from OFFSET to its end as it was when the read started,
    one JSON line each ({offset, transactionId, payload, ts}): no lease, no cursor, no ack.
    Exits 5 for an unknown queue, 1 when OFFSET is out of range (the log's bounds on stderr)."""
    api = Api(connection)
    end: int | None = None
    printed = 0
    while end is None or offset < end:
        body = {"entries": [{"queue": queue, "partition": partition, "offset": offset}]}
        (entry,) = api.post("/api/v1/fetch", body)["entries"]
        if entry.get("error") == "UNKNOWN_TOPIC_OR_PARTITION":
            click.echo(f"no queue {queue!r}", err=True)
            return Exit.NOT_FOUND
        if entry.get("error"):
            click.echo(f"{entry['error']}: offset {offset}; the log holds "
                       f"{entry['logStartOffset']} to {entry['highWatermark'] - 1}", err=True)
            return Exit.REFUSED
        if end is None:
            end = entry["highWatermark"]
        if not entry["records"]:
            break
        for record in entry["records"]:
            if record["offset"] >= end or (most is not None and printed >= most):
                return Exit.OK
            line(record)
            printed += 1
        offset = entry["records"][-1]["offset"] + 1
    return Exit.OK
