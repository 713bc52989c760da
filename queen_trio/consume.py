"""Pops: parameters, the claim, the reply (payload bytes spliced verbatim), long polling."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import attrs
import msgspec
import trio

from . import frames as framing
from . import ids
from .database import Database
from .encryption import PayloadCipher
from .fusion import CallFusion, Fusable
from .push import BadRequest
from .settings import Settings
from .wakeups import WakeRegistry

QUEUE_MODE = "__QUEUE_MODE__"
MAX_BATCH = 10_000
MAX_PARTITIONS = 1_000
MAX_TIMEOUT_MS = 3_600_000
POP_SQL = "SELECT * FROM queen.pop_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)"
POP_MANY_SQL = "SELECT * FROM queen.pop_many($1, $2, $3, $4, $5, $6, $7, $8, $9)"
NAMESPACE_QUEUES_SQL = """
SELECT q.name FROM queen.queues q
 WHERE ($1::text IS NULL OR q.namespace = $1) AND ($2::text IS NULL OR q.task = $2)
 ORDER BY q.priority DESC,
          (SELECT min(cs.head_at) FROM queen.consumer_state cs
            WHERE cs.queue_id = q.id AND cs.consumer_group = $3) NULLS LAST,
          q.name
"""

_START_MODES = {"": "all", "all": "all", "from_beginning": "all",
                "new": "new", "new-only": "new", "now": "new"}
_TRUE, _FALSE = ("true", "1"), ("false", "0")


def query_bool(query: dict[str, str], name: str, default: bool) -> bool:
    raw = query.get(name)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise BadRequest(f"{name} must be true, false, 1 or 0")


def query_int(query: dict[str, str], name: str, default: int, *, minimum: int,
              maximum: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"-?\d+", raw.strip()):
        raise BadRequest(f"{name} must be an integer")
    value = int(raw)
    if not minimum <= value <= maximum:
        raise BadRequest(f"{name} must be between {minimum} and {maximum}")
    return value


def parse_timestamp(text: str, name: str) -> dt.datetime:
    candidate = text.strip()
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(candidate)
    except ValueError:
        raise BadRequest(f"{name} is not an ISO-8601 timestamp: {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed


def consumer_group(value: str | None) -> str:
    """`consumerGroup` absent or empty is queue mode (DECISIONS: Wire)."""
    if value is None or value == "":
        return QUEUE_MODE
    if len(value) > 255 or "\x00" in value:
        raise BadRequest("consumerGroup must be at most 255 characters, without NUL")
    return value


@attrs.frozen
class PopRequest:
    queue: str | None
    partition: str | None
    namespace: str | None
    task: str | None
    group: str
    batch: int
    partitions: int
    wait: bool
    timeout_ms: int
    auto_ack: bool
    start_mode: str
    start_from: dt.datetime | None
    autopilot: bool


def parse_pop(query: dict[str, str], settings: Settings, *, queue: str | None = None,
              partition: str | None = None) -> PopRequest:
    namespace = query.get("namespace") or None
    task = query.get("task") or None
    if queue is None and namespace is None and task is None:
        raise BadRequest("namespace or task is required")
    autopilot = query_bool(query, "autopilot", False)
    batch_given = "batch" in query
    batch = query_int(query, "batch", settings.default_batch_size, minimum=1, maximum=MAX_BATCH)
    partitions_given = "partitions" in query
    partitions = query_int(query, "partitions", 1, minimum=1, maximum=MAX_PARTITIONS)
    if autopilot:
        # The broker sizes what the client left out (DECISIONS: autopilot).
        if not batch_given:
            batch = 100
        if not partitions_given and partition is None:
            partitions = 10
    if partition is not None:
        partitions = 1
    group = consumer_group(query.get("consumerGroup"))
    mode_text = query.get("subscriptionMode", settings.default_subscription_mode)
    start_from_text = query.get("subscriptionFrom") or None
    start_mode = _START_MODES.get(mode_text.lower())
    start_from = None
    if start_mode is None:
        # An ISO timestamp is also accepted in subscriptionMode.
        start_from, start_mode = parse_timestamp(mode_text, "subscriptionMode"), "from"
    if start_from_text is not None:
        if start_from_text.lower() == "now":
            start_mode = "new"
        else:
            start_from, start_mode = parse_timestamp(start_from_text, "subscriptionFrom"), "from"
    if group == QUEUE_MODE:
        start_mode, start_from = "all", None  # queue mode always starts at the beginning
    return PopRequest(
        queue=queue, partition=partition, namespace=namespace, task=task, group=group,
        batch=batch, partitions=partitions,
        wait=query_bool(query, "wait", False),
        timeout_ms=query_int(query, "timeout", settings.default_timeout_ms, minimum=0,
                             maximum=MAX_TIMEOUT_MS),
        auto_ack=query_bool(query, "autoAck", False),
        start_mode=start_mode, start_from=start_from, autopilot=autopilot,
    )


def format_created_at(value: dt.datetime) -> str:
    """Pop `createdAt`: UTC with microseconds."""
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_millis(value: dt.datetime) -> str:
    """Every other timestamp: UTC with milliseconds."""
    return format_created_at(value)[:-4] + "Z"


@attrs.define(eq=False)
class _ClaimRequest(Fusable):
    """One queue's claim within a pop attempt: the pop_claim arguments, and its rows."""

    args: tuple[Any, ...]
    rows: list[Any] = attrs.Factory(list)


