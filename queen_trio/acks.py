"""Settling deliveries: POST /api/v1/ack, /ack/batch, and lease extension."""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import trio

from .consume import consumer_group, format_millis
from .database import Database
from .fusion import CallFusion, Fusable
from .push import BadRequest
from .wakeups import WakeRegistry

STATUSES = ("completed", "success", "failed", "dlq", "retry")
ACK_SQL = "SELECT * FROM queen.ack_batch($1, $2, $3, $4, $5, $6)"
EXTEND_SQL = "SELECT * FROM queen.extend_lease($1, $2)"
MAX_LEASE_SECONDS = 7 * 24 * 3600


def parse_uuid(value: Any, name: str) -> uuid.UUID:
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a UUID string")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise BadRequest(f"{name} is not a valid UUID: {value!r}") from None


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
    if not isinstance(txid, str):
        raise BadRequest(f"transactionId must be a string{where}")
    if item.get("partitionId") in (None, ""):
        raise BadRequest(f"partitionId is required to ensure message uniqueness{where}")
    partition_id = parse_uuid(item["partitionId"], f"partitionId{where}")
    status = item.get("status", "completed")
    if status is None:
        status = "completed"
    if status not in STATUSES:
        raise BadRequest(f"status{where} must be one of {', '.join(STATUSES)}; got {status!r}")
    lease = item.get("leaseId")
    lease_id = None if lease in (None, "") else parse_uuid(lease, f"leaseId{where}")
    error = item.get("error")
    if error is not None and not isinstance(error, str):
        raise BadRequest(f"error{where} must be a string or null")
    return Ack(txid, partition_id, status, lease_id, error)


def parse_ack_batch(body: Any) -> tuple[str, list[Ack]]:
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object")
    items = body.get("acknowledgments")
    if not isinstance(items, list):
        raise BadRequest("acknowledgments array is required")
    group = body.get("consumerGroup")
    if group is not None and not isinstance(group, str):
        raise BadRequest("consumerGroup must be a string or null")
    return consumer_group(group), [parse_ack(item, f" (item {i})") for i, item in enumerate(items)]


def parse_single_ack(body: Any) -> tuple[str, Ack]:
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object")
    group = body.get("consumerGroup")
    if group is not None and not isinstance(group, str):
        raise BadRequest("consumerGroup must be a string or null")
    return consumer_group(group), parse_ack(body)


@attrs.define(eq=False)
class _AckRequest(Fusable):
    group: str
    acks: list[Ack]
    results: list[dict[str, Any]] = attrs.Factory(list)


class AckLane:
    """Concurrent ack requests share one ack_batch call (`fusion.CallFusion`). A request's
    results never depend on its neighbours beyond the order the database applies them in
    (partition id, then offset), which is a valid serial order."""

    def __init__(self, db: Database, wakeups: WakeRegistry) -> None:
        self._db = db
        self._wakeups = wakeups
        self.fusion = CallFusion[_AckRequest](self._call)

    async def settle(self, group: str, acks: list[Ack]) -> list[dict[str, Any]]:
        """Apply the acks; one result per ack, in request order."""
        if not acks:
            return []
        request = _AckRequest(group, acks)
        await self.fusion.submit(request)
        return request.results

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.fusion.run(task_status=task_status)

    async def _call(self, batch: list[_AckRequest]) -> None:
        rows = await self._db.fetch(ACK_SQL, *_ack_arguments(batch))
        _apply_ack_rows(batch, rows, self._wakeups)


def _ack_arguments(batch: list[_AckRequest]) -> tuple[list[Any], ...]:
    acks = [(r.group, a) for r in batch for a in r.acks]
    return ([g for g, _ in acks], [a.partition_id for _, a in acks],
            [a.transaction_id for _, a in acks], [a.status for _, a in acks],
            [a.lease_id for _, a in acks], [a.error for _, a in acks])


def _apply_ack_rows(batch: list[_AckRequest], rows: list[Any], wakeups: WakeRegistry) -> None:
    owners: list[tuple[_AckRequest, int]] = [(r, i) for r in batch for i in range(len(r.acks))]
    slots: dict[int, list[dict[str, Any] | None]] = {
        id(r): [None] * len(r.acks) for r in batch}
    for row in rows:
        if row["released"]:
            wakeups.notify(row["queue_name"])
            continue
        request, i = owners[row["item_no"] - 1]
        slots[id(request)][i] = {
            "index": i,
            "transactionId": request.acks[i].transaction_id,
            "success": row["success"],
            "error": row["error"],
            "queueName": row["queue_name"],
            "partitionName": row["partition_name"],
            "leaseReleased": row["lease_released"],
            "dlq": row["dlq"],
        }
    for request in batch:
        request.results = [r for r in slots[id(request)] if r is not None]


def parse_extend(body: Any) -> int:
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object")
    seconds = body.get("seconds", 60)
    if seconds is None:
        seconds = 60
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise BadRequest("seconds must be an integer")
    if not 1 <= seconds <= MAX_LEASE_SECONDS:
        raise BadRequest(f"seconds must be between 1 and {MAX_LEASE_SECONDS}")
    return seconds


async def extend_lease(db: Database, lease_id: uuid.UUID, seconds: int) -> dict[str, Any]:
    row = await db.fetchrow(EXTEND_SQL, lease_id, seconds)
    assert row is not None
    stamp = None if row["expires_at"] is None else format_millis(row["expires_at"])
    return {
        "leaseId": str(lease_id),
        "success": row["renewed"] > 0,
        "renewed": row["renewed"],
        "newExpiresAt": stamp,
        "expiresAt": stamp,
        "error": row["problem"],
    }
