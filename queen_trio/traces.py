"""Traces: consumers record events against a message; readers follow a flow by name."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

import asyncpg
import msgspec

from . import frames as framing
from . import ids, sql
from .acks import parse_uuid
from .consume import consumer_group, format_millis, query_int
from .database import Database
from .encryption import PayloadCipher
from .http import HTTPError
from .push import BadRequest

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"
MAX_NAMES = 32

INSERT_EVENT_SQL = """
WITH target AS (SELECT queen.message_offset($2, $3, $4) AS off)
INSERT INTO queen.trace_events (id, partition_id, transaction_id, message_offset,
                                consumer_group, event_type, data, worker_id)
SELECT $1, $2, $3, target.off, $4, $5, $6, $7 FROM target WHERE target.off IS NOT NULL
RETURNING created_at
"""
INSERT_NAMES_SQL = """
INSERT INTO queen.trace_names (event_id, trace_name, created_at)
SELECT $1, n, $3 FROM unnest($2::text[]) AS n ON CONFLICT DO NOTHING
"""
BY_MESSAGE_SQL = """
SELECT e.id, e.event_type, e.data, e.consumer_group, e.worker_id, e.created_at,
       coalesce((SELECT array_agg(n.trace_name ORDER BY n.trace_name) FROM queen.trace_names n
                  WHERE n.event_id = e.id), '{}') AS trace_names
  FROM queen.trace_events e
 WHERE e.partition_id = $1 AND e.transaction_id = $2
 ORDER BY e.created_at, e.id
"""
NAMES_SQL = """
SELECT n.trace_name, count(*) AS trace_count,
       count(DISTINCT (e.partition_id, e.message_offset)) AS message_count,
       max(n.created_at) AS last_seen, count(*) OVER () AS total
  FROM queen.trace_names n JOIN queen.trace_events e ON e.id = n.event_id
 GROUP BY n.trace_name
 ORDER BY max(n.created_at) DESC, n.trace_name
 LIMIT $1 OFFSET $2
"""
NAMES_TOTAL_SQL = "SELECT count(DISTINCT trace_name) FROM queen.trace_names"


def parse_trace(body: Any) -> tuple[uuid.UUID, str, str, str, bytes, list[str]]:
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object")
    txid, pid = body.get("transactionId"), body.get("partitionId")
    if not txid or pid in (None, ""):
        raise BadRequest("transactionId and partitionId are required")
    if not isinstance(txid, str):
        raise BadRequest("transactionId must be a string")
    partition_id = parse_uuid(pid, "partitionId")
    if "data" not in body:
        raise BadRequest("data is required")
    group = body.get("consumerGroup")
    if group is not None and not isinstance(group, str):
        raise BadRequest("consumerGroup must be a string or null")
    event_type = body.get("eventType") or "info"
    if not isinstance(event_type, str) or len(event_type) > 64:
        raise BadRequest("eventType must be a string of at most 64 characters")
    names = body.get("traceNames", body.get("traceName"))
    if names is None:
        names = []
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) and 0 < len(n) <= 255
                                               for n in names):
        raise BadRequest("traceNames must be a string or an array of non-empty strings")
    if len(names) > MAX_NAMES:
        raise BadRequest(f"at most {MAX_NAMES} traceNames")
    return (partition_id, txid, consumer_group(group), event_type,
            msgspec.json.encode(body["data"]), sorted(set(names)))


async def record(db: Database, body: Any) -> dict[str, Any]:
    partition_id, txid, group, event_type, data, names = parse_trace(body)
    event_id = ids.new_id()

    async def run(conn: asyncpg.Connection) -> bool:
        created = await conn.fetchval(INSERT_EVENT_SQL, event_id, partition_id, txid, group,
                                      event_type, data.decode(), WORKER_ID)
        if created is None:
            return False
        if names:
            await conn.execute(INSERT_NAMES_SQL, event_id, names, created)
        return True

    if not await db.in_transaction(run):
        raise HTTPError(404, "Message not found")
    return {"success": True, "traceId": str(event_id)}


async def by_message(db: Database, partition: str, txid: str) -> dict[str, Any]:
    rows = await db.fetch(BY_MESSAGE_SQL, parse_uuid(partition, "partitionId"), txid)
    return {"traces": [_event(r) for r in rows]}


def _event(row: Any) -> dict[str, Any]:
    return {"id": str(row["id"]), "event_type": row["event_type"],
            "data": msgspec.Raw(row["data"].encode()), "consumer_group": row["consumer_group"],
            "worker_id": row["worker_id"], "created_at": format_millis(row["created_at"]),
            "trace_names": list(row["trace_names"] or [])}


async def by_name(db: Database, cipher: PayloadCipher, name: str,
                  query: dict[str, str]) -> dict[str, Any]:
    limit = query_int(query, "limit", 100, minimum=1, maximum=10_000)
    offset = query_int(query, "offset", 0, minimum=0, maximum=2**31 - 1)
    rows = await db.fetch(sql.query("trace_by_name"), name, limit, offset)
    traces = []
    for row in rows:
        payload = None
        if row["frame"] is not None:
            frame = next(framing.unpack(row["frame"]))
            payload = msgspec.Raw(cipher.decrypt(frame.payload) if frame.encrypted
                                  else frame.payload)
        traces.append({**_event(row), "transaction_id": row["transaction_id"],
                       "partition_id": str(row["partition_id"]),
                       "queue_name": row["queue_name"], "partition_name": row["partition_name"],
                       "message_payload": payload})
    total = rows[0]["total"] if rows else await db.fetchval(
        "SELECT count(*) FROM queen.trace_names WHERE trace_name = $1", name)
    return {"traces": traces, "total": total, "pagination": {"limit": limit, "offset": offset}}


async def names(db: Database, query: dict[str, str]) -> dict[str, Any]:
    limit = query_int(query, "limit", 50, minimum=1, maximum=10_000)
    offset = query_int(query, "offset", 0, minimum=0, maximum=2**31 - 1)
    rows = await db.fetch(NAMES_SQL, limit, offset)
    total = rows[0]["total"] if rows else await db.fetchval(NAMES_TOTAL_SQL)
    return {"trace_names": [{"trace_name": r["trace_name"], "trace_count": r["trace_count"],
                             "message_count": r["message_count"],
                             "last_seen": format_millis(r["last_seen"])} for r in rows],
            "total": total, "pagination": {"limit": limit, "offset": offset}}

