"""Pops: parameters, the claim, the reply (payload bytes spliced verbatim), long polling."""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
import msgspec
import trio

from .. import ids, wire
from ..errors import BadRequest
from ..settings import Settings
from ..storage import frames as framing
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q
from ..wire import QUEUE_MODE, query_bool, query_int
from .fusion import CallFusion, Fusable, FusionStatistics
from .wakeups import WakeRegistry

MAX_BATCH = 10_000
MAX_PARTITIONS = 1_000
MAX_TIMEOUT_MS = 3_600_000

_START_MODES = {"": "all", "all": "all", "from_beginning": "all",
                "new": "new", "new-only": "new", "now": "new"}


@attrs.frozen
class ConsumerStatistics:
    joined_groups: int  # (queue, group) pairs known to have joined: their claims fuse
    claims: FusionStatistics


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
    group = wire.consumer_group(query.get("consumerGroup"))
    mode_text = query.get("subscriptionMode", settings.default_subscription_mode)
    start_from_text = query.get("subscriptionFrom") or None
    start_mode = _START_MODES.get(mode_text.lower())
    start_from = None
    if start_mode is None:
        # An ISO timestamp is also accepted in subscriptionMode.
        start_from, start_mode = wire.parse_timestamp(mode_text, "subscriptionMode"), "from"
    if start_from_text is not None:
        if start_from_text.lower() == "now":
            start_mode = "new"
        else:
            start_from, start_mode = (wire.parse_timestamp(start_from_text, "subscriptionFrom"),
                                      "from")
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


@attrs.define(eq=False)
class _ClaimRequest(Fusable):
    """One queue's claim within a pop attempt: the pop_claim arguments, and its rows."""

    args: dict[str, Any]
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
        self._joined: set[tuple[str | None, str]] = set()

    def statistics(self) -> ConsumerStatistics:
        return ConsumerStatistics(joined_groups=len(self._joined),
                                  claims=self.claims.statistics())

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.claims.run(task_status=task_status)

    async def _claim_many(self, batch: list[_ClaimRequest]) -> None:
        def column(key: str) -> list[Any]:
            return [request.args[key] for request in batch]

        rows = await self._db.fetch(
            Q.pop_many, queues=column("queue"), partitions=column("partition"),
            consumer_groups=column("consumer_group"), batches=column("batch"),
            max_partitions=column("max_partitions"), lease_ids=column("lease_id"),
            auto_acks=column("auto_ack"), start_modes=column("start_mode"),
            start_froms=column("start_from"))
        for row in rows:
            batch[row["request_no"] - 1].rows.append(row)

    async def _claim(self, req: PopRequest, lease_id: Any) -> list[Any]:
        """The claim rows of a queue pop: fused with other pops once the group has joined."""
        args = {"queue": req.queue, "partition": req.partition, "consumer_group": req.group,
                "batch": req.batch, "max_partitions": req.partitions, "lease_id": lease_id,
                "auto_ack": req.auto_ack, "start_mode": req.start_mode,
                "start_from": req.start_from}
        key = (req.queue, req.group)
        if key not in self._joined:
            rows = await self._db.fetch(Q.pop_claim, **args)
            if rows:  # the queue exists, so the group has joined it
                self._joined.add(key)
            return rows
        request = _ClaimRequest(args)
        await self.claims.submit(request)
        return request.rows

    async def _claim_namespace(self, req: PopRequest, lease_id: Any) -> list[Any]:
        """The claim rows of a namespace/task pop, each naming its queue: one round trip."""
        return await self._db.fetch(
            Q.pop_namespace, namespace=req.namespace, task=req.task, consumer_group=req.group,
            batch=req.batch, max_partitions=req.partitions, lease_id=lease_id,
            auto_ack=req.auto_ack, start_mode=req.start_mode, start_from=req.start_from)

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
            rows = await self._claim(req, lease_id)
            runs = [(req.queue, row) for row in rows]
        else:
            runs = [(row["queue_name"], row) for row in await self._claim_namespace(req, lease_id)]
        messages: list[dict[str, Any]] = []
        claimed: list[_Claimed] = []
        self._decode(runs, req, "" if req.auto_ack else str(lease_id), claimed, messages)
        if not messages:
            checks = [row["next_check_at"] for _, row in runs if row["next_check_at"] is not None]
            return None, min(checks, default=None)
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

    def _decode(self, runs: list[tuple[str, Any]], req: PopRequest, lease: str,
                claimed: list[_Claimed], out: list[dict[str, Any]]) -> None:
        """The reply's messages, spliced from the claimed runs of frames."""
        seen: set[str] = set()
        with_queue = req.queue is None
        for queue, row in runs:
            if row["partition_id"] is None:
                continue
            pid = str(row["partition_id"])
            if pid not in seen:
                seen.add(pid)
                claimed.append(_Claimed(queue, pid, row["partition_name"]))
            created = wire.format_micros(row["created_at"])
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
