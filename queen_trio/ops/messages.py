"""Messages: the list (newest first, every filter), one message with its payload, delete, and
the retry of a dead letter.

A message's status is decided in one place, ops/message_view.py (`message_status`, in Python;
the queries only say where each group stands): `dead_letter` when any group dead-lettered it;
otherwise where its partition's reference group stands (queue mode when the partition has it,
else the slowest group): `processing` under that group's live lease, `pending` at or after its
cursor, `completed` behind it. A partition no group reads holds only pending messages.

The list walks segment headers newest first through an index (segments_time, or one
partition's primary key): skipping `offset` messages costs index entries, not frames, and only
the page's frames are read.

A deleted message is hidden (queen.hidden_messages): its offset stays taken, every claim steps
over it, every count and listing leaves it out. A retried dead letter is delivered again, first,
by its group's next claim of the partition; an ack of it settles the dead letter.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
import attrs

from .. import wire
from ..consume.wakeups import WakeRegistry
from ..errors import BadRequest, Conflict, NotFound
from ..storage import frames as framing
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q, Row
from .message_view import (
    STATUSES,
    Position,
    lease_stamp,
    message_reply,
    message_status,
    message_view,
    mode_type,
    reference,
)
from .resources import MAX_LIMIT, queue_row

# Header chunks grow from this size while the page is not full.
FIRST_CHUNK = 256
LAST_CHUNK = 8192
_NEVER = dt.datetime.max.replace(tzinfo=dt.timezone.utc)
_DAWN = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_HIGHEST_UUID = uuid.UUID(int=(1 << 128) - 1)
_HIGHEST_OFFSET = (1 << 63) - 1


@attrs.frozen
class MessageQuery:
    queue: str | None
    partition: str | None
    namespace: str | None
    task: str | None
    status: str | None
    start: dt.datetime
    end: dt.datetime
    limit: int
    offset: int

    @property
    def filtered(self) -> bool:
        return any(v is not None for v in (self.queue, self.partition, self.namespace,
                                           self.task))


def _end_of_minute(at: dt.datetime) -> dt.datetime:
    # A parsed time is before year 9999 (wire.LATEST_YEAR): a minute more fits.
    floor = at.replace(second=0, microsecond=0)
    return floor if floor == at else floor + dt.timedelta(minutes=1)


def parse_list(query: Mapping[str, str], *, default_limit: int = 200,
               window: dt.timedelta | None = dt.timedelta(hours=1)) -> MessageQuery:
    """The list's filters; `window` None lists every message (no default time range)."""
    status = query.get("status") or None
    if status is not None and status not in STATUSES:
        raise BadRequest(f"status must be one of {', '.join(STATUSES)}")
    end = _end_of_minute(wire.parse_timestamp(query["to"], "to") if query.get("to")
                         else wire.utc_now())
    if query.get("from"):
        start = wire.parse_timestamp(query["from"], "from")
    else:
        start = _DAWN if window is None else wire.before(end, window, "to")
    if window is None and not query.get("to"):
        end = _NEVER
    if start > end:
        raise BadRequest("from must not be after to")
    page = wire.pagination(query, default_limit=default_limit, max_limit=MAX_LIMIT)
    names = {key: (wire.name(query[key], key) if query.get(key) else None)
             for key in ("queue", "partition", "task")}
    namespace = query.get("ns") or query.get("namespace") or None
    return MessageQuery(names["queue"], names["partition"], namespace, names["task"], status,
                        start, end, page.limit, page.offset)


class _Partitions:
    """Where every group stands on the partitions seen so far, their dead letters and their
    deleted offsets (`any_hidden`: whether any partition has deleted messages at all)."""

    def __init__(self, any_hidden: bool = False) -> None:
        self.groups: dict[uuid.UUID, list[Position]] = {}
        self.dead: dict[uuid.UUID, set[int]] = {}
        self.any_hidden = any_hidden
        self.hidden: dict[uuid.UUID, set[int]] = {}

    def reference(self, pid: uuid.UUID) -> Position | None:
        return reference(self.groups.get(pid) or [])

    def status(self, pid: uuid.UUID, offset: int) -> str:
        return message_status(self.reference(pid), offset,
                              dead_lettered=offset in self.dead.get(pid, ()))


def _ranges(headers: Sequence[Row]) -> dict[uuid.UUID, tuple[int, int]]:
    ranges: dict[uuid.UUID, tuple[int, int]] = {}
    for h in headers:
        low, high = ranges.get(h["partition_id"], (_HIGHEST_OFFSET, -1))
        ranges[h["partition_id"]] = (min(low, h["first_offset"]),
                                     max(high, h["first_offset"] + h["message_count"]))
    return ranges


