"""Retention, completed retention, maxWaitTimeSeconds eviction, dedup-index pruning."""

from __future__ import annotations

import datetime as dt

from queen_trio.ids import ZERO_UUID
from queen_trio.ops.maintenance import retention_pass
from tests.support.consuming import ack_batch, configure, data, pop, push
from tests.support.db import db_execute, db_fetchval


def later(seconds):
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)


async def count(broker, table):
    return await db_fetchval(broker.db, f"SELECT count(*) FROM queen.{table}")


async def test_nothing_is_deleted_without_retention_options(client, broker):
    await push(client, "keep", 1, 2)
    done = await retention_pass(broker.db, wait=True, now=later(10 * 365 * 86400))
    assert done == {"expired": 0, "completed": 0, "evicted": 0, "pruned": 0}
    assert await count(broker, "segments") == 1


async def test_retention_seconds_deletes_whatever_was_consumed(client, broker):
    await configure(client, "ret", retentionSeconds=60)
    await push(client, "ret", "old", txids=["t-old"])
    done = await retention_pass(broker.db, wait=True, now=later(30))
    assert done["expired"] == 0
    done = await retention_pass(broker.db, wait=True, now=later(61))
    assert done["expired"] == 1
    assert await pop(client, "ret") is None
    # The index row outlives the segment within the dedup window: a duplicate still answers,
    # with the "original unknown" id.
    r = await push(client, "ret", "again", txids=["t-old"])
    assert r[0]["status"] == "duplicate" and r[0]["message_id"] == ZERO_UUID


async def test_completed_retention_never_passes_the_slowest_group(client, broker):
    await configure(client, "done", completedRetentionSeconds=10)
    await push(client, "done", "a", "b")
    fast = await pop(client, "done", batch=5, consumerGroup="fast")
    slow = await pop(client, "done", batch=5, consumerGroup="slow")
    await ack_batch(client, fast["messages"], group="fast")
    assert (await retention_pass(broker.db, wait=True, now=later(3600)))["completed"] == 0
    await ack_batch(client, slow["messages"], group="slow")
    assert (await retention_pass(broker.db, wait=True, now=later(5)))["completed"] == 0  # too young
    assert (await retention_pass(broker.db, wait=True, now=later(3600)))["completed"] == 1
    assert await count(broker, "segments") == 0


async def test_completed_retention_keeps_a_partition_no_group_reads(client, broker):
    await configure(client, "unread", completedRetentionSeconds=1)
    await push(client, "unread", "x")
    assert (await retention_pass(broker.db, wait=True, now=later(3600)))["completed"] == 0


async def test_max_wait_moves_old_pending_messages_to_the_dlq(client, broker):
    await configure(client, "wait", maxWaitTimeSeconds=30)
    await push(client, "wait", "stale-1", "stale-2", partition="a")
    await push(client, "wait", "leased", partition="b")
    held = await pop(client, "wait", partition="b")  # leased: left alone until its lease ends
    assert data(held) == ["leased"]
    done = await retention_pass(broker.db, wait=True, now=later(31))
    assert done["evicted"] == 2
    dlq = (await client.get("/api/v1/dlq", params={"queue": "wait"})).json()
    assert sorted(m["data"] for m in dlq["messages"]) == ["stale-1", "stale-2"]
    assert {m["errorMessage"] for m in dlq["messages"]} == {"maxWaitTimeSeconds exceeded"}
    assert await pop(client, "wait", partition="a") is None
    assert (await ack_batch(client, held["messages"]))[0]["success"] is True


async def test_max_wait_stops_at_the_first_message_not_old_enough(client, broker):
    # Two old messages in one segment (the group's cursor inside it, after one was consumed),
    # then a young one: only the old one left goes, and the young one is still delivered.
    await configure(client, "waitmix", maxWaitTimeSeconds=30)
    await push(client, "waitmix", "old-1", "old-2", partition="a")
    await db_execute(broker.db, "UPDATE queen.segments SET created_at = created_at - "
                     "interval '1 hour'")
    first = await pop(client, "waitmix", partition="a")
    assert data(first) == ["old-1"]
    assert (await ack_batch(client, first["messages"]))[0]["success"] is True
    await push(client, "waitmix", "young", partition="a")
    done = await retention_pass(broker.db, wait=True, now=later(1))
    assert done["evicted"] == 1
    dlq = (await client.get("/api/v1/dlq", params={"queue": "waitmix"})).json()
    assert [m["data"] for m in dlq["messages"]] == ["old-2"]
    assert data(await pop(client, "waitmix", partition="a")) == ["young"]


async def test_dedup_index_is_pruned_past_window_and_segment(client, broker):
    await configure(client, "prune", retentionSeconds=10, dedupWindowSeconds=20)
    await push(client, "prune", "x", txids=["p-1"])
    await retention_pass(broker.db, wait=True, now=later(11))  # the segment goes first
    assert await count(broker, "transaction_index") == 1
    done = await retention_pass(broker.db, wait=True, now=later(21))
    assert done["pruned"] == 1
    assert await count(broker, "transaction_index") == 0


