"""`push`: NDJSON from stdin into a queue, in batches, each message with a transaction id
chosen before its first send (a retried batch is deduplicated by the broker).

`push DST --ack-source` reads the lines `tail --no-ack` prints and, per batch, pushes them to
DST and acks them at their source in one `POST /api/v1/transaction`: the copy commits whole
or not at all, so killing either side of `tail | push` loses nothing and duplicates nothing.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import click

from .. import ids
from ..exits import Exit
from .api import Api, check, error_text
from .connection import Connection, connection_options
from .failures import CliError, StdoutClosed, Terminated
from .help import examples
from .streams import Idle, Lines, emit, quiet_stdout, streaming

STATUSES = ("queued", "duplicate", "buffered", "failed")
MAX_RETRY_AFTER = 30.0


class LineError(ValueError):
    """This line cannot become a message (it is named on stderr and counts as failed)."""


@attrs.frozen
class Pending:
    line: int
    item: dict[str, Any]  # the push item
    source: dict[str, Any] | None = None  # --ack-source: the message line to ack


@attrs.define
class Tally:
    counts: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(STATUSES, 0))
    quiet: bool = False  # stdout is gone: count, print nothing

    def record(self, pending: Pending, status: str, *, message_id: str | None = None,
               error: str | None = None) -> None:
        status = status if status in self.counts else "failed"
        self.counts[status] += 1
        if self.quiet:
            return
        line = {"line": pending.line, "queue": pending.item["queue"],
                "partition": pending.item.get("partition", "Default"),
                "transactionId": pending.item["transactionId"], "messageId": message_id,
                "status": status}
        if error:
            line["error"] = error
        try:
            emit(line)
        except StdoutClosed:
            self.quiet = True
            quiet_stdout()

    def summary(self) -> str:
        return ", ".join(f"{self.counts[s]} {s}" for s in STATUSES)


def strict_json(raw: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise LineError(f"not JSON: {constant} is not a JSON value")

    try:
        return json.loads(raw.decode("utf-8"), parse_constant=refuse)
    except UnicodeDecodeError as exc:
        raise LineError(f"not UTF-8 at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise LineError(f"not JSON: {exc.msg} at column {exc.colno}") from None


def partition_key_at(path: str) -> Callable[[Any], str]:
    """An RFC 9535 JSONPath into the payload, naming each message's partition."""
    import jsonpath_rfc9535

    try:
        query = jsonpath_rfc9535.compile(path)
    except jsonpath_rfc9535.JSONPathError as exc:
        raise click.BadParameter(f"{path!r}: {exc}", param_hint="--partition-key") from None

    def key(payload: Any) -> str:
        nodes = query.find(payload)
        if not nodes:
            raise LineError(f"no value at {path}")
        value = nodes[0].value
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or value == "":
            raise LineError(f"{path} is {json.dumps(value)}, not a partition name")
        return value if isinstance(value, str) else json.dumps(value)

    return key


@attrs.frozen
class Shaper:
    """Turns one input line into a push item."""

    queue: str
    partition: str | None
    key: Callable[[Any], str] | None
    items: bool
    ack_source: bool

    def __call__(self, number: int, raw: bytes) -> Pending:
        value = strict_json(raw)
        item: dict[str, Any]
        if self.ack_source:
            source = _source_message(value)
            # The copy's id is the source message's own: unique, and the same on redelivery.
            item = {"payload": source.get("data"), "transactionId": source["id"],
                    "partition": source.get("partition") or "Default"}
        elif self.items:
            if not isinstance(value, dict) or "payload" not in value:
                raise LineError("a push item is an object with a payload")
            unknown = set(value) - {"payload", "partition", "transactionId", "queue"}
            if unknown:
                raise LineError(f"unknown item field {sorted(unknown)[0]!r}")
            if value.get("queue", self.queue) != self.queue:
                raise LineError(f"the item names queue {value['queue']!r}, not {self.queue!r}")
            item = {k: v for k, v in value.items() if k != "queue"}
            for field in ("partition", "transactionId"):
                if field in item and (not isinstance(item[field], str) or not item[field]):
                    raise LineError(f"{field} must be a non-empty string")
            source = None
        else:
            item, source = {"payload": value}, None
        if self.partition is not None:
            item["partition"] = self.partition
        elif self.key is not None:
            item["partition"] = self.key(item["payload"])
        item.setdefault("transactionId", str(ids.new_id()))
        return Pending(number, {"queue": self.queue, **item}, source)


