"""Consumer groups: listings, lag, delete, subscription start, and seek (the operator's rewind).

A group's figures come from its cursors and partitions' offsets (queen.group_figures). A seek
moves a group's existing cursors only (docs/decisions.md#seek), releases its leases, so a
late ack under them is refused, and resets its retry counters.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

import asyncpg

from .. import wire
from ..consume.wakeups import CHANNEL, WakeRegistry
from ..errors import BadRequest, NotFound
from ..storage.database import Database
from ..storage.sql import Q
from .resources import MAX_LIMIT, queue_row, stamp

# A group whose oldest unconsumed message is older than this is Lagging (the reference's).
LAGGING_SECONDS = 300


def subscription_mode(start_at: dt.datetime | None, subscribed_at: dt.datetime) -> str:
    """How the group's start was chosen: from the beginning, at its join, or a timestamp.
    The start is stored, not the mode: a start within a second of the join was `new`."""
    if start_at is None:
        return "all"
    return "new" if abs((subscribed_at - start_at).total_seconds()) < 1 else "timestamp"


def group_state(max_time_lag: float, total_lag: int, consumed: int) -> str:
    if max_time_lag > LAGGING_SECONDS:
        return "Lagging"
    if consumed > 0 or total_lag == 0:
        return "Stable"
    return "Dead"  # it has a backlog and never consumed anything


async def list_groups(db: Database) -> list[dict[str, Any]]:
    rows = await db.fetch(Q.groups_list)
    groups = []
    for r in rows:
        lag = float(r["max_time_lag"])
        groups.append({
            "name": r["consumer_group"], "topics": [r["queue_name"]],
            "queueName": r["queue_name"], "members": r["members"],
            "partitionsWithLag": r["partitions_with_lag"], "totalLag": int(r["total_lag"]),
            "processing": int(r["processing"]), "deadLetters": int(r["dead_letters"]),
            "maxTimeLag": int(lag),
            "state": group_state(lag, int(r["total_lag"]), int(r["consumed"])),
            "totalConsumed": int(r["consumed"]),
            "lastConsumedAt": stamp(r["last_consumed_at"]),
            "subscriptionMode": subscription_mode(r["start_at"], r["subscribed_at"]),
            "subscriptionTimestamp": stamp(r["start_at"]),
            "subscriptionCreatedAt": stamp(r["subscribed_at"]),
            # The stored delivery policy (docs/decisions.md#conflation); false when no pop
            # stated one.
            "conflation": bool(r["conflation"]),
        })
    return groups


async def group_detail(db: Database, group: str) -> dict[str, Any]:
    rows = await db.fetch(Q.group_detail, consumer_group=wire.consumer_group(group))
    queues: dict[str, Any] = {}
    for r in rows:
        queues.setdefault(r["queue_name"], {"partitions": []})["partitions"].append({
            "partition": r["partition_name"], "partitionId": str(r["partition_id"]),
            "workerId": None if r["live_lease_id"] is None else str(r["live_lease_id"]),
            "lastConsumedAt": stamp(r["last_consumed_at"]),
            "totalConsumed": int(r["consumed_total"]), "offsetLag": int(r["unconsumed"]),
            "timeLagSeconds": int(r["time_lag"]), "leaseActive": r["live_lease_id"] is not None,
            "leaseExpiresAt": stamp(r["live_lease_expires_at"]),
            "processing": int(r["processing"]), "deadLetters": int(r["dead"]),
            "retryCount": r["retry_count"], "oldestUnconsumedAt": stamp(r["head_at"]),
        })
    return queues


async def lagging(db: Database, query: Mapping[str, str]) -> list[dict[str, Any]]:
    min_lag = wire.query_int(query, "minLagSeconds", 3600, minimum=0, maximum=wire.INT32_MAX)
    limit = wire.query_int(query, "limit", MAX_LIMIT, minimum=1, maximum=MAX_LIMIT)
    rows = await db.fetch(Q.groups_lagging, min_lag=float(min_lag), limit=limit)
    return [{
        "consumer_group": r["consumer_group"], "queue_name": r["queue_name"],
        "partition_name": r["partition_name"], "partition_id": str(r["partition_id"]),
        "worker_id": None if r["live_lease_id"] is None else str(r["live_lease_id"]),
        "offset_lag": int(r["offset_lag"]), "time_lag_seconds": int(r["time_lag"]),
        "lag_hours": round(float(r["time_lag"]) / 3600, 3),
        "oldest_unconsumed_at": stamp(r["head_at"]),
        "last_consumed_at": stamp(r["last_consumed_at"]),
    } for r in rows]


async def delete_group(db: Database, group: str, query: Mapping[str, str],
                       queue: str | None = None) -> dict[str, Any]:
    """Drop the group's cursors and leases (of one queue, or all) and its subscriptions; with
    deleteMetadata=false its next pop re-joins at its old start instead of the request's."""
    group = wire.consumer_group(group)
    delete_metadata = wire.query_bool(query, "deleteMetadata", True)
    queue_id = None if queue is None else (await queue_row(db, queue))["id"]

    async def run(conn: asyncpg.Connection) -> asyncpg.Record:
        await Q.group_lock_states.fetch(conn, consumer_group=group, queue_id=queue_id,
                                        partition_id=None)
        row = await Q.group_delete.fetchrow(conn, consumer_group=group, queue_id=queue_id,
                                            keep_start=not delete_metadata)
        assert row is not None  # counts: one row
        return row

    row = await db.in_transaction(run)
    reply: dict[str, Any] = {"success": True, "consumerGroup": group}
    if queue is not None:
        reply["queueName"] = queue
    reply.update({"deletedPartitions": row["deleted_partitions"],
                  "metadataDeleted": delete_metadata and row["subscriptions"] > 0})
    return reply


