"""Settling deliveries: POST /api/v1/ack, /ack/batch, and lease extension."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from typing import Any, TypedDict

import asyncpg
import attrs
import trio

from .. import wire
from ..errors import BadRequest
from ..storage.database import Database
from ..storage.sql import Q
from .fusion import CallFusion, Fusable, FusionStatistics
from .wakeups import WakeRegistry

STATUSES = ("completed", "success", "failed", "dlq", "retry")
MAX_LEASE_SECONDS = 7 * 24 * 3600


@attrs.frozen
class Ack:
    transaction_id: str
    partition_id: uuid.UUID
    status: str
    lease_id: uuid.UUID | None
    error: str | None


def parse_ack(item: Any, where: str = "") -> Ack:
    if not isinstance(item, dict):
        raise BadRequest(f"acknowledgment{where} must be an object")
    txid = item.get("transactionId")
    if txid is None or txid == "":
        raise BadRequest(f"transactionId is required{where}")
    txid = wire.name(txid, "transactionId", where)
    if item.get("partitionId") in (None, ""):
        raise BadRequest(f"partitionId is required to ensure message uniqueness{where}")
    partition_id = wire.parse_uuid(item["partitionId"], f"partitionId{where}")
    status = item.get("status", "completed")
    if status is None:
        status = "completed"
    if status not in STATUSES:
        raise BadRequest(f"status{where} must be one of {', '.join(STATUSES)}; got {status!r}")
    lease = item.get("leaseId")
    lease_id = None if lease in (None, "") else wire.parse_uuid(lease, f"leaseId{where}")
    error = item.get("error")
    if error is not None:
        if not isinstance(error, str):
            raise BadRequest(f"error{where} must be a string or null")
        wire.text(error, "error", where)
    return Ack(txid, partition_id, status, lease_id, error)


def parse_ack_batch(body: Any) -> tuple[str, list[Ack]]:
    items = wire.require_object(body).get("acknowledgments")
    if not isinstance(items, list):
        raise BadRequest("acknowledgments array is required")
    return (wire.consumer_group(body.get("consumerGroup")),
            [parse_ack(item, f" (item {i})") for i, item in enumerate(items)])


def parse_single_ack(body: Any) -> tuple[str, Ack]:
    return wire.consumer_group(wire.require_object(body).get("consumerGroup")), parse_ack(body)


@attrs.define
class AckRow:
    """One row of `queen.ack_batch` (functions/ack_batch.sql): an ack's outcome (its 1-based
    `item_no`), or, with `released`, a queue whose lease was released with messages pending.
    Not frozen: read once per ack, and a frozen class costs twice as much to build."""

    item_no: int | None
    success: bool | None
    error: str | None
    queue_name: str | None  # None: an ack naming a partition that does not exist
    partition_name: str | None
    lease_released: bool | None
    dlq: bool | None
    released: bool

    @classmethod
    def from_record(cls, row: asyncpg.Record) -> AckRow:
        return cls(item_no=row["item_no"], success=row["success"], error=row["error"],
                   queue_name=row["queue_name"], partition_name=row["partition_name"],
                   lease_released=row["lease_released"], dlq=row["dlq"],
                   released=bool(row["released"]))


class AckResult(TypedDict):
    """One ack's entry in the reply of /ack and /ack/batch."""

    index: int
    transactionId: str
    success: bool | None
    error: str | None
    queueName: str | None
    partitionName: str | None
    leaseReleased: bool | None
    dlq: bool | None


class LeaseReply(TypedDict):
    """The reply of POST /api/v1/lease/:leaseId/extend."""

    leaseId: str
    success: bool
    renewed: int
    newExpiresAt: str | None
    expiresAt: str | None
    error: str | None


@attrs.define(eq=False)
class _AckRequest(Fusable):
    group: str
    acks: list[Ack]
    results: list[AckResult] = attrs.Factory(list)


