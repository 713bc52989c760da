"""Reading: `pop`, `tail` and `ack`. Messages go out as NDJSON, one flushed line each, in the
pop reply's shape (contract §14) plus `queue`; whatever was not printed is given back."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import click

from ..exits import Exit
from .api import Api, segment
from .connection import Connection, connection_options, request_options
from .failures import CliError
from .help import examples
from .output import QUEUE_MODE, Output, col
from .streams import Idle, Lines, emit, streaming
from .times import TIME, iso

THROWAWAY_PREFIX = "queen-trio-tail-"
ACK_STATUSES = ("completed", "failed", "retry", "dlq")
FOLLOW_POLL_SECONDS = 30.0


def throwaway_group() -> str:
    """`queen-trio-tail-<host>-<pid>-<random>`: whose it is, and unique."""
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname().split(".")[0]) or "host"
    return f"{THROWAWAY_PREFIX}{host}-{os.getpid()}-{secrets.token_hex(3)}"


def is_throwaway(group: str) -> bool:
    return group.startswith(THROWAWAY_PREFIX)


def pop_path(queue: str | None, partition: str | None) -> str:
    if queue is None:
        return "/api/v1/pop"
    if partition is None:
        return f"/api/v1/pop/queue/{segment(queue)}"
    return f"/api/v1/pop/queue/{segment(queue)}/partition/{segment(partition)}"


def message_lines(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply's messages, each with its `queue` (namespace pops already have one)."""
    return [m if "queue" in m else {**m, "queue": reply.get("queue")}
            for m in reply.get("messages", [])]


def settle(api: Api, messages: Iterable[dict[str, Any]], status: str,
           error: str | None = None) -> list[dict[str, Any]]:
    """Ack `messages` with `status`, one call per consumer group; the broker's results in
    order. Leaseless (autoAck) messages have nothing to settle."""
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in messages:
        if m.get("leaseId") == "":
            continue
        by_group[m.get("consumerGroup") or QUEUE_MODE].append(
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
             "leaseId": m.get("leaseId") or None, "status": status, "error": error})
    results: list[dict[str, Any]] = []
    for group, acks in by_group.items():
        results.extend(api.post("/api/v1/ack/batch",
                                {"consumerGroup": group, "acknowledgments": acks}))
    return results


def give_back(api: Api, messages: Sequence[dict[str, Any]]) -> None:
    """Nack as `retry` what the reader never got: each lease is released and the delivery
    comes back at once, without counting as a failure. Best effort, on the way out."""
    if not messages:
        return
    api.close()  # an interrupted request may have left the connection half-used
    try:
        settle(api, messages, "retry")
    except CliError as exc:
        print(f"queen-trio: could not give back {len(messages)} messages: {exc}",
              file=sys.stderr)


def deliver(api: Api, messages: Sequence[dict[str, Any]], *, ack_after: bool) -> None:
    """Print each message; `ack_after`: ack the printed ones `completed`. Interrupted (the
    reader went away, Ctrl-C, SIGTERM), the printed ones are still acked with `ack_after` and
    the rest are given back."""
    printed = 0
    try:
        for message in messages:
            emit(message)
            printed += 1
        refused = ([r for r in settle(api, messages, "completed") if not r.get("success")]
                   if ack_after else [])
    except BaseException:
        if ack_after and printed:
            api.close()
            try:  # again if need be: an ack already applied is refused, harmlessly
                settle(api, messages[:printed], "completed")
            except CliError:
                pass  # the give-back below releases the lease: they come back
        give_back(api, messages[printed:])
        raise
    if refused:
        print(f"queen-trio tail: {len(refused)} acks refused ({refused[0].get('error')}): "
              "those messages will be delivered again", file=sys.stderr)


def subscription(mode: str | None, start: Any) -> dict[str, Any]:
    return {"subscriptionMode": mode, "subscriptionFrom": None if start is None else iso(start)}


# -- pop ---------------------------------------------------------------------------------------

