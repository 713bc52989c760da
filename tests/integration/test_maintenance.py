"""Partition reclaim: empty and idle partitions are deleted; a later push recreates them."""

from __future__ import annotations

import contextlib
import datetime as dt

import trio
import trio.lowlevel

from queen_trio.ops.maintenance import RECLAIM_LOCK_KEY, reclaim_partitions
from tests.support.db import db_execute, db_fetchval
from tests.support.storage import partition_id, stored_messages


def days_from_now(days):
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=days)


async def test_empty_idle_partition_is_reclaimed_and_recreated_by_a_push(client, broker):
    await client.post("/api/v1/push", json={"items": [{"queue": "r", "partition": "old",
                                                       "payload": 1}]})
    old_id = await partition_id(broker.db, "r", "old")
    # Its messages are gone (as retention would remove them): the partition is empty.
    await db_execute(broker.db, "DELETE FROM queen.segments")

    assert await reclaim_partitions(broker.db, wait=True, idle_days=30, now=days_from_now(29)) == 0
    assert await reclaim_partitions(broker.db, wait=True, idle_days=30, now=days_from_now(31)) == 1
    assert await partition_id(broker.db, "r", "old") is None
    assert await db_fetchval(broker.db,
        "SELECT count(*) FROM queen.transaction_index WHERE partition_id = $1", old_id) == 0

    r = await client.post("/api/v1/push", json={"items": [{"queue": "r", "partition": "old",
                                                           "payload": 2}]})
    assert r.status_code == 201
    new_id = await partition_id(broker.db, "r", "old")
    assert new_id is not None and new_id != old_id
    assert [m.offset for m in await stored_messages(broker.db, "r", "old")] == [0]


async def test_partitions_with_messages_are_kept(client, broker):
    await client.post("/api/v1/push", json={"items": [{"queue": "r", "payload": 1}]})
    assert await reclaim_partitions(broker.db, wait=True, idle_days=30, now=days_from_now(365)) == 0


async def test_configured_default_partition_is_reclaimed_when_idle(client, broker):
    await client.post("/api/v1/configure", json={"queue": "c"})
    assert await reclaim_partitions(broker.db, wait=True, idle_days=30, now=days_from_now(31)) == 1


async def test_push_racing_the_reclaim_keeps_or_recreates_its_partition(client, broker):
    await client.post("/api/v1/configure", json={"queue": "race"})

    async def reclaim_loop():
        for _ in range(20):
            await reclaim_partitions(broker.db, wait=True, idle_days=0, now=days_from_now(1))
            await trio.lowlevel.checkpoint()

    async def push_loop():
        for n in range(20):
            r = await client.post("/api/v1/push", json={"items": [
                {"queue": "race", "payload": n}]})
            assert r.status_code == 201
            # Right after the push the partition holds its message.
            assert await partition_id(broker.db, "race", "Default") is not None

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reclaim_loop)
        nursery.start_soon(push_loop)
    stored = await stored_messages(broker.db, "race", "Default")
    assert stored, "the last partition holds what was pushed after the last reclaim"


async def test_reclaim_runs_on_one_broker_at_a_time(broker):
    import asyncpg

    async def hold_lock():
        # Holds the lock until the test cancels its statement (no timing to race).
        with contextlib.suppress(asyncpg.QueryCanceledError):
            await broker.db.in_transaction(lambda c: c.execute(
                "SELECT pg_advisory_xact_lock($1), pg_sleep(60)", RECLAIM_LOCK_KEY))

    # A bigint advisory key shows in pg_locks as classid (high half) and objid (low half).
    # Only our holder: the broker's own reclaim service takes the same lock for a moment.
    holder_sql = ("SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                  "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1 "
                  "AND l.objid = $2 AND a.query LIKE '%pg_sleep(60)%'")
    key = (RECLAIM_LOCK_KEY >> 32, RECLAIM_LOCK_KEY & 0xFFFFFFFF)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_lock)
        while (holder := await db_fetchval(broker.db, holder_sql, *key)) is None:
            await trio.sleep(0.01)
        # Another "broker" holds the maintenance lock: this pass skips its turn.
        assert await reclaim_partitions(broker.db, idle_days=0, now=days_from_now(1)) is None
        await db_fetchval(broker.db, "SELECT pg_cancel_backend($1)", holder)
    assert await reclaim_partitions(broker.db, wait=True, idle_days=0, now=days_from_now(1)) == 0
