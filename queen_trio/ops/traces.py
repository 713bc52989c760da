"""Traces: consumers record events against a message; readers follow a flow by name."""

from __future__ import annotations

import datetime
import uuid
from typing import Any, TypedDict

import asyncpg
import msgspec

from .. import ids, wire
from ..errors import BadRequest, NotFound
from ..storage import frames as framing
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q, Row

MAX_NAMES = 32
MAX_EVENT_TYPE = 64


class TraceEvent(TypedDict):
    """One trace event as the trace routes answer it (snake_case, as the reference's)."""

    id: str
    event_type: str
    data: msgspec.Raw  # the JSON recorded, verbatim
    consumer_group: str
    worker_id: str | None
    created_at: str
    trace_names: list[str]


class NamedTraceEvent(TraceEvent):
    """An event of GET /api/v1/traces/by-name/:name, with its message."""

    transaction_id: str
    partition_id: str
    queue_name: str
    partition_name: str
    message_payload: msgspec.Raw | None


class TraceRecorded(TypedDict):
    success: bool
    traceId: str


class TracesOfMessage(TypedDict):
    traces: list[TraceEvent]


class TracesByName(TypedDict):
    traces: list[NamedTraceEvent]
    total: int
    pagination: dict[str, int]


def parse_trace(body: Any) -> tuple[uuid.UUID, str, str, str, bytes, list[str]]:
    body = wire.require_object(body)
    txid, pid = body.get("transactionId"), body.get("partitionId")
    if not txid or pid in (None, ""):
        raise BadRequest("transactionId and partitionId are required")
    txid = wire.name(txid, "transactionId")
    partition_id = wire.parse_uuid(pid, "partitionId")
    if "data" not in body:
        raise BadRequest("data is required")
    group = wire.consumer_group(body.get("consumerGroup"))
    event_type = body.get("eventType") or "info"
    if not isinstance(event_type, str) or len(event_type) > MAX_EVENT_TYPE:
        raise BadRequest(f"eventType must be a string of at most {MAX_EVENT_TYPE} characters")
    wire.text(event_type, "eventType")
    names = body.get("traceNames", body.get("traceName"))
    if names is None:
        names = []
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise BadRequest("traceNames must be a string or an array of non-empty strings")
    names = [wire.name(n, "traceNames entry") for n in names]
    if len(names) > MAX_NAMES:
        raise BadRequest(f"at most {MAX_NAMES} traceNames")
    return (partition_id, txid, group, event_type, msgspec.json.encode(body["data"]),
            sorted(set(names)))


async def record(db: Database, body: Any, *, worker_id: str) -> TraceRecorded:
    partition_id, txid, group, event_type, data, names = parse_trace(body)
    event_id = ids.new_id()

    async def run(conn: asyncpg.Connection) -> bool:
        created = await Q.trace_insert_event.fetchval(
            conn, event_id=event_id, partition_id=partition_id, transaction_id=txid,
            consumer_group=group, event_type=event_type, data=data.decode(),
            worker_id=worker_id)
        if created is None:
            return False
        if names:
            await Q.trace_insert_names.execute(conn, event_id=event_id, trace_names=names,
                                               created_at=created)
        return True

    if not await db.in_transaction(run):
        raise NotFound("Message not found")
    return {"success": True, "traceId": str(event_id)}


async def by_message(db: Database, partition: str, txid: str) -> TracesOfMessage:
    rows = await db.fetch(Q.trace_by_message,
                          partition_id=wire.parse_uuid(partition, "partitionId"),
                          transaction_id=wire.name(txid, "transactionId"))
    return {"traces": [_event(r) for r in rows]}


def _event(row: Row) -> TraceEvent:
    """A row of trace_by_message, trace_by_name or trace_events_since."""
    event_id: uuid.UUID = row["id"]
    data: str = row["data"]
    created_at: datetime.datetime = row["created_at"]
    trace_names: list[str] | None = row["trace_names"]
    return {"id": str(event_id), "event_type": row["event_type"],
            "data": msgspec.Raw(data.encode()), "consumer_group": row["consumer_group"],
            "worker_id": row["worker_id"], "created_at": wire.format_millis(created_at),
            "trace_names": list(trace_names or [])}


def _payload(cipher: PayloadCipher, frame_bytes: bytes | None) -> msgspec.Raw | None:
    """A stored frame's payload, decrypted (None: retention removed the message, this
    broker's key cannot read it, or the frame does not parse)."""
    if frame_bytes is None:
        return None
    payload, _ = cipher.read_payload(framing.read_one(frame_bytes))
    return None if payload is None else msgspec.Raw(payload)


async def by_name(db: Database, cipher: PayloadCipher, name: str,
                  query: dict[str, str]) -> TracesByName:
    name = wire.name(name, "traceName")
    page = wire.pagination(query, default_limit=100, max_limit=10_000)
    rows = await db.fetch(Q.trace_by_name, trace_name=name, limit=page.limit,
                          offset=page.offset)
    traces: list[NamedTraceEvent] = [
        {**_event(row), "transaction_id": row["transaction_id"],
         "partition_id": str(row["partition_id"]),
         "queue_name": row["queue_name"], "partition_name": row["partition_name"],
         "message_payload": _payload(cipher, row["frame"])} for row in rows]
    total: int = (rows[0]["total"] if rows
                  else await db.fetchval(Q.trace_name_total, trace_name=name))
    return {"traces": traces, "total": total, "pagination": page.to_wire()}


async def names(db: Database, query: dict[str, str]) -> dict[str, Any]:
    page = wire.pagination(query, default_limit=50, max_limit=10_000)
    rows = await db.fetch(Q.trace_names, limit=page.limit, offset=page.offset)
    total = rows[0]["total"] if rows else await db.fetchval(Q.trace_names_total)
    return {"trace_names": [{"trace_name": r["trace_name"], "trace_count": r["trace_count"],
                             "message_count": r["message_count"],
                             "last_seen": wire.format_millis(r["last_seen"])} for r in rows],
            "total": total, "pagination": page.to_wire()}


async def recorded_since(db: Database, cipher: PayloadCipher, since: datetime.datetime, *,
                         limit: int = 200) -> dict[str, Any]:
    """What happened on the broker from `since` on (a test's report): every trace name
    recorded, with its timeline as GET /traces/by-name answers it, and every message pushed
    (at most `limit`), each with its trace events. Oldest first."""
    names = [r["trace_name"] for r in await db.fetch(Q.trace_names_since, since=since)]
    timelines = {name: await by_name(db, cipher, name, {"limit": str(limit)}) for name in names}
    rows = await db.fetch(Q.messages_pushed_since, since=since, limit=limit)
    events: dict[tuple[uuid.UUID, str], list[TraceEvent]] = {}
    for event in await db.fetch(Q.trace_events_since, since=since):
        key = (event["partition_id"], event["transaction_id"])
        events.setdefault(key, []).append(_event(event))
    messages = [{"created_at": wire.format_millis(row["created_at"]),
                 "queue_name": row["queue_name"], "partition_name": row["partition_name"],
                 "partition_id": str(row["partition_id"]),
                 "transaction_id": row["transaction_id"],
                 "payload": _payload(cipher, row["frame"]),
                 "traces": events.get((row["partition_id"], row["transaction_id"]), [])}
                for row in rows]
    return {"trace_names": names, "timelines": timelines, "messages": messages,
            "messages_total": rows[0]["total"] if rows else 0}
