"""Timers: schedule, reschedule, cancel, peek and list (docs/timers.md).

Every op of one call is applied in one PostgreSQL transaction by `queen.timers_apply`, in
(queue, timerKey) byte order; the HTTP status reports how the call went, never the verdict
(`scheduled`, `rescheduled`, `cancelled`, `absent`, `too_late` are all 200). The sweeper
(timers/sweeper.py) fires them.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import asyncpg
import attrs

from .. import wire
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q
from .ops import TimerOp, parse_ops

LIST_DEFAULT_LIMIT = 100
LIST_MAX_LIMIT = 1000


@attrs.frozen
class TimerStatistics:
    scheduled: int
    rescheduled: int
    cancelled: int
    too_late: int
    absent: int


@attrs.frozen
class TimerRiders:
    """A transaction's `timers` rider, validated before the transaction starts: its ops, who
    sent them, and the cipher that encrypts a payload whose queue encrypts."""

    ops: list[TimerOp]
    producer_sub: str | None
    cipher: PayloadCipher
    counts: dict[str, int] | None = None  # the owning service's counters, when it has them


def _stamp(value: dt.datetime | None) -> str | None:
    return None if value is None else wire.format_micros(value)


def _result(op: TimerOp, row: Any) -> dict[str, Any]:
    status = row["status"]
    out: dict[str, Any] = {"ok": status in ("scheduled", "rescheduled", "cancelled"),
                           "status": status, "queue": op.queue, "timerKey": op.timer_key}
    if status in ("scheduled", "rescheduled"):
        out.update(txn=row["txn"], messageId=str(row["message_id"]),
                   deliverAt=_stamp(row["deliver_at"]), partition=op.partition)
    elif status in ("cancelled", "absent"):
        out["txn"] = row["txn"]
    return out


async def apply_timer_riders(conn: asyncpg.Connection, riders: TimerRiders) -> list[dict[str, Any]]:
    """Apply timer ops inside the caller's transaction (a transaction's `timers` rider, or
    a standalone call); one result per op, in input order. Nothing here commits."""
    ops = riders.ops
    if not ops:
        return []
    schedules = sorted({op.queue for op in ops if op.op == "schedule"})
    encrypting: set[str] = set()
    if schedules and riders.cipher.enabled:
        encrypting = {r["name"] for r in await Q.timers_encrypting.fetch(conn, names=schedules)}
    payloads: list[bytes | None] = []
    encrypted: list[bool] = []
    for op in ops:
        if op.op == "schedule" and op.queue in encrypting:
            # Encrypted now, since its queue encrypts now: it never sits in clear here.
            payloads.append(riders.cipher.encrypt(op.payload))
            encrypted.append(True)
        else:
            payloads.append(op.payload if op.op == "schedule" else None)
            encrypted.append(False)
    rows = await Q.timers_apply.fetch(
        conn, ops=[op.op for op in ops], queues=[op.queue for op in ops],
        keys=[op.timer_key for op in ops], partitions=[op.partition for op in ops],
        delays=[op.delay_ms for op in ops], txns=[op.txn for op in ops],
        payloads=payloads, encrypted=encrypted, producer_sub=riders.producer_sub)
    results = [_result(ops[row["ord"] - 1], row) for row in rows]
    if riders.counts is not None:
        for result in results:
            status = result["status"]
            riders.counts[status] = riders.counts.get(status, 0) + 1
    return results


def _row(row: Any, *, payload: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "found": True, "queue": row["queue"], "timerKey": row["timer_key"],
        "partition": row["partition"], "deliverAt": _stamp(row["deliver_at"]),
        "txn": row["txn"], "messageId": str(row["message_id"]),
        "payloadZstd": False, "encrypted": row["encrypted"],
        "producerSub": row["producer_sub"], "attempts": row["attempts"],
        "lastError": row["last_error"], "claimed": row["claimed"],
        "createdAt": _stamp(row["created_at"]), "updatedAt": _stamp(row["updated_at"]),
    }
    if payload:
        out["payload"] = base64.b64encode(row["payload"]).decode("ascii")
    else:
        out["payloadBytes"] = row["payload_bytes"]
    return out


class TimerService:
    def __init__(self, db: Database, cipher: PayloadCipher) -> None:
        self._db = db
        self._cipher = cipher
        self._counts: dict[str, int] = {}

    def statistics(self) -> TimerStatistics:
        c = self._counts
        return TimerStatistics(c.get("scheduled", 0), c.get("rescheduled", 0),
                               c.get("cancelled", 0), c.get("too_late", 0), c.get("absent", 0))

    def riders(self, ops: list[TimerOp], producer_sub: str | None) -> TimerRiders:
        return TimerRiders(ops, producer_sub, self._cipher, self._counts)

    async def apply(self, ops: list[TimerOp], producer_sub: str | None) -> list[dict[str, Any]]:
        """POST /api/v1/timers (and the DELETE route's cancel): one transaction."""
        riders = self.riders(ops, producer_sub)

        async def work(conn: asyncpg.Connection) -> list[dict[str, Any]]:
            async with conn.transaction():
                return await apply_timer_riders(conn, riders)

        return await self._db.call(work)

    async def peek(self, queue: str, key: str) -> dict[str, Any]:
        row = await self._db.fetchrow(Q.timers_peek, queue=queue, key=key)
        if row is None:
            return {"found": False, "queue": queue, "timerKey": key}
        return _row(row, payload=True)

    async def list_page(self, queue: str, after: str, limit: int) -> dict[str, Any]:
        rows = await self._db.fetch(Q.timers_list, queue=queue, after=after, limit=limit)
        truncated = len(rows) > limit
        page = [_row(r, payload=False) for r in rows[:limit]]
        return {"queue": queue, "rows": page, "truncated": truncated,
                "nextAfter": page[-1]["timerKey"] if truncated else None}

    async def queues(self) -> list[dict[str, Any]]:
        """Pending timers per queue (the dashboard's Timers page, `queen-trio timers`)."""
        rows = await self._db.fetch(Q.timers_queues)
        return [{"queue": r["queue"], "pending": r["pending"], "held": r["held"],
                 "nextDue": _stamp(r["next_due"])} for r in rows]


class TransactionTimers:
    """The `timers` rider hook of POST /api/v1/transaction (push/transactions.py)."""

    def __init__(self, service: TimerService, max_body_bytes: int) -> None:
        self._service = service
        self._max_body_bytes = max_body_bytes

    def parse(self, raw: Any, producer_sub: str | None) -> TimerRiders:
        return self._service.riders(
            parse_ops(raw, max_body_bytes=self._max_body_bytes, label="timers"), producer_sub)

    async def apply(self, conn: asyncpg.Connection, parsed: Any) -> list[dict[str, Any]]:
        assert isinstance(parsed, TimerRiders)
        return await apply_timer_riders(conn, parsed)