async def _load_hidden(conn: asyncpg.Connection, known: _Partitions,
                       headers: Sequence[Row]) -> None:
    """The deleted offsets within the headers' offsets."""
    if not known.any_hidden or not headers:
        return
    ranges = _ranges(headers)
    pids = list(ranges)
    for r in await Q.message_hidden.fetch(
            conn, partition_ids=pids, lows=[ranges[p][0] for p in pids],
            highs=[ranges[p][1] for p in pids]):
        known.hidden.setdefault(r["partition_id"], set()).add(r["message_offset"])


async def _load(conn: asyncpg.Connection, known: _Partitions,
                headers: Sequence[Row], *, need_dead: bool) -> None:
    """The positions of the headers' partitions not seen yet; with `need_dead`, the dead
    letters within the headers' offsets."""
    fresh = sorted({h["partition_id"] for h in headers} - known.groups.keys())
    if fresh:
        for pid in fresh:
            known.groups[pid] = []
        for r in await Q.message_states.fetch(conn, partition_ids=fresh):
            known.groups[r["partition_id"]].append(Position.from_row(r))
    if not need_dead:
        return
    ranges = _ranges(headers)
    pids = list(ranges)
    rows = await Q.message_dead_offsets.fetch(
        conn, partition_ids=pids, lows=[ranges[p][0] for p in pids],
        highs=[ranges[p][1] for p in pids])
    for r in rows:
        known.dead.setdefault(r["partition_id"], set()).add(r["message_offset"])


def _readable(fields: framing.Fields | framing.Undecodable) -> framing.Fields:
    """A listing shows what it can of a frame that does not parse: its id."""
    if isinstance(fields, framing.Undecodable):
        return (fields.message_id, fields.transaction_id or "", None, None, False, b"")
    return fields


@attrs.frozen
class _Slice:
    partition_id: uuid.UUID
    first_offset: int  # of the segment
    skip: int
    offsets: tuple[int, ...]  # newest first
    created_at: dt.datetime


async def _walk(conn: asyncpg.Connection, q: MessageQuery,
                partition_ids: list[uuid.UUID] | None,
                known: _Partitions) -> list[_Slice]:
    """The page's messages, as runs of one segment each, newest first."""
    to_skip, wanted = q.offset, q.limit
    chunk = min(max(FIRST_CHUNK, q.offset + q.limit), LAST_CHUNK)
    before = (_NEVER, _HIGHEST_UUID, _HIGHEST_OFFSET)
    single = partition_ids[0] if partition_ids is not None and len(partition_ids) == 1 else None
    page: list[_Slice] = []
    while wanted > 0:
        if single is not None:
            headers = await Q.message_headers_partition.fetch(
                conn, partition_id=single, range_from=q.start, range_to=q.end,
                before_offset=before[2], chunk=chunk)
        else:
            headers = await Q.message_headers.fetch(
                conn, range_from=q.start, range_to=q.end, partition_ids=partition_ids,
                before_at=before[0], before_partition=before[1], before_offset=before[2],
                chunk=chunk)
        if not headers:
            break
        await _load_hidden(conn, known, headers)
        if q.status is not None:
            await _load(conn, known, headers, need_dead=True)
        for h in headers:
            pid, first, count = h["partition_id"], h["first_offset"], h["message_count"]
            hidden = known.hidden.get(pid, ())
            offsets = [o for o in range(first + count - 1, first - 1, -1) if o not in hidden]
            if q.status is not None:
                matching = [o for o in offsets if known.status(pid, o) == q.status]
            else:
                matching = offsets
            if to_skip >= len(matching):
                to_skip -= len(matching)
                continue
            chosen = matching[to_skip:to_skip + wanted]
            to_skip = 0
            wanted -= len(chosen)
            page.append(_Slice(pid, first, min(chosen) - first, tuple(chosen), h["created_at"]))
            if wanted == 0:
                break
        last = headers[-1]
        before = (last["created_at"], last["partition_id"], last["first_offset"])
        if len(headers) < chunk:
            break
        chunk = min(chunk * 4, LAST_CHUNK)
    return page


