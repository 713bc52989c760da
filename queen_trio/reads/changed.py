"""POST /api/v1/partitions/changed: the partitions written since a time, and a watermark
(docs/offset-reads.md).

`safeTime` is an instant T such that no record committed after this answer carries a `ts`
at or below T: the earlier of now and the start of the oldest transaction open in the
database, less a millisecond, read *before* the partitions (a writer that commits between
the two reads started before the first, so T is below its ts). When this role cannot see
other sessions' transaction starts, the answer says `safeTimeDegraded: true` and T is now
less 30 s. It is fixed-width UTC with microseconds, truncated down, because the client keeps
the smallest by comparing strings.

A partition's `last_write_at` is its newest segment's `ts`, set in the push transaction, so
`last_write_at >= since` never misses a write whose ts is at or after `since`.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import uuid
from typing import Any

import asyncpg

from .. import wire
from ..errors import BadRequest
from ..storage.database import Database
from ..storage.sql import Q
from .fetch import UNKNOWN

MAX_ENTRIES = 64
DEFAULT_LIMIT = 1000
DEGRADED_FLOOR = dt.timedelta(seconds=30)
BAD_CURSOR = "BAD_CURSOR"


def _cursor(mode: str, at: dt.datetime, pid: Any) -> str:
    raw = json.dumps({"m": mode, "t": at.astimezone(dt.timezone.utc).isoformat(),
                      "id": str(pid)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _read_cursor(text: str, mode: str) -> tuple[dt.datetime, uuid.UUID] | None:
    """The cursor's position, or None when it is not one of this mode's cursors."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if raw["m"] != mode:
            return None
        return dt.datetime.fromisoformat(raw["t"]), uuid.UUID(raw["id"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None


def parse_changed(body: bytes) -> list[dict[str, Any]]:
    decoded = wire.require_object(wire.decode_object(body))
    entries = decoded.get("entries", [])
    if not isinstance(entries, list):
        raise BadRequest("entries must be an array")
    if len(entries) > MAX_ENTRIES:
        raise BadRequest(f"entries holds {len(entries)} entries; at most {MAX_ENTRIES}")
    out = []
    for n, raw in enumerate(entries):
        where = f" (entries[{n}])"
        if not isinstance(raw, dict):
            raise BadRequest(f"entry{where} must be an object")
        queue = wire.name(raw.get("queue"), "queue", where)
        limit = raw.get("limit", DEFAULT_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise BadRequest(f"limit{where} must be an integer")
        since = raw.get("since")
        if since is not None:
            if not isinstance(since, str):
                raise BadRequest(f"since{where} must be an ISO-8601 string")
            since = wire.parse_timestamp(since, f"since{where}")
        after = raw.get("after")
        if after is not None and not isinstance(after, str):
            raise BadRequest(f"after{where} must be a cursor string")
        out.append({"queue": queue, "limit": min(max(limit, 1), DEFAULT_LIMIT),
                    "since": since, "after": after or None})
    return out


def _stamp(value: dt.datetime) -> str:
    # Fixed width, microseconds, truncated (never rounded up).
    return wire.format_micros(value)


async def changed(db: Database, entries: list[dict[str, Any]]) -> dict[str, Any]:
    async def work(conn: asyncpg.Connection) -> dict[str, Any]:
        # The watermark first, then (a new snapshot per statement) the partitions.
        safe = await Q.reads_safe_time.fetchrow(conn)
        assert safe is not None  # one row of clock readings
        degraded = not safe["visible"]
        safe_time = safe["now"] - DEGRADED_FLOOR if degraded else safe["safe_time"]
        answers = [await _entry(conn, entry) for entry in entries]
        reply: dict[str, Any] = {"safeTime": _stamp(safe_time), "entries": answers}
        if degraded:
            reply["safeTimeDegraded"] = True
        return reply

    return await db.call(work)


async def _entry(conn: asyncpg.Connection, entry: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = {"queue": entry["queue"]}
    queue = await Q.queue_by_name.fetchrow(conn, queue=entry["queue"])
    if queue is None:
        answer.update(error=UNKNOWN, partitions=[], next=None)
        return answer
    mode = "c" if entry["since"] is None else "w"
    after_at: dt.datetime | None = None
    after_id: uuid.UUID | None = None
    if entry["after"] is not None:
        position = _read_cursor(entry["after"], mode)
        if position is None:
            answer.update(error=BAD_CURSOR, partitions=[], next=None)
            return answer
        after_at, after_id = position
    rows = await Q.reads_changed.fetch(conn, queue_id=queue["id"], since=entry["since"],
                                       after_at=after_at, after_id=after_id,
                                       limit=entry["limit"])
    page = rows[:entry["limit"]]
    answer["partitions"] = [{
        "name": r["name"], "id": str(r["id"]), "lastOffset": int(r["next_offset"]) - 1,
        "logStart": int(r["next_offset"]) if r["log_start"] is None else int(r["log_start"]),
        "lastWriteAt": _stamp(r["last_write_at"])} for r in page]
    last = page[-1] if page else None
    answer["next"] = None if len(rows) <= entry["limit"] or last is None else _cursor(
        mode, last["created_at"] if mode == "c" else last["last_write_at"], last["id"])
    return answer