class AckLane:
    """Concurrent ack requests share one ack_batch call (`fusion.CallFusion`). A request's
    results never depend on its neighbours beyond the order the database applies them in
    (partition id, then offset), which is a valid serial order."""

    def __init__(self, db: Database, wakeups: WakeRegistry, *,
                 deadline_seconds: float = math.inf) -> None:
        self._db = db
        self._wakeups = wakeups
        self.fusion = CallFusion[_AckRequest](self._call, deadline_seconds=deadline_seconds,
                                              hold=db.holding)

    def statistics(self) -> FusionStatistics:
        return self.fusion.statistics()

    async def settle(self, group: str, acks: list[Ack]) -> list[AckResult]:
        """Apply the acks; one result per ack, in request order."""
        if not acks:
            return []
        request = _AckRequest(group, acks)
        await self.fusion.submit(request)
        return request.results

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.fusion.run(task_status=task_status)

    async def _call(self, batch: list[_AckRequest]) -> None:
        rows = await self._db.call(lambda conn: apply_acks(
            conn, [(r.group, a) for r in batch for a in r.acks]))
        _apply_ack_rows(batch, rows, self._wakeups)


async def apply_acks(conn: asyncpg.Connection, acks: list[tuple[str, Ack]]) -> list[AckRow]:
    """One `queen.ack_batch` call for (group, ack) pairs: a row per ack (its 1-based
    item_no), and a `released` row per lease released with messages still pending."""
    rows = await Q.ack_batch.fetch(
        conn, consumer_groups=[g for g, _ in acks], partition_ids=[a.partition_id for _, a in acks],
        transaction_ids=[a.transaction_id for _, a in acks], statuses=[a.status for _, a in acks],
        lease_ids=[a.lease_id for _, a in acks], errors=[a.error for _, a in acks])
    return [AckRow.from_record(row) for row in rows]


def _apply_ack_rows(batch: list[_AckRequest], rows: list[AckRow],
                    wakeups: WakeRegistry) -> None:
    owners: list[tuple[_AckRequest, int]] = [(r, i) for r in batch for i in range(len(r.acks))]
    slots: dict[int, list[AckResult | None]] = {
        id(r): [None] * len(r.acks) for r in batch}
    for row in rows:
        if row.released:
            assert row.queue_name is not None  # the queue of a lease it released
            wakeups.notify(row.queue_name)
            continue
        assert row.item_no is not None  # an ack's row
        request, i = owners[row.item_no - 1]
        slots[id(request)][i] = {
            "index": i,
            "transactionId": request.acks[i].transaction_id,
            "success": row.success,
            "error": row.error,
            "queueName": row.queue_name,
            "partitionName": row.partition_name,
            "leaseReleased": row.lease_released,
            "dlq": row.dlq,
        }
    for request in batch:
        request.results = [r for r in slots[id(request)] if r is not None]


def parse_extend(body: Any) -> int:
    seconds = wire.require_object(body).get("seconds", 60)
    if seconds is None:
        seconds = 60
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise BadRequest("seconds must be an integer")
    if not 1 <= seconds <= MAX_LEASE_SECONDS:
        raise BadRequest(f"seconds must be between 1 and {MAX_LEASE_SECONDS}")
    return seconds


async def extend_lease(db: Database, lease_id: uuid.UUID, seconds: int) -> LeaseReply:
    row = await db.fetchrow(Q.extend_lease, lease_id=lease_id, seconds=seconds)
    assert row is not None
    expires_at: dt.datetime | None = row["expires_at"]
    renewed: int = row["renewed"]
    problem: str | None = row["problem"]
    stamp = None if expires_at is None else wire.format_millis(expires_at)
    return {
        "leaseId": str(lease_id),
        "success": renewed > 0,
        "renewed": renewed,
        "newExpiresAt": stamp,
        "expiresAt": stamp,
        "error": problem,
    }