def _entry(info: Row, known: _Partitions, pid: uuid.UUID, offset: int,
           fields: tuple[str, str, str | None, str | None, bool, bytes],
           created_at: dt.datetime) -> dict[str, Any]:
    message_id, txid, trace, sub, _encrypted, _payload = fields
    groups = known.groups.get(pid) or []
    queue_mode = next((g for g in groups if g.group == wire.QUEUE_MODE), None)
    named = [g for g in groups if g.group != wire.QUEUE_MODE]
    standing = known.reference(pid)
    status = known.status(pid, offset)
    return {
        "id": message_id, "transactionId": txid, "partitionId": str(pid),
        "queuePath": f"{info['queue_name']}/{info['name']}", "queue": info["queue_name"],
        "partition": info["name"], "namespace": info["namespace"] or None,
        "task": info["task"] or None, "status": status,
        "queueStatus": None if queue_mode is None else message_status(
            queue_mode, offset, dead_lettered=status == "dead_letter"),
        "busStatus": {"consumedBy": sum(1 for g in named if g.cursor > offset),
                      "totalGroups": len(named)},
        "traceId": trace, "producerSub": sub, "queuePriority": info["priority"],
        "createdAt": wire.format_millis(created_at),
        "leaseExpiresAt": lease_stamp(standing, status),
    }


async def _mode(conn: asyncpg.Connection, queue_ids: list[uuid.UUID] | None) -> dict[str, Any]:
    row = await Q.message_mode.fetchrow(conn, queue_ids=queue_ids)
    assert row is not None  # aggregates: one row
    bus = int(row["bus_groups"])
    return {"hasQueueMode": row["has_queue_mode"], "busGroupsCount": bus,
            "type": mode_type(row["has_queue_mode"], bus)}


async def list_messages(db: Database, q: MessageQuery) -> dict[str, Any]:
    async def run(conn: asyncpg.Connection) -> dict[str, Any]:
        partition_ids: list[uuid.UUID] | None = None
        if q.filtered:
            partition_ids = [r["id"] for r in await Q.message_partitions.fetch(
                conn, queue=q.queue, partition=q.partition, namespace=q.namespace, task=q.task)]
        known = _Partitions(any_hidden=await Q.message_any_hidden.fetchval(conn))
        if partition_ids == []:
            entries: list[tuple[uuid.UUID, int, Any, dt.datetime]] = []
        elif q.status == "dead_letter":
            entries = await _dead_page(conn, q, partition_ids)
        else:
            entries = await _frames_page(conn, q, partition_ids, known)
        infos = {r["id"]: r for r in await Q.message_partition_info.fetch(
            conn, partition_ids=sorted({pid for pid, *_ in entries}))}
        # A partition the reclaimer deleted meanwhile takes its messages with it (dead
        # letters have no foreign key to it).
        entries = [e for e in entries if e[0] in infos]
        await _load(conn, known, [{"partition_id": pid, "first_offset": off,
                                   "message_count": 1} for pid, off, *_ in entries],
                    need_dead=any(info["has_dead"] for info in infos.values()))
        queue_ids = None if not q.filtered else sorted({i["queue_id"] for i in infos.values()})
        messages = [_entry(infos[pid], known, pid, offset, fields, created)
                    for pid, offset, fields, created in entries]
        return {"messages": messages, "mode": await _mode(conn, queue_ids),
                "pagination": {"limit": q.limit, "offset": q.offset}}

    return await db.call(run)


async def _frames_page(conn: asyncpg.Connection, q: MessageQuery,
                       partition_ids: list[uuid.UUID] | None,
                       known: _Partitions) -> list[tuple[uuid.UUID, int, Any, dt.datetime]]:
    page = await _walk(conn, q, partition_ids, known)
    if not page:
        return []
    spans = [(s, max(s.offsets) - min(s.offsets) + 1) for s in page]
    rows = await Q.message_frames.fetch(
        conn, partition_ids=[s.partition_id for s, _ in spans],
        first_offsets=[s.first_offset for s, _ in spans], skips=[s.skip for s, _ in spans],
        takes=[n for _, n in spans])
    found = {row["ord"]: row for row in rows}
    entries = []
    for ord_, (s, _n) in enumerate(spans, start=1):
        row = found.get(ord_)
        if row is None:
            continue  # retention removed the segment since the walk
        fields = [_readable(f) for f in framing.fields_between(row["frames"], row["frame_ends"])]
        base = s.first_offset + s.skip
        for offset in s.offsets:
            entries.append((s.partition_id, offset, fields[offset - base], s.created_at))
    return entries


async def _dead_page(conn: asyncpg.Connection, q: MessageQuery,
                     partition_ids: list[uuid.UUID] | None
                     ) -> list[tuple[uuid.UUID, int, Any, dt.datetime]]:
    rows = await Q.message_dead_page.fetch(
        conn, range_from=q.start, range_to=q.end, partition_ids=partition_ids,
        limit=q.limit, offset=q.offset)
    return [(r["partition_id"], r["message_offset"], _readable(framing.read_one(r["frame"])),
             r["message_created_at"]) for r in rows]


