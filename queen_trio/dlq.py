"""GET /api/v1/dlq: a group's dead letters, payloads decrypted, with the total."""

from __future__ import annotations

from typing import Any

import asyncpg
import msgspec

from . import frames as framing
from . import sql
from .consume import QUEUE_MODE, format_millis, query_int
from .database import Database
from .encryption import PayloadCipher


async def read_dead_letters(db: Database, cipher: PayloadCipher,
                            query: dict[str, str]) -> dict[str, Any]:
    queue = query.get("queue") or None
    group = query.get("consumerGroup")
    if group == "":
        group = QUEUE_MODE
    limit = query_int(query, "limit", 100, minimum=1, maximum=10_000)
    offset = query_int(query, "offset", 0, minimum=0, maximum=2**31 - 1)

    async def run(conn: asyncpg.Connection) -> tuple[list[asyncpg.Record], int]:
        rows = await conn.fetch(sql.query("dead_letters"), queue, group, limit, offset)
        total = await conn.fetchval(sql.query("dead_letters_total"), queue, group)
        return rows, total

    rows, total = await db.call(run)
    messages = []
    for row in rows:
        frame = next(framing.unpack(row["frame"]))
        payload = cipher.decrypt(frame.payload) if frame.encrypted else frame.payload
        messages.append({
            "id": str(row["message_id"]),
            "transactionId": row["transaction_id"],
            "partitionId": str(row["partition_id"]),
            "queue": row["queue_name"],
            "partition": row["partition_name"],
            "consumerGroup": row["consumer_group"],
            "errorMessage": row["error_message"],
            "retryCount": row["retry_count"],
            "data": msgspec.Raw(payload),
            "producerSub": frame.producer_sub,
            "traceId": str(frame.trace_id) if frame.trace_id else None,
            "createdAt": format_millis(row["message_created_at"]),
            "failedAt": format_millis(row["failed_at"]),
        })
    return {"messages": messages, "total": total,
            "pagination": {"limit": limit, "offset": offset}}