def _source_message(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LineError("not a message line of `tail --no-ack`")
    missing = [k for k in ("id", "transactionId", "partitionId", "leaseId") if
               not isinstance(value.get(k), str)]
    if missing:
        raise LineError(f"not a message line of `tail --no-ack` (no {missing[0]})")
    if not value["leaseId"]:
        raise LineError("the message has no lease: tail it with --no-ack, not --auto-ack")
    return value


def retry_after(response: Any) -> float:
    try:
        return min(max(float(response.headers.get("retry-after", "1")), 0.0), MAX_RETRY_AFTER)
    except ValueError:
        return 1.0


@attrs.define
class Pusher:
    api: Api
    tally: Tally
    retries: int

    def push(self, batch: Sequence[Pending]) -> None:
        """POST /api/v1/push; 429s and 503s are retried after Retry-After (only the items
        that failed on a full queue, for a 429)."""
        todo, attempt = list(batch), 0
        while todo:
            response = self._send("/api/v1/push", {"items": [p.item for p in todo]}, attempt)
            if response is None:
                attempt += 1
                continue
            results = _json_list(response)
            if response.status_code in (401, 403, 404):
                check(response)
            if response.status_code == 503 or results is None:
                if response.status_code == 503 and attempt < self.retries:
                    delay = retry_after(response)
                    print(f"queen-trio push: the broker is unavailable "
                          f"({error_text(response)}), retrying in {delay:g} s", file=sys.stderr)
                    time.sleep(delay)
                    attempt += 1
                    continue
                for p in todo:
                    self.tally.record(p, "failed", error=error_text(response))
                return
            again = []
            for p, result in zip(todo, results, strict=False):
                retried = (response.status_code == 429 and result.get("status") == "failed"
                           and attempt < self.retries)
                if retried:
                    again.append(p)
                else:
                    self.tally.record(p, result.get("status", "failed"),
                                      message_id=result.get("message_id"),
                                      error=result.get("error"))
            if again:
                delay = retry_after(response)
                print(f"queen-trio push: {len(again)} refused ({again_reason(results)}), "
                      f"retrying in {delay:g} s", file=sys.stderr)
                time.sleep(delay)
                attempt += 1
            todo = again

    def copy(self, batch: Sequence[Pending]) -> None:
        """One transaction: push the batch, ack its sources. A rollback leaves the sources
        leased to their tail, so they come back; nothing half-copied."""
        operations: list[dict[str, Any]] = [{"type": "push", "items": [p.item for p in batch]}]
        for p in batch:
            source = p.source or {}
            operations.append({"type": "ack", "transactionId": source["transactionId"],
                               "partitionId": source["partitionId"], "status": "completed",
                               "consumerGroup": source.get("consumerGroup") or None,
                               "leaseId": source["leaseId"]})
        attempt = 0
        while True:
            response = self._send("/api/v1/transaction", {"operations": operations}, attempt)
            if response is None:
                attempt += 1
                continue
            if response.status_code in (429, 503) and attempt < self.retries:
                time.sleep(retry_after(response))
                attempt += 1
                continue
            break
        if response.status_code in (401, 403, 404):
            check(response)
        reply = response.json() if response.status_code == 200 else {}
        if not reply.get("success"):
            why = reply.get("error") or error_text(response)
            print(f"queen-trio push: lines {batch[0].line}-{batch[-1].line} not copied: {why} "
                  "(the source keeps them)", file=sys.stderr)
            for p in batch:
                self.tally.record(p, "failed", error=why)
            return
        pushed = [r for r in reply.get("results", []) if r.get("type") == "push"]
        for p, result in zip(batch, pushed, strict=False):
            self.tally.record(p, result.get("status") or "failed",
                              message_id=result.get("messageId"), error=result.get("error"))

    def _send(self, path: str, body: Any, attempt: int) -> Any:
        """The reply, or None when the broker could not be reached and a retry is due (the
        transaction ids make the retry safe); past the retries, the `CliError` (6)."""
        try:
            return self.api.send("POST", path, body=body)
        except CliError:
            if attempt >= self.retries:
                raise
            self.api.close()
            time.sleep(min(0.25 * 2**attempt, 5.0))
            return None


def again_reason(results: Sequence[dict[str, Any]]) -> str:
    errors = sorted({r.get("error") or "failed" for r in results if r.get("status") == "failed"})
    return ", ".join(errors)


def _json_list(response: Any) -> list[dict[str, Any]] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, list) else None


