"""The claim's floor (functions/pop_claim, docs/performance.md#the-claims-floor): a claim scans
a group's pending partitions from its floor and raises it every 2 s, never above a transaction
writing at the time; whoever sets a head_at below it (a seek back, a retried dead letter)
forgets it."""

from __future__ import annotations

import contextlib

import asyncpg
import trio

from tests.support.consuming import ack_batch, consume_all, data, pop, push
from tests.support.db import db_execute, db_fetch, db_fetchrow

AGE = "interval '1 hour'"


async def floor_of(broker, queue, group):
    return await db_fetchrow(broker.db, (
        "SELECT s.claim_floor, s.claim_floor_at FROM queen.subscriptions s "
        "JOIN queen.queues q ON q.id = s.queue_id WHERE q.name = $1 AND s.consumer_group = $2"),
        queue, group)


async def set_floor(broker, group, floor, floor_at="clock_timestamp()"):
    await db_execute(broker.db, f"UPDATE queen.subscriptions SET claim_floor = {floor}, "
                     f"claim_floor_at = {floor_at} WHERE consumer_group = $1", group)


async def age_messages(broker, partition=None):
    """Every commit time (and the heads that point at them) an hour earlier, as if pushed then."""
    where = "" if partition is None else (
        f" WHERE partition_id = (SELECT id FROM queen.partitions WHERE name = '{partition}')")
    for table, column in (("segments", "created_at"), ("transaction_index", "created_at"),
                          ("consumer_state", "head_at"),
                          ("dead_letters", "message_created_at")):
        await db_execute(broker.db,
                         f"UPDATE queen.{table} SET {column} = {column} - {AGE}{where}")


async def heads(broker):
    return [r[0] for r in await db_fetch(broker.db, "SELECT head_at FROM queen.consumer_state "
                                         "WHERE head_at IS NOT NULL")]


async def test_a_claim_sets_the_floor_and_forward_moves_never_forget_it(client, broker):
    await push(client, "fl", "a1", partition="a")
    await push(client, "fl", "b1", partition="b")
    await age_messages(broker, "a")
    assert data(await pop(client, "fl", consumerGroup="g", autoAck=True)) == ["a1"]
    floor, floor_at = await floor_of(broker, "fl", "g")
    # Set by the group's first claim, before it moved: a's head (an hour ago) was the oldest.
    assert floor_at is not None and floor < min(await heads(broker))
    await push(client, "fl", "b2", partition="b")
    assert await consume_all(client, "fl", "g") == ["b1", "b2"]
    await push(client, "fl", "b3", partition="b")
    # Acks, claims and fresh pushes never set a head_at below it: it is never forgotten.
    floor, floor_at = await floor_of(broker, "fl", "g")
    assert floor_at is not None and floor <= min(await heads(broker))


async def test_the_floor_rises_to_the_oldest_head_but_never_above_a_writer(client, broker):
    await push(client, "fl", "a1", partition="a")
    await age_messages(broker, "a")
    assert await pop(client, "fl", consumerGroup="g", partition="none") is None  # joins
    stale = "clock_timestamp() - interval '3 seconds'"
    here = "datname = current_database() AND pid <> pg_backend_pid()"
    writer = (f"SELECT pid, xact_start FROM pg_stat_activity WHERE {here} "
              "AND query LIKE '%pg_sleep(60)%'")

    async def write_and_wait():
        async def work(conn):
            async with conn.transaction():
                await conn.execute("SELECT txid_current()")  # a transaction that writes
                await conn.execute("SELECT pg_sleep(60)")

        with contextlib.suppress(asyncpg.QueryCanceledError):
            await broker.db.call(work)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_and_wait)
        with trio.fail_after(20):
            while (found := await db_fetchrow(broker.db, writer)) is None:
                await trio.sleep(0.01)
        pid, writing_from = found
        await push(client, "fl", "b1", partition="b")  # committed after the writer began
        await set_floor(broker, "g", "claim_floor", stale)
        assert await pop(client, "fl", consumerGroup="g", partition="none") is None
        floor, _ = await floor_of(broker, "fl", "g")
        # The oldest head is an hour old: the floor is there, below the writer's start.
        assert floor == min(await heads(broker)) and floor < writing_from
        assert data(await pop(client, "fl", consumerGroup="g", autoAck=True)) == ["a1"]
        await set_floor(broker, "g", "claim_floor", stale)
        assert await pop(client, "fl", consumerGroup="g", partition="none") is None
        # b's head is newer than the writer's start: the floor stops at the writer (or lower,
        # at a write of the broker's own that began before it and is still open).
        (b_head,) = await heads(broker)
        assert (await floor_of(broker, "fl", "g"))[0] <= writing_from < b_head
        await db_fetchrow(broker.db, "SELECT pg_cancel_backend($1)", pid)
    await set_floor(broker, "g", "claim_floor", stale)
    assert await pop(client, "fl", consumerGroup="g", partition="none") is None
    assert writing_from < (await floor_of(broker, "fl", "g"))[0] <= b_head


async def test_a_seek_back_forgets_the_floor(client, broker):
    await push(client, "fl", "m1", "m2")
    assert await consume_all(client, "fl", "g") == ["m1", "m2"]
    await age_messages(broker)
    await set_floor(broker, "g", "clock_timestamp() - interval '5 seconds'")
    r = await client.post("/api/v1/consumer-groups/g/queues/fl/seek",
                          json={"timestamp": "2000-01-01T00:00:00Z"})
    assert r.status_code == 200, r.text
    assert await floor_of(broker, "fl", "g") == (None, None)
    assert await consume_all(client, "fl", "g") == ["m1", "m2"]
    assert (await floor_of(broker, "fl", "g"))[1] is not None  # refreshed by that claim


async def test_a_retried_dead_letter_forgets_the_floor(client, broker):
    await push(client, "fl", "poison")
    reply = await pop(client, "fl", consumerGroup="g")
    await ack_batch(client, reply["messages"], "dlq", group="g", error="broken")
    assert await pop(client, "fl", consumerGroup="g") is None  # caught up
    await age_messages(broker)
    await set_floor(broker, "g", "clock_timestamp() - interval '5 seconds'")
    (dead,) = reply["messages"]
    r = await client.post(f"/api/v1/messages/{dead['partitionId']}/{dead['transactionId']}"
                          "/retry?consumerGroup=g")
    assert r.status_code == 200, r.text
    assert await floor_of(broker, "fl", "g") == (None, None)
    assert data(await pop(client, "fl", consumerGroup="g", autoAck=True)) == ["poison"]