@click.command(epilog=examples(
    "queen-trio pop orders -n 10 --group billing  # up to 10 messages, leased to billing",
    "queen-trio pop orders --wait 30 --auto-ack  # wait up to 30 s; consumed by the pop",
    "queen-trio pop --namespace shop --task email",
    "queen-trio pop prices --group ui --conflation -n 10  # each partition's newest only",
    "queen-trio pop orders | queen-trio ack --batch -  # pop, then ack what was printed"))
@click.argument("queue", required=False)
@click.option("-n", "--batch", type=click.IntRange(1, 10000), default=1, show_default=True,
              help="how many messages at most")
@click.option("--group", help="the consumer group (default: queue mode)")
@click.option("--partition", help="pop this partition only")
@click.option("--wait", type=click.FloatRange(0, 3600), default=0.0, metavar="S",
              help="long poll: wait up to S seconds for a message (default 0: answer at once)")
@click.option("--auto-ack", is_flag=True, help="consumed by the pop itself (at most once)")
@click.option("--namespace", help="pop any queue of this namespace")
@click.option("--task", help="pop any queue of this task")
@click.option("--subscription-mode", type=click.Choice(["all", "new"]),
              help="where a group starts on its first pop (default: the broker's, all)")
@click.option("--subscription-from", type=TIME, help="a group's first pop starts at TIME")
@click.option("--conflation/--no-conflation", default=None,
              help="state the group's delivery policy: each partition's newest message only, "
                   "or every message; its first stated policy is kept (default: state none)")
@connection_options()
def pop(connection: Connection, queue: str | None, batch: int, group: str | None,
        partition: str | None, wait: float, auto_ack: bool, namespace: str | None,
        task: str | None, subscription_mode: str | None, subscription_from: Any,
        conflation: bool | None) -> int:
    """Pop messages and print them, one JSON line each (the pop reply's shape plus `queue`).

    Leased messages stay leased: ack them with `queen-trio ack`. Exits 4 when there was
    nothing to pop. When stdout closes or Ctrl-C comes before every line is printed, the
    unprinted messages are given back (nack as retry)."""
    if (queue is None) == (namespace is None and task is None):
        raise click.UsageError("give a QUEUE, or --namespace and/or --task")
    if partition and queue is None:
        raise click.UsageError("--partition needs a QUEUE")
    api = Api(connection)
    params = {"batch": batch, "consumerGroup": group, "autoAck": auto_ack or None,
              "namespace": namespace, "task": task, "conflation": conflation,
              **subscription(subscription_mode, subscription_from)}
    if wait:
        params |= {"wait": True, "timeout": int(wait * 1000)}
    with streaming():
        reply = api.call("GET", pop_path(queue, partition), params=params, wait=wait)
        if reply is not None and reply.get("conflationConflict"):
            print(f"queen-trio pop: group {group} keeps its stored policy (conflation "
                  f"{'on' if reply.get('conflation') else 'off'}); delete the group to change "
                  "it", file=sys.stderr)
        if reply is None or not reply.get("messages"):  # a conflating pop's empty 200 too
            if queue is not None:  # a pop never creates a queue: say so when there is none
                known = api.send("GET", f"/api/v1/resources/queues/{segment(queue)}")
                if known.status_code == 404:
                    raise CliError(f"queue {queue} not found", Exit.NOT_FOUND)
            if sys.stdout.isatty():  # a person, not a pipeline: an empty answer says so
                print("queen-trio pop: no message", file=sys.stderr)
            return Exit.EMPTY
        deliver(api, message_lines(reply), ack_after=False)
    return Exit.OK


# -- tail --------------------------------------------------------------------------------------

@click.command(epilog=examples(
    "queen-trio tail orders -f  # new messages as they come, through a throwaway group",
    "queen-trio tail orders --group audit  # drain what group audit has left, then exit",
    "queen-trio tail src --group copy --auto-ack -f | jq -c '.data' | queen-trio push dst",
    "queen-trio tail src --group copy --no-ack -f | queen-trio push dst --ack-source"))
