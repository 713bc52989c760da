"""GET /api/v1/dlq: a group's dead letters, payloads decrypted, with the total. A payload
this broker's key cannot decrypt, or a frame that does not parse, reads as null."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TypedDict

import asyncpg
import attrs
import msgspec

from .. import wire
from ..storage import frames as framing
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q


@attrs.frozen
class DeadLetterRow:
    """One row of queries/dead_letters.sql (queen.dead_letters and its queue's name)."""

    message_id: uuid.UUID
    transaction_id: str
    partition_id: uuid.UUID
    partition_name: str
    consumer_group: str
    error_message: str | None
    retry_count: int
    frame: bytes
    message_created_at: dt.datetime
    failed_at: dt.datetime
    queue_name: str

    @classmethod
    def from_record(cls, row: asyncpg.Record) -> DeadLetterRow:
        return cls(message_id=row["message_id"], transaction_id=row["transaction_id"],
                   partition_id=row["partition_id"], partition_name=row["partition_name"],
                   consumer_group=row["consumer_group"], error_message=row["error_message"],
                   retry_count=row["retry_count"], frame=row["frame"],
                   message_created_at=row["message_created_at"], failed_at=row["failed_at"],
                   queue_name=row["queue_name"])


class DeadLetter(TypedDict):
    """One message of GET /api/v1/dlq."""

    id: str
    transactionId: str
    partitionId: str
    queue: str
    partition: str
    consumerGroup: str
    errorMessage: str | None
    retryCount: int
    data: msgspec.Raw | None
    producerSub: str | None
    traceId: str | None
    createdAt: str
    failedAt: str


class DeadLetterPage(TypedDict):
    """The reply of GET /api/v1/dlq."""

    messages: list[DeadLetter]
    total: int
    pagination: dict[str, int]


async def read_dead_letters(db: Database, cipher: PayloadCipher,
                            query: dict[str, str]) -> DeadLetterPage:
    queue = query.get("queue") or None
    group = query.get("consumerGroup")
    # Absent: every group; empty: queue mode (docs/decisions.md#queue-mode).
    group = None if group is None else wire.consumer_group(group)
    page = wire.pagination(query, default_limit=100, max_limit=10_000)

    async def run(conn: asyncpg.Connection) -> tuple[list[DeadLetterRow], int]:
        rows = await Q.dead_letters.fetch(conn, queue=queue, consumer_group=group,
                                          limit=page.limit, offset=page.offset)
        total: int = await Q.dead_letters_total.fetchval(conn, queue=queue,
                                                         consumer_group=group)
        return [DeadLetterRow.from_record(row) for row in rows], total

    rows, total = await db.call(run)
    messages: list[DeadLetter] = []
    for row in rows:
        fields = framing.read_one(row.frame)
        # No payload for a frame that does not parse (the claim that could not decode it
        # dead-lettered it as it is), nor for one this key cannot decrypt (kept as
        # ciphertext: the right key reads it again).
        payload, _ = cipher.read_payload(fields)
        trace, sub = (None, None) if isinstance(fields, framing.Undecodable) else fields[2:4]
        messages.append({
            "id": str(row.message_id),
            "transactionId": row.transaction_id,
            "partitionId": str(row.partition_id),
            "queue": row.queue_name,
            "partition": row.partition_name,
            "consumerGroup": row.consumer_group,
            "errorMessage": row.error_message,
            "retryCount": row.retry_count,
            "data": None if payload is None else msgspec.Raw(payload),
            "producerSub": sub,
            "traceId": trace,
            "createdAt": wire.format_millis(row.message_created_at),
            "failedAt": wire.format_millis(row.failed_at),
        })
    return {"messages": messages, "total": total,
            "pagination": page.to_wire()}
