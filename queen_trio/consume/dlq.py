"""GET /api/v1/dlq: a group's dead letters, payloads decrypted, with the total. A payload
this broker's key cannot decrypt, or a frame that does not parse, reads as null."""

from __future__ import annotations

from typing import Any

import asyncpg
import msgspec

from .. import wire
from ..storage import frames as framing
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q


async def read_dead_letters(db: Database, cipher: PayloadCipher,
                            query: dict[str, str]) -> dict[str, Any]:
    queue = query.get("queue") or None
    group = query.get("consumerGroup")
    # Absent: every group; empty: queue mode (docs/decisions.md#queue-mode).
    group = None if group is None else wire.consumer_group(group)
    page = wire.pagination(query, default_limit=100, max_limit=10_000)

    async def run(conn: asyncpg.Connection) -> tuple[list[asyncpg.Record], int]:
        rows = await Q.dead_letters.fetch(conn, queue=queue, consumer_group=group,
                                          limit=page.limit, offset=page.offset)
        total = await Q.dead_letters_total.fetchval(conn, queue=queue, consumer_group=group)
        return rows, total

    rows, total = await db.call(run)
    messages = []
    for row in rows:
        fields = framing.read_one(row["frame"])
        # No payload for a frame that does not parse (the claim that could not decode it
        # dead-lettered it as it is), nor for one this key cannot decrypt (kept as
        # ciphertext: the right key reads it again).
        payload, _ = cipher.read_payload(fields)
        trace, sub = (None, None) if isinstance(fields, framing.Undecodable) else fields[2:4]
        messages.append({
            "id": str(row["message_id"]),
            "transactionId": row["transaction_id"],
            "partitionId": str(row["partition_id"]),
            "queue": row["queue_name"],
            "partition": row["partition_name"],
            "consumerGroup": row["consumer_group"],
            "errorMessage": row["error_message"],
            "retryCount": row["retry_count"],
            "data": None if payload is None else msgspec.Raw(payload),
            "producerSub": sub,
            "traceId": trace,
            "createdAt": wire.format_millis(row["message_created_at"]),
            "failedAt": wire.format_millis(row["failed_at"]),
        })
    return {"messages": messages, "total": total,
            "pagination": page.to_wire()}