@click.argument("queue")
@click.option("-f", "--follow", is_flag=True, help="keep waiting for new messages")
@click.option("--group", help="read as this consumer group (default: a throwaway group "
                              "subscribed to new messages, deleted on exit)")
@click.option("--from-start", is_flag=True,
              help="the throwaway group starts at the oldest message the queue holds, not at "
                   "new ones (other groups' cursors do not move)")
@click.option("--queue-mode", is_flag=True, help="read in queue mode instead of a group")
@click.option("--auto-ack", "ack_mode", flag_value="auto",
              help="each pop consumes its messages (at most once)")
@click.option("--no-ack", "ack_mode", flag_value="none",
              help="leave the messages leased, for `ack --batch -` or `push --ack-source`")
@click.option("-n", "--batch", type=click.IntRange(1, 10000), default=100, show_default=True,
              help="messages per pop")
@click.option("--wait", type=click.FloatRange(0.1, 3600), metavar="S",
              help="each long poll waits up to S seconds (default: 1, or 30 with -f); "
                   "without -f an empty one ends the tail")
@click.option("--subscription-mode", type=click.Choice(["all", "new"]),
              help="where --group starts on its first pop")
@click.option("--subscription-from", type=TIME, help="--group's first pop starts at TIME")
@connection_options()
def tail(connection: Connection, queue: str, follow: bool, group: str | None,
         from_start: bool, queue_mode: bool, ack_mode: str | None, batch: int,
         wait: float | None, subscription_mode: str | None, subscription_from: Any) -> int:
    """Print a queue's messages as they are popped, one JSON line each, using long polls.

    By default each batch is acked (completed) once its lines are flushed. Without -f the
    tail ends at the first empty pop. Without --group it reads through a throwaway group
    `queen-trio-tail-<host>-<pid>-<random>` subscribed to new messages (with --from-start, to
    everything the queue holds), deleted on every exit
    the CLI can catch (a killed tail leaves it behind: see `queen-trio group list`). On SIGPIPE,
    Ctrl-C or SIGTERM the unprinted messages are given back (nack as retry)."""
    if group and queue_mode:
        raise click.UsageError("--group and --queue-mode exclude each other")
    throwaway = group is None and not queue_mode
    if throwaway and (subscription_mode or subscription_from):
        raise click.UsageError("a throwaway group starts at new messages, or with --from-start "
                               "at the oldest: give --group for another start")
    if from_start and not throwaway:
        raise click.UsageError("--from-start is the throwaway group's: with --group, use "
                               "--subscription-mode all")
    name = QUEUE_MODE if queue_mode else (group or throwaway_group())
    poll = wait if wait is not None else (FOLLOW_POLL_SECONDS if follow else 1.0)
    params = {"batch": batch, "partitions": 10, "wait": True, "timeout": int(poll * 1000),
              "consumerGroup": name, "autoAck": ack_mode == "auto" or None,
              **(subscription("all" if from_start else "new", None) if throwaway
                 else subscription(subscription_mode, subscription_from))}
    api = Api(connection)
    # --no-ack: the latest delivery of each partition, which the reader may not have settled
    # yet (a newer pop of a partition means its previous lease ended).
    leased: dict[str, list[dict[str, Any]]] = {}
    with streaming():
        try:
            while True:
                reply = api.call("GET", pop_path(queue, None), params=params, wait=poll)
                if reply is None:
                    if follow:
                        continue
                    return Exit.OK
                delivery = message_lines(reply)
                if ack_mode == "none":
                    for m in delivery:
                        leased[m["partitionId"]] = []
                    for m in delivery:
                        leased[m["partitionId"]].append(m)
                deliver(api, delivery, ack_after=ack_mode is None)
        except BaseException:
            # Stopped (the reader went away, Ctrl-C, SIGTERM): with --no-ack nobody will
            # settle what is still leased to us, so it goes back now, not at lease expiry.
            # Messages the reader did settle are refused by the broker, harmlessly.
            if leased:
                give_back(api, [m for ms in leased.values() for m in ms])
            raise
        finally:
            if throwaway:
                api.close()
                try:
                    api.delete(f"/api/v1/consumer-groups/{segment(name)}", deleteMetadata=True)
                except CliError as exc:
                    print(f"queen-trio tail: could not delete the throwaway group {name}: "
                          f"{exc}", file=sys.stderr)