def parse_subscription(body: Any) -> dt.datetime:
    body = wire.require_object(body)
    value = body.get("subscriptionTimestamp")
    if value is None:
        raise BadRequest("Missing subscriptionTimestamp in request body")
    if not isinstance(value, str):
        raise BadRequest("subscriptionTimestamp must be an ISO-8601 string")
    return wire.parse_timestamp(value, "subscriptionTimestamp")


async def update_subscription(db: Database, group: str, body: Any) -> dict[str, Any]:
    group = wire.consumer_group(group)
    start_at = parse_subscription(body)

    async def run(conn: asyncpg.Connection) -> asyncpg.Record:
        await Q.group_lock_states.fetch(conn, consumer_group=group, queue_id=None,
                                        partition_id=None)
        await Q.seek_mode.fetch(conn)
        row = await Q.group_subscription.fetchrow(conn, consumer_group=group,
                                                  start_at=start_at)
        assert row is not None  # counts: one row
        return row

    row = await db.in_transaction(run)
    return {"success": True, "consumerGroup": group, "newTimestamp": stamp(start_at),
            "rowsUpdated": row["rows_updated"], "partitionsRepositioned": row["partitions_moved"]}


def parse_seek(body: Any) -> tuple[bool, dt.datetime | None]:
    body = wire.require_object(body)
    to_end = body.get("toEnd", False)
    if not isinstance(to_end, bool):
        raise BadRequest("toEnd must be a boolean")
    timestamp = body.get("timestamp")
    if to_end:
        return True, None  # toEnd wins when both are given
    if timestamp is None:
        raise BadRequest("Must specify either 'toEnd': true or 'timestamp'")
    if not isinstance(timestamp, str):
        raise BadRequest("timestamp must be an ISO-8601 string")
    return False, wire.parse_timestamp(timestamp, "timestamp")


async def seek(db: Database, wakeups: WakeRegistry, group: str, queue: str, body: Any,
               partition: str | None = None) -> dict[str, Any]:
    group = wire.consumer_group(group)
    to_end, target = parse_seek(body)
    q = await queue_row(db, queue)
    partition_id: uuid.UUID | None = None
    if partition is not None:
        found = await db.fetchrow(Q.partition_by_name, queue_id=q["id"],
                                  partition=wire.name(partition, "partition"))
        if found is None:
            raise NotFound("Partition not found")
        partition_id = found["id"]

    async def run(conn: asyncpg.Connection) -> list[asyncpg.Record]:
        await Q.group_lock_states.fetch(conn, consumer_group=group, queue_id=q["id"],
                                        partition_id=partition_id)
        await Q.seek_mode.fetch(conn)
        moved = await Q.group_seek.fetch(conn, queue_id=q["id"], consumer_group=group,
                                         partition_id=partition_id, to_end=to_end,
                                         target=target)
        if moved:
            await Q.notify_queue.fetch(conn, channel=CHANNEL, queue=q["name"])
        return moved

    moved = await db.in_transaction(run)
    if moved:
        # A rewind may make messages deliverable: long polls of the queue look again.
        wakeups.notify(q["name"])
    reply: dict[str, Any] = {"success": True, "consumerGroup": group, "queueName": q["name"],
                             "seekToEnd": to_end, "targetTimestamp": stamp(target)}
    if partition is None:
        # The partitions the group had touched (consumer_state.touched_at), as the reference
        # counts: not the never-consumed ones it only joined.
        reply["partitionsUpdated"] = sum(1 for row in moved if row["touched"])
    else:
        reply.update({"partitionName": partition, "updated": bool(moved),
                      "cursorMovedTo": stamp(moved[0]["moved_after"]) if moved else None})
    return reply