async def pruned_to(broker, queue):
    return await db_fetchval(
        broker.db, "SELECT ip.pruned_to FROM queen.index_pruning ip "
        "JOIN queen.partitions p ON p.id = ip.partition_id "
        "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1", queue)


async def test_pruning_goes_on_from_where_it_stopped(client, broker):
    """A partition's pruning is done below its first kept offset once no index row is left
    there (queen.index_pruning); what retention removes later is pruned in turn."""
    await configure(client, "again", retentionSeconds=10, dedupWindowSeconds=20)
    await push(client, "again", "a", txids=["g-1"])
    await retention_pass(broker.db, wait=True, now=later(11))
    assert await pruned_to(broker, "again") is None  # the row waits for its window
    assert (await retention_pass(broker.db, wait=True, now=later(21)))["pruned"] == 1
    assert await pruned_to(broker, "again") == 1
    await push(client, "again", "b", "c", txids=["g-2", "g-3"])
    await retention_pass(broker.db, wait=True, now=later(11))
    assert (await retention_pass(broker.db, wait=True, now=later(21)))["pruned"] == 2
    assert await pruned_to(broker, "again") == 3
    assert await count(broker, "transaction_index") == 0
    assert (await retention_pass(broker.db, wait=True, now=later(3600)))["pruned"] == 0
    # The record goes once its partition is gone.
    assert (await client.delete("/api/v1/resources/queues/again")).status_code == 200
    await retention_pass(broker.db, wait=True, now=later(1))
    assert await count(broker, "index_pruning") == 0


async def test_pruning_leaves_alone_what_retention_never_touched(client, broker):
    await configure(client, "cut", retentionSeconds=10, dedupWindowSeconds=1)
    await push(client, "cut", "x", txids=["c-1"])
    await push(client, "whole", "y", txids=["w-1"])  # no retention: its segment stays
    done = await retention_pass(broker.db, wait=True, now=later(11))
    assert done["expired"] == 1 and done["pruned"] == 1  # its window was past already
    assert (await retention_pass(broker.db, wait=True, now=later(3600)))["pruned"] == 0
    assert await count(broker, "index_pruning") == 1
    assert await db_fetchval(
        broker.db, "SELECT transaction_id FROM queen.transaction_index") == "w-1"


async def test_trace_events_go_with_their_message(client, broker):
    async def traced_message(queue: str, txid: str) -> None:
        await push(client, queue, "x", txids=[txid])
        m = (await pop(client, queue))["messages"][0]
        r = await client.post("/api/v1/traces", json={
            "transactionId": txid, "partitionId": m["partitionId"], "eventType": "info",
            "data": {"step": "seen"}})
        assert r.status_code == 201

    await configure(client, "traced", retentionSeconds=10)
    await traced_message("traced", "t-1")
    await traced_message("kept", "k-1")
    await retention_pass(broker.db, wait=True, now=later(11))
    assert await db_fetchval(broker.db, "SELECT transaction_id FROM queen.trace_events") == "k-1"




async def test_a_pass_that_must_run_waits_for_the_one_holding_the_lock(client, broker):
    """Issue 25, point 15: a test's pass met the broker's own start-up pass holding the lock
    and got None. A pass asked with wait=True waits for the holder, then runs."""
    import contextlib

    import asyncpg
    import trio

    from queen_trio.ops.maintenance import RETENTION_LOCK_KEY

    await push(client, "keep", 1)

    async def hold_lock():
        # Holds the lock until the test cancels its statement (no timing to race).
        with contextlib.suppress(asyncpg.QueryCanceledError):
            await broker.db.in_transaction(lambda c: c.execute(
                "SELECT pg_advisory_xact_lock($1), pg_sleep(60)", RETENTION_LOCK_KEY))

    key = (RETENTION_LOCK_KEY >> 32, RETENTION_LOCK_KEY & 0xFFFFFFFF)
    holder_sql = ("SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                  "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1 "
                  "AND l.objid = $2 AND a.query LIKE '%pg_sleep(60)%'")
    waiting_sql = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                   "AND NOT granted AND classid = $1 AND objid = $2")
    done = {}

    async def must_run():
        done["pass"] = await retention_pass(broker.db, wait=True, now=later(1))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_lock)
        while (holder := await db_fetchval(broker.db, holder_sql, *key)) is None:
            await trio.sleep(0.01)
        assert await retention_pass(broker.db, now=later(1)) is None  # skips its turn
        nursery.start_soon(must_run)
        while not await db_fetchval(broker.db, waiting_sql, *key):
            await trio.sleep(0.01)
        assert "pass" not in done  # it waits for the holder
        await db_fetchval(broker.db, "SELECT pg_cancel_backend($1)", holder)
    assert done["pass"] == {"expired": 0, "completed": 0, "evicted": 0, "pruned": 0}
