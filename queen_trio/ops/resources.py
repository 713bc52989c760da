"""Resources: queues, partitions, namespaces and tasks with their figures.

Every count comes from the partitions' offsets and the groups' cursors (the SQL views
queen.partition_figures and queen.group_figures), so it is true right after the writes that
changed it and no aggregate reads a message. A partition's figures are those of its slowest
group: what the queue still holds unconsumed (docs/api.md: Resources).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from .. import wire
from ..errors import NotFound
from ..storage.database import Database
from ..storage.sql import Q, Row

MAX_LIMIT = 1000
# Throughput figures are averages over this window (the reference's 5 minutes).
THROUGHPUT_SECONDS = 300.0


def stamp(value: Any) -> str | None:
    return None if value is None else wire.format_millis(value)


COUNTERS = ("total", "pending", "processing", "completed", "failed", "deadLetter")


def counters(row: Row, *, failed: str = "failed") -> dict[str, int]:
    """The six message counters of a figures row (a partition's failed are `retrying`)."""
    return {"total": int(row["total"]), "pending": int(row["pending"]),
            "processing": int(row["processing"]), "completed": int(row["completed"]),
            "failed": int(row[failed]), "deadLetter": int(row["dead_letters"])}


def partition_entries(rows: Sequence[Row]
                      ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """A queue's partitions (queen.partition_figures rows), and the sums of their counters."""
    totals = dict.fromkeys(COUNTERS, 0)
    entries = []
    for r in rows:
        stats = counters(r, failed="retrying")
        for key, value in stats.items():
            totals[key] += value
        last = [t for t in (r["last_commit_at"], r["last_consumed_at"]) if t is not None]
        entries.append({
            "id": str(r["partition_id"]), "name": r["name"], "createdAt": stamp(r["created_at"]),
            "stats": stats, "groups": r["groups"],
            "consumed": int(r["total"] - r["unconsumed"]),
            "oldestMessage": stamp(r["oldest_at"]) if r["total"] else None,
            "newestMessage": stamp(r["last_commit_at"]) if r["total"] else None,
            "lastActivity": stamp(max(last, default=None)),
        })
    return entries, totals


async def queue_row(db: Database, name: str) -> asyncpg.Record:
    row = await db.fetchrow(Q.queue_by_name, queue=wire.name(name, "queue"))
    if row is None:
        raise NotFound("Queue not found")
    return row


async def overview(db: Database, *, stats_age: int) -> dict[str, Any]:
    async def run(conn: asyncpg.Connection) -> tuple[asyncpg.Record, asyncpg.Record]:
        live = await Q.resources_overview.fetchrow(conn)
        recent = await Q.throughput_recent.fetchrow(conn, seconds=THROUGHPUT_SECONDS)
        assert live is not None and recent is not None  # aggregates: one row each
        return live, recent

    row, rate = await db.call(run)
    return {
        "queues": row["queues"], "partitions": row["partitions"],
        "namespaces": row["namespaces"], "tasks": row["tasks"],
        "messages": counters(row),
        "lag": {
            "time": {k: round(float(row[f"time_lag_{k}"]), 3)
                     for k in ("avg", "median", "min", "max")},
            "offset": {k: round(float(row[f"offset_lag_{k}"]), 3)
                       for k in ("avg", "median", "min", "max")},
        },
        "throughput": {"ingestedPerSecond": round(rate["ingested"], 3),
                       "processedPerSecond": round(rate["processed"], 3)},
        "timestamp": wire.format_millis(wire.utc_now()),
        "statsAge": stats_age,
    }


def parse_list_query(query: Mapping[str, str], *, default_limit: int) -> dict[str, Any]:
    page = wire.pagination(query, default_limit=default_limit, max_limit=MAX_LIMIT)
    return {"namespace": query.get("namespace") or query.get("ns") or None,
            "task": query.get("task") or None, "search": query.get("search") or None,
            "limit": page.limit, "offset": page.offset}


async def list_queues(db: Database, query: Mapping[str, str], *,
                      default_limit: int = MAX_LIMIT) -> dict[str, Any]:
    """A page of queues with their figures: `{"queues", "pagination"}`."""
    params = parse_list_query(query, default_limit=default_limit)
    rows = await db.fetch(Q.resources_queues, **params)
    queues = [{
        "id": str(r["id"]), "name": r["name"], "namespace": r["namespace"] or None,
        "task": r["task"] or None, "priority": r["priority"],
        "createdAt": stamp(r["created_at"]), "partitions": r["partitions"],
        "messages": counters(r), "lastActivity": stamp(r["last_commit_at"]),
    } for r in rows]
    return {"queues": queues,
            "pagination": wire.Page(params["limit"], params["offset"]).to_wire()}


async def queue_detail(db: Database, name: str) -> dict[str, Any]:
    queue = await queue_row(db, name)
    partitions, totals = partition_entries(
        await db.fetch(Q.resources_queue_partitions, queue_id=queue["id"]))
    for entry in partitions:
        del entry["consumed"]
    return {"id": str(queue["id"]), "name": queue["name"],
            "namespace": queue["namespace"] or None, "task": queue["task"] or None,
            "priority": queue["priority"], "createdAt": stamp(queue["created_at"]),
            "partitions": partitions, "totals": totals}


async def depth(db: Database, name: str, group: str | None) -> dict[str, Any]:
    queue = await queue_row(db, name)
    if group is not None:
        group = wire.consumer_group(group)
    rows = await db.fetch(Q.resources_depth, queue_id=queue["id"], consumer_group=group)
    pending = sum(int(r["pending"]) for r in rows)
    partitions_pending = sum(1 for r in rows if r["pending"] > 0)
    # A conflating group owes one delivery per partition with a backlog
    # (docs/decisions.md#conflation); the policy is a group's, so false without one.
    conflation = group is not None and bool(await db.fetchval(
        Q.group_conflation, queue_id=queue["id"], consumer_group=group))
    return {"queue": queue["name"], "group": group, "pending": pending,
            "partitionsPending": partitions_pending, "conflation": conflation,
            "effectivePending": partitions_pending if conflation else pending,
            "partitions": [{"partition": r["name"], "pending": int(r["pending"])}
                           for r in rows]}


async def partitions(db: Database, query: Mapping[str, str]) -> dict[str, Any]:
    page = wire.pagination(query, default_limit=100, max_limit=MAX_LIMIT)
    queue_id = None
    if query.get("queue"):
        queue_id = (await queue_row(db, query["queue"]))["id"]
    rows = await db.fetch(Q.resources_partitions, queue_id=queue_id, limit=page.limit,
                          offset=page.offset)
    return {"partitions": [{
        "id": str(r["partition_id"]), "name": r["name"], "queue": r["queue_name"],
        "createdAt": stamp(r["created_at"]), "total": int(r["total"]),
        "pending": int(r["unconsumed"]), "lastActivity": stamp(r["last_activity"]),
    } for r in rows], "pagination": page.to_wire()}


async def namespaces(db: Database, by: str) -> dict[str, Any]:
    """GET /resources/namespaces (by="namespace") or /resources/tasks (by="task")."""
    rows = await db.fetch(Q.resources_namespaces, by=by)
    return {f"{by}s": [{by: r["key"], "queues": r["queues"], "partitions": r["partitions"],
                        "messages": {"total": int(r["total"]), "pending": int(r["pending"])}}
                       for r in rows]}
