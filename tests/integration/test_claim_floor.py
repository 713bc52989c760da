"""The claim's floor (functions/pop_claim, docs/performance.md#the-claims-floor): a claim scans
a group's pending partitions from its floor, refreshes the floor every 10 s, and whoever sets
a head_at below it (a seek back, a retried dead letter) forgets it."""

from __future__ import annotations

from tests.support.consuming import ack_batch, data, pop, push
from tests.support.db import db_execute, db_fetchrow

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


async def consume_all(client, queue, group):
    got = []
    while (reply := await pop(client, queue, batch=10, consumerGroup=group)) is not None:
        got += data(reply)
        await ack_batch(client, reply["messages"], group=group)
    return got


async def test_a_claim_sets_the_floor_and_cursor_moves_keep_it(client, broker):
    await push(client, "fl", "a1", partition="a")
    await push(client, "fl", "b1", partition="b")
    await age_messages(broker, "a")
    assert data(await pop(client, "fl", consumerGroup="g", autoAck=True)) == ["a1"]
    floor, floor_at = await floor_of(broker, "fl", "g")
    head_b = (await db_fetchrow(broker.db, "SELECT cs.head_at FROM queen.consumer_state cs "
                                "JOIN queen.partitions p ON p.id = cs.partition_id "
                                "WHERE p.name = 'b'"))[0]
    # Refreshed by the group's first claim, before it moved: a's head (an hour ago) was oldest.
    assert floor_at is not None and floor < head_b
    await push(client, "fl", "b2", partition="b")
    assert await consume_all(client, "fl", "g") == ["b1", "b2"]
    # Acks, a claim and a fresh push never set a head_at below it: the floor stays.
    assert await floor_of(broker, "fl", "g") == (floor, floor_at)


async def test_the_scan_starts_at_the_floor_until_a_refresh_lowers_it(client, broker):
    await push(client, "fl", "old", partition="a")
    await push(client, "fl", "new", partition="b")
    assert await pop(client, "fl", consumerGroup="g", partition="none") is None  # joins
    await age_messages(broker, "a")
    # A floor above a's head (which no writer of this broker leaves): the scan starts there.
    await set_floor(broker, "g", "clock_timestamp() - interval '5 seconds'")
    assert data(await pop(client, "fl", consumerGroup="g", autoAck=True)) == ["new"]
    assert await pop(client, "fl", consumerGroup="g", autoAck=True) is None
    # 10 s later the next claim refreshes it from the oldest head, and a is found.
    await set_floor(broker, "g", "claim_floor", "clock_timestamp() - interval '11 seconds'")
    assert data(await pop(client, "fl", consumerGroup="g", autoAck=True)) == ["old"]
    floor, floor_at = await floor_of(broker, "fl", "g")
    assert floor_at is not None
    oldest = (await db_fetchrow(broker.db, "SELECT min(created_at) FROM queen.segments"))[0]
    assert floor <= oldest


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