@attrs.define
class _Claimed:
    queue: str
    partition_id: str
    partition: str


class Consumer:
    def __init__(self, db: Database, cipher: PayloadCipher, wakeups: WakeRegistry,
                 settings: Settings) -> None:
        self._db = db
        self._cipher = cipher
        self._wakeups = wakeups
        self._settings = settings
        # Claims of groups that joined their queue share pop_many calls; a group's first
        # contact (it may lock the queue row to join) goes alone through pop_claim.
        self.claims = CallFusion[_ClaimRequest](self._claim_many)
        self._joined: set[tuple[str, str]] = set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.claims.run(task_status=task_status)

    async def _claim_many(self, batch: list[_ClaimRequest]) -> None:
        columns = list(zip(*(request.args for request in batch), strict=True))
        rows = await self._db.fetch(POP_MANY_SQL, *columns)
        for row in rows:
            batch[row["request_no"] - 1].rows.append(row)

    async def _claim(self, *args: Any) -> list[Any]:
        queue, group = args[0], args[2]
        if (queue, group) not in self._joined:
            rows = await self._db.fetch(POP_SQL, *args)
            if rows:  # the queue exists, so the group has joined it
                self._joined.add((queue, group))
            return rows
        request = _ClaimRequest(args)
        await self.claims.submit(request)
        return request.rows

    def _backoff_seconds(self, empty_checks: int) -> float:
        s = self._settings
        ms: float
        if empty_checks <= s.pop_wait_backoff_threshold:
            ms = s.pop_wait_initial_interval_ms
        else:
            ms = s.pop_wait_initial_interval_ms * empty_checks * s.pop_wait_backoff_multiplier
        return min(ms, s.pop_wait_max_interval_ms) / 1000

    async def pop(self, req: PopRequest) -> dict[str, Any] | None:
        """The reply object, or None for 204. Parks while `wait` and nothing is deliverable."""
        deadline = trio.current_time() + req.timeout_ms / 1000
        empty_checks = 0
        while True:
            wake = self._wakeups.event(req.queue)
            reply, next_check = await self._attempt(req)
            if reply is not None or not req.wait:
                return reply
            now = trio.current_time()
            if now >= deadline:
                return None
            empty_checks += 1
            park = self._backoff_seconds(empty_checks)
            if next_check is not None:
                until = (next_check - dt.datetime.now(dt.timezone.utc)).total_seconds()
                # Wake exactly at the earliest deadline; the SQL cut decides, never this timer.
                park = min(park, max(until + 0.001, 0.0))
            with trio.move_on_at(min(deadline, now + park)):
                await wake.wait()

    async def _attempt(self, req: PopRequest) -> tuple[dict[str, Any] | None, dt.datetime | None]:
        lease_id = ids.new_id()
        if req.queue is not None:
            queues = [req.queue]
        else:
            rows = await self._db.fetch(NAMESPACE_QUEUES_SQL, req.namespace, req.task, req.group)
            queues = [r["name"] for r in rows]
        messages: list[dict[str, Any]] = []
        claimed: list[_Claimed] = []
        next_check: dt.datetime | None = None
        remaining = req.batch
        for queue in queues:
            rows = await self._claim(
                queue, req.partition, req.group, remaining, req.partitions,
                lease_id, req.auto_ack, req.start_mode, req.start_from)
            got = self._decode(queue, rows, req, "" if req.auto_ack else str(lease_id),
                               claimed, messages)
            if got == 0:
                for row in rows:
                    check = row["next_check_at"]
                    if check is not None and (next_check is None or check < next_check):
                        next_check = check
            remaining -= got
            if remaining <= 0:
                break
        if not messages:
            return None, next_check
        first = claimed[0]
        reply: dict[str, Any] = {
            "success": True,
            "queue": first.queue,
            "partition": first.partition,
            "partitionId": first.partition_id,
            "leaseId": "" if req.auto_ack else str(lease_id),
            "consumerGroup": req.group,
            "messages": messages,
            "partitionsClaimed": len(claimed),
        }
        if req.autopilot:
            reply["autopilot"] = {"partitions": req.partitions, "batch": req.batch,
                                  "waitMs": 0 if len(messages) else 100}
        return reply, None

    def _decode(self, queue: str, rows: list[Any], req: PopRequest, lease: str,
                claimed: list[_Claimed], out: list[dict[str, Any]]) -> int:
        count = 0
        seen: set[str] = {c.partition_id for c in claimed}
        with_queue = req.queue is None
        for row in rows:
            if row["partition_id"] is None:
                continue
            pid = str(row["partition_id"])
            if pid not in seen:
                seen.add(pid)
                claimed.append(_Claimed(queue, pid, row["partition_name"]))
            created = format_created_at(row["created_at"])
            name, group, decrypt = row["partition_name"], req.group, self._cipher.decrypt
            chosen = framing.fields_slice(row["frames"], row["skip_frames"], row["take_frames"])
            for message_id, txid, trace, sub, encrypted, payload in chosen:
                message: dict[str, Any] = {
                    "id": message_id,
                    "transactionId": txid,
                    "traceId": trace,
                    "data": msgspec.Raw(decrypt(payload) if encrypted else payload),
                    "producerSub": sub,
                    "createdAt": created,
                    "partitionId": pid,
                    "partition": name,
                    "leaseId": lease,
                    "consumerGroup": group,
                }
                if with_queue:
                    message["queue"] = queue
                out.append(message)
                count += 1
        return count