@click.command(epilog=examples(
    "echo '{\"orderId\": 1}' | queen-trio push orders",
    "queen-trio push orders --partition-key '$.customer' < orders.ndjson",
    "queen-trio push orders --items < items.ndjson  # lines like {\"payload\": ..., "
    "\"partition\": \"p1\"}",
    "queen-trio tail src --group copy --no-ack -f | queen-trio push dst --ack-source"))
@click.argument("queue")
@click.option("--partition", help="every message to this partition (default: Default)")
@click.option("--partition-key", metavar="JSONPATH",
              help="the partition is the payload's value at this RFC 9535 JSONPath, e.g. "
                   "'$.customer'; a line without it fails")
@click.option("--batch", type=click.IntRange(1, 10000), default=100, show_default=True,
              help="messages per request")
@click.option("--linger-ms", type=click.IntRange(0, 3_600_000), default=100,
              show_default=True, help="send a partial batch after this much idle input")
@click.option("--items", is_flag=True,
              help="each line is a push item {payload, partition?, transactionId?}")
@click.option("--ack-source", is_flag=True,
              help="lines are `tail --no-ack` messages: copy and ack them in one transaction")
@click.option("--retries", type=click.IntRange(0, 1000), default=10, show_default=True,
              help="how often a batch is retried (429, 503, unreachable)")
@connection_options()
def push(connection: Connection, queue: str, partition: str | None, partition_key: str | None,
         batch: int, linger_ms: int, items: bool, ack_source: bool, retries: int) -> int:
    """Push NDJSON from stdin: each line is one payload (or, with --items, one push item).

    Prints one JSON line per message: {line, queue, partition, transactionId, messageId,
    status}, and at the end the counts of queued, duplicate, buffered and failed on stderr.
    A bad line is named on stderr with its number and counts as failed. Exits 1 when
    anything failed."""
    if partition and partition_key:
        raise click.UsageError("--partition and --partition-key exclude each other")
    if items and ack_source:
        raise click.UsageError("--items and --ack-source exclude each other")
    key = partition_key_at(partition_key) if partition_key else None
    shape = Shaper(queue, partition, key, items, ack_source)
    tally = Tally()
    pusher = Pusher(Api(connection), tally, retries)
    send = pusher.copy if ack_source else pusher.push
    pending: list[Pending] = []
    linger = linger_ms / 1000
    reader = Lines(sys.stdin.fileno())

    def flush() -> None:
        if pending:
            batch_now = pending[:]
            pending.clear()
            send(batch_now)

    try:
        with streaming():
            try:
                while (got := reader.next(linger if pending else None)) is not None:
                    if isinstance(got, Idle):
                        flush()
                        continue
                    number, raw = got
                    if not raw.strip():
                        continue
                    try:
                        pending.append(shape(number, raw))
                    except LineError as exc:
                        print(f"queen-trio push: line {number}: {exc}", file=sys.stderr)
                        tally.counts["failed"] += 1
                        continue
                    if len(pending) >= batch:
                        flush()
                flush()
            except (KeyboardInterrupt, Terminated, StdoutClosed) as stop:
                # Stopping: what was read is sent once (with --ack-source a refused ack
                # rolls it back, and the source keeps it), then we go.
                if isinstance(stop, StdoutClosed):
                    tally.quiet = True
                    quiet_stdout()
                pusher.api.close()
                flush()
                raise
    finally:
        print(f"queen-trio push: {tally.summary()}", file=sys.stderr)
    return Exit.REFUSED if tally.counts["failed"] else Exit.OK