async def get_message(db: Database, cipher: PayloadCipher, partition: str,
                      transaction: str) -> dict[str, Any]:
    """GET /api/v1/messages/:partitionId/:transactionId: the message, decrypted, and where
    every group stands with it."""
    pid = wire.parse_uuid(partition, "partitionId")
    txid = wire.name(transaction, "transactionId")

    async def run(conn: asyncpg.Connection
                  ) -> tuple[asyncpg.Record | None, list[asyncpg.Record], list[asyncpg.Record]]:
        row = await Q.message_lookup.fetchrow(conn, partition_id=pid, transaction_id=txid)
        if row is None:
            return None, [], []
        return (row, await Q.message_states.fetch(conn, partition_ids=[pid]),
                await Q.message_dead_letters.fetch(conn, partition_id=pid,
                                                   message_offset=row["message_offset"]))

    row, states, dead = await db.call(run)
    return message_reply(message_view(row, states, dead, cipher, txid))


async def queue_messages(db: Database, name: str, query: Mapping[str, str]) -> list[Any]:
    """GET /api/v1/status/queues/:queue/messages: the queue's messages, newest first."""
    await queue_row(db, name)
    body = await list_messages(db, parse_list({**query, "queue": name}, default_limit=50,
                                              window=None))
    return [{k: m[k] for k in ("id", "transactionId", "partitionId", "queuePath", "queue",
                               "partition", "status", "createdAt")} for m in body["messages"]]


async def delete_message(db: Database, wakeups: WakeRegistry, partition: str,
                         transaction: str) -> dict[str, Any]:
    """DELETE /api/v1/messages/:partitionId/:transactionId: hide the message from every group
    and every count. 404 when there is no such message (or it was deleted already)."""
    pid = wire.parse_uuid(partition, "partitionId")
    txid = wire.name(transaction, "transactionId")
    row = await db.fetchrow(Q.message_delete, partition_id=pid, transaction_id=txid)
    if row is None:
        raise NotFound("Message not found")
    # A group stepped past it may have something to claim now.
    wakeups.notify(row["queue_name"])
    return {"success": True, "partitionId": str(pid), "transactionId": txid,
            "message": "Message deleted successfully"}


async def retry_message(db: Database, cipher: PayloadCipher, wakeups: WakeRegistry,
                        partition: str, transaction: str,
                        query: Mapping[str, str]) -> dict[str, Any]:
    """POST /api/v1/messages/:partitionId/:transactionId/retry[?consumerGroup=G]: the dead
    letter of G (default: every group whose DLQ holds it) is delivered again, first, by G's
    next pop of the partition, under a lease; acking it removes it from the DLQ."""
    pid = wire.parse_uuid(partition, "partitionId")
    txid = wire.name(transaction, "transactionId")
    copies = await db.fetch(Q.message_dead_copies, partition_id=pid, transaction_id=txid)
    if not copies:
        raise NotFound("Dead letter not found")
    wanted = list(copies)
    if "consumerGroup" in query:
        group = wire.consumer_group(query["consumerGroup"])
        wanted = [c for c in copies if c["consumer_group"] == group]
        if not wanted:
            raise Conflict(f"Message is not dead-lettered for consumer group {group}")
    for copy in wanted:
        problem = _undeliverable(cipher, copy["frame"])
        if problem is not None:
            raise Conflict(f"Dead letter of {copy['consumer_group']} cannot be retried: {problem}")
    stranded = [c["consumer_group"] for c in wanted if not c["has_position"]]
    if len(stranded) == len(wanted):
        raise Conflict("Consumer group " + ", ".join(stranded) + " has no position on the "
                       "partition any more (deleted): nothing would deliver the dead letter")
    rows = await db.fetch(Q.message_retry, partition_id=pid, transaction_id=txid,
                          consumer_groups=[c["consumer_group"] for c in wanted])
    for queue in {r["queue_name"] for r in rows}:
        wakeups.notify(queue)
    groups = sorted(r["consumer_group"] for r in rows)
    return {"success": True, "partitionId": str(pid), "transactionId": txid,
            "consumerGroups": groups, "retried": len(groups)}


def _undeliverable(cipher: PayloadCipher, frame: bytes) -> str | None:
    """Why a dead letter's frame cannot be delivered again, or None."""
    return cipher.read_payload(framing.read_one(frame))[1]
