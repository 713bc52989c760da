"""POST /api/v1/fetch: a partition read by offset, Kafka style (docs/offset-reads.md).

No lease, no cursor, no ack: the records from an offset upward, contiguous, with the
partition's `highWatermark` (the next offset it will assign) and `logStartOffset` (the oldest
one retention kept). All entries of one call are read in one read-only snapshot, so bounds
and records agree. The first record of a call is always delivered, even alone past the byte
budget: the client ends its loop on a call that delivers nothing.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import attrs
import msgspec

from .. import wire
from ..errors import BadRequest
from ..storage import frames as framing
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q

MAX_ENTRIES = 1024
ENTRY_DEFAULT_BYTES = 1024 * 1024
ENTRY_MAX_BYTES = 8 * 1024 * 1024
CALL_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_PARTITION = "Default"
SEGMENTS_PER_READ = 16
UNKNOWN = "UNKNOWN_TOPIC_OR_PARTITION"
OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
_NULL = msgspec.Raw(b"null")


@attrs.frozen
class FetchEntry:
    queue: str
    partition: str
    offset: int
    max_bytes: int


def _int(value: Any, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{label} must be an integer")
    return value


def parse_fetch(body: bytes) -> tuple[list[FetchEntry], int]:
    decoded = wire.require_object(wire.decode_object(body))
    entries = decoded.get("entries")
    if not isinstance(entries, list):
        raise BadRequest("entries must be an array")
    if len(entries) > MAX_ENTRIES:
        raise BadRequest(f"entries holds {len(entries)} entries; at most {MAX_ENTRIES}")
    budget = CALL_MAX_BYTES
    if decoded.get("maxBytes") is not None:
        budget = min(max(_int(decoded["maxBytes"], "maxBytes"), 1), CALL_MAX_BYTES)
    out: list[FetchEntry] = []
    for n, raw in enumerate(entries):
        where = f" (entries[{n}])"
        if not isinstance(raw, dict):
            raise BadRequest(f"entry{where} must be an object")
        queue = wire.name(raw.get("queue"), "queue", where)
        if not queue:
            raise BadRequest(f"queue{where} must not be empty")
        partition = raw.get("partition", DEFAULT_PARTITION)
        if partition is None:
            partition = DEFAULT_PARTITION
        if isinstance(partition, int) and not isinstance(partition, bool):
            partition = str(partition)
        partition = wire.name(partition, "partition", where)
        offset = _int(raw.get("offset", 0), f"offset{where}")
        if offset < 0:
            raise BadRequest(f"offset{where} must be at least 0")
        max_bytes = ENTRY_DEFAULT_BYTES
        if raw.get("maxBytes") is not None:
            max_bytes = min(max(_int(raw["maxBytes"], f"maxBytes{where}"), 1), ENTRY_MAX_BYTES)
        out.append(FetchEntry(queue, partition, offset, max_bytes))
    return out, budget


class OffsetReader:
    """The offset reads' service: fetch (here) and partitions/changed (reads/changed.py)."""

    def __init__(self, db: Database, cipher: PayloadCipher) -> None:
        self._db = db
        self._cipher = cipher
        self.records_read = 0
        self.fetch_calls = 0

    async def fetch(self, entries: list[FetchEntry], budget: int) -> dict[str, Any]:
        async def work(conn: asyncpg.Connection) -> list[dict[str, Any]]:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                return await self._fetch_in(conn, entries, budget)

        answers = await self._db.call(work)
        self.fetch_calls += 1
        self.records_read += sum(len(a["records"]) for a in answers)
        return {"entries": answers}

    async def _fetch_in(self, conn: asyncpg.Connection, entries: list[FetchEntry],
                        budget: int) -> list[dict[str, Any]]:
        if not entries:
            return []
        bounds = await Q.reads_bounds.fetch(conn, queues=[e.queue for e in entries],
                                            partitions=[e.partition for e in entries])
        left = budget
        delivered = 0
        answers: list[dict[str, Any]] = []
        for entry, row in zip(entries, bounds, strict=True):
            answer: dict[str, Any] = {"queue": entry.queue, "partition": entry.partition,
                                      "records": []}
            answers.append(answer)
            if not row["queue_known"]:
                answer.update(error=UNKNOWN, highWatermark=0, logStartOffset=0)
                continue
            if row["partition_id"] is None:  # never written: an empty log
                answer.update(highWatermark=0, logStartOffset=0)
                continue
            high = int(row["next_offset"])
            start = high if row["log_start"] is None else int(row["log_start"])
            answer.update(highWatermark=high, logStartOffset=start)
            if entry.offset < start or entry.offset > high:
                answer["error"] = OUT_OF_RANGE
                continue
            if entry.offset == high:
                continue
            records, used = await self._records(conn, row["partition_id"], entry, high,
                                                min(entry.max_bytes, left),
                                                first_of_call=delivered == 0)
            answer["records"] = records
            delivered += len(records)
            left = max(left - used, 0)
        return answers

    async def _records(self, conn: asyncpg.Connection, partition_id: Any, entry: FetchEntry,
                       high: int, budget: int, *, first_of_call: bool
                       ) -> tuple[list[dict[str, Any]], int]:
        records: list[dict[str, Any]] = []
        used = 0
        at = entry.offset
        while at < high:
            before = at
            segments = await Q.reads_segments.fetch(conn, partition_id=partition_id,
                                                    from_offset=at, limit=SEGMENTS_PER_READ)
            if not segments:
                break
            for seg in segments:
                first = int(seg["first_offset"])
                if first > at:  # a gap (never in a kept log): stay contiguous, stop here
                    return records, used
                ts = wire.format_micros(seg["created_at"])
                for n, fields in enumerate(framing.fields_between(seg["frames"],
                                                                  seg["frame_ends"])):
                    offset = first + n
                    if offset < at:
                        continue
                    payload, _ = self._cipher.read_payload(fields)
                    size = len(payload) if payload is not None else 4
                    if used + size > budget and not (first_of_call and not records):
                        return records, used
                    txid = None if isinstance(fields, framing.Undecodable) \
                        else fields[1]
                    records.append({"offset": offset, "transactionId": txid,
                                    "payload": _NULL if payload is None
                                    else msgspec.Raw(payload),
                                    "ts": ts})
                    used += size
                    at = offset + 1
            if len(segments) < SEGMENTS_PER_READ or at == before:
                break
        return records, used