# -- ack ---------------------------------------------------------------------------------------

ACK_COLUMNS = [col("TRANSACTION", "transactionId"), col("SUCCESS", "success"),
               col("ERROR", "error"), col("QUEUE", "queueName", wide=True),
               col("PARTITION", "partitionName", wide=True), col("DLQ", "dlq", wide=True)]


@click.command(epilog=examples(
    "queen-trio ack order-8891 --partition-id 0190... --lease 0190... --group billing",
    "queen-trio ack order-8891 --partition-id 0190... --lease 0190... --status failed "
    "--error 'timeout'",
    "queen-trio pop orders -n 10 --group billing | queen-trio ack --batch - --group billing"))
@click.argument("transaction_id", required=False)
@click.option("--partition-id", help="the message's partitionId")
@click.option("--lease", help="the leaseId of the pop that delivered it")
@click.option("--group", help="the consumer group (default: queue mode, or each line's)")
@click.option("--status", type=click.Choice(ACK_STATUSES), default="completed",
              show_default=True, help="completed, failed (counts as a failed delivery), "
                                      "retry (comes back at once) or dlq")
@click.option("--error", "error_text", metavar="TEXT", help="why, for failed and dlq")
@click.option("--batch", "batch", type=click.File("rb"), metavar="FILE",
              help="ack every message line that pop or tail printed ('-': stdin)")
@request_options()
def ack(connection: Connection, out: Output, transaction_id: str | None,
        partition_id: str | None, lease: str | None, group: str | None, status: str,
        error_text: str | None, batch: Any) -> int:
    """Acknowledge one message, or every message line of a file or stdin (--batch -).

    Exits 1 when the broker refused an ack (the reason is in its ERROR)."""
    if batch is not None:
        if transaction_id or partition_id or lease:
            raise click.UsageError("--batch takes the messages from its lines only")
        messages, bad = read_message_lines(batch, "ack")
        if group:
            messages = [{**m, "consumerGroup": group} for m in messages]
    else:
        if not (transaction_id and partition_id):
            raise click.UsageError("give TRANSACTION_ID and --partition-id, or --batch -")
        messages, bad = [{"transactionId": transaction_id, "partitionId": partition_id,
                          "leaseId": lease, "consumerGroup": group or QUEUE_MODE}], 0
    results = settle(Api(connection), messages, status, error_text) if messages else []
    out.rows(results, ACK_COLUMNS, name="transactionId")
    refused = [r for r in results if not r.get("success")]
    if refused:
        raise CliError(f"{len(refused)} of {len(results)} acks refused: "
                       f"{refused[0].get('error')}")
    if bad:
        raise CliError(f"{bad} lines were not messages (named above)")
    return Exit.OK


def read_message_lines(source: Any, command: str) -> tuple[list[dict[str, Any]], int]:
    """The message lines of a file (pop and tail output), and how many lines were not
    messages (each named on stderr with its number)."""
    messages, bad = [], 0
    reader = Lines(source.fileno())
    while (got := reader.next(None)) is not None:
        if isinstance(got, Idle):  # no timeout: never idle
            continue
        number, raw = got
        if not raw.strip():
            continue
        try:
            message = json.loads(raw)
            if not isinstance(message, dict) or not all(
                    isinstance(message.get(k), str) for k in ("transactionId", "partitionId")):
                raise ValueError("not a message line (transactionId and partitionId needed)")
        except ValueError as exc:
            print(f"queen-trio {command}: line {number}: {exc}", file=sys.stderr)
            bad += 1
            continue
        messages.append(message)
    return messages, bad
