"""The claim's index outside the state rows (migration 0011, functions/keep_consumer_index):
queen.consumer_heads (with each head's not_until: its live lease or retryDelay) and
queen.consumer_leases always say what consumer_state says, and no index of consumer_state
holds a column a claim or an ack changes, so their updates are HOT."""

from __future__ import annotations

import uuid

from tests.support.consuming import ack, ack_batch, consume_all, data, pop, push
from tests.support.db import db_execute, db_fetch

STATE_HEADS = """SELECT queue_id, consumer_group, head_at, partition_id,
                          greatest(lease_expires_at, not_before)
                     FROM queen.consumer_state WHERE head_at IS NOT NULL"""
HEADS = """SELECT queue_id, consumer_group, head_at, partition_id, not_until
             FROM queen.consumer_heads"""
STATE_LEASES = """SELECT lease_id, partition_id, consumer_group
                    FROM queen.consumer_state WHERE lease_id IS NOT NULL"""
LEASES = "SELECT lease_id, partition_id, consumer_group FROM queen.consumer_leases"


async def assert_index_matches(broker) -> None:
    for state, index in ((STATE_HEADS, HEADS), (STATE_LEASES, LEASES)):
        rows = sorted(tuple(r) for r in await db_fetch(broker.db, state))
        assert sorted(tuple(r) for r in await db_fetch(broker.db, index)) == rows


async def test_claims_and_acks_update_state_rows_hot(client, broker):
    # One push each: each message has its own commit time, so every ack moves the head.
    pushed = [item for m in ("m1", "m2", "m3") for item in await push(client, "hot", m)]
    await push(client, "hot", "other", partition="b")
    assert data(await pop(client, "hot", partition="b", consumerGroup="g",
                          autoAck=True)) == ["other"]  # the group joins, with its state rows

    async def claim_and_ack_each(conn) -> tuple[int, int]:
        async with conn.transaction():
            for item in pushed:
                lease = uuid.uuid4()
                claimed = await conn.fetch(
                    "SELECT partition_id FROM queen.pop_claim('hot', 'Default', 'g', 1, 1, $1,"
                    " false, 'all', NULL)", lease)
                (partition_id,) = {r["partition_id"] for r in claimed}
                acked = await conn.fetch(
                    "SELECT item_no, success FROM queen.ack_batch(ARRAY['g'], ARRAY[$1::uuid],"
                    " ARRAY[$2], ARRAY['completed'], ARRAY[$3::uuid], ARRAY[NULL])",
                    partition_id, item["transaction_id"], lease)
                assert [tuple(r) for r in acked if r["item_no"] is not None] == [(1, True)]
            # This transaction's own counts: every update of a state row, and the HOT ones.
            return tuple(await conn.fetchrow(
                "SELECT pg_stat_get_xact_tuples_updated('queen.consumer_state'::regclass),"
                " pg_stat_get_xact_tuples_hot_updated('queen.consumer_state'::regclass)"))

    updated, hot = await broker.db.call(claim_and_ack_each)
    assert updated >= 2 * len(pushed)  # a claim and an ack each
    assert hot == updated
    await assert_index_matches(broker)


async def test_the_index_follows_every_kind_of_write(client, broker):
    # Pushes, leases, acks, nacks, a lease extended, an autoAck pop.
    await push(client, "ix", "a1", "a2", partition="a")
    await push(client, "ix", "b1", partition="b")
    await client.post("/api/v1/configure", json={"queue": "ix2", "options": {}})
    await push(client, "ix2", "c1", partition="c")
    leased = await pop(client, "ix", consumerGroup="g", batch=1)
    await assert_index_matches(broker)
    (message,) = leased["messages"]
    r = await client.post(f"/api/v1/lease/{message['leaseId']}/extend", json={"seconds": 30})
    assert r.status_code == 200, r.text
    await assert_index_matches(broker)
    await ack(client, message, "failed", group="g")  # a nack: the message again, later
    await assert_index_matches(broker)
    assert len(await consume_all(client, "ix", "g")) == 3
    await assert_index_matches(broker)
    # A dead letter, retried: the caught-up group's head goes back to it.
    await push(client, "ix", "poison", partition="a")
    reply = await pop(client, "ix", consumerGroup="g")
    await ack_batch(client, reply["messages"], "dlq", group="g", error="broken")
    await assert_index_matches(broker)
    (dead,) = (await client.get("/api/v1/dlq", params={"queue": "ix"})).json()["messages"]
    r = await client.post(f"/api/v1/messages/{dead['partitionId']}/{dead['transactionId']}/retry")
    assert r.status_code == 200, r.text
    await assert_index_matches(broker)
    assert await consume_all(client, "ix", "g") == ["poison"]
    # A seek back, a leased pop whose lease is released, a partition's and a group's deletion.
    r = await client.post("/api/v1/consumer-groups/g/queues/ix/seek",
                          json={"timestamp": "2000-01-01T00:00:00Z"})
    assert r.status_code == 200, r.text
    await assert_index_matches(broker)
    assert await pop(client, "ix2", consumerGroup="g2") is not None
    await db_execute(broker.db, "SELECT queen.release_lease(lease_id) FROM queen.consumer_leases")
    await assert_index_matches(broker)
    await db_execute(broker.db, "DELETE FROM queen.partitions WHERE name = 'b'")
    await assert_index_matches(broker)
    r = await client.delete("/api/v1/consumer-groups/g")
    assert r.status_code == 200, r.text
    await assert_index_matches(broker)
    r = await client.delete("/api/v1/resources/queues/ix2")
    assert r.status_code == 200, r.text
    await assert_index_matches(broker)
    assert await db_fetch(broker.db, "SELECT 1 FROM queen.consumer_heads h JOIN queen.queues q"
                          " ON q.id = h.queue_id WHERE q.name = 'ix2'") == []


async def test_a_lease_is_found_through_consumer_leases(client, broker):
    await push(client, "lz", "m1", partition="a")
    await push(client, "lz", "m2", partition="b")
    reply = await pop(client, "lz", consumerGroup="g", batch=2, partitions=2)
    assert sorted(data(reply)) == ["m1", "m2"]
    lease = reply["messages"][0]["leaseId"]
    assert {m["leaseId"] for m in reply["messages"]} == {lease}
    r = await client.post(f"/api/v1/lease/{lease}/extend", json={"seconds": 120})
    assert r.status_code == 200 and r.json()["renewed"] == 2, r.text  # both partitions
    await ack_batch(client, reply["messages"], group="g")
    r = await client.post(f"/api/v1/lease/{lease}/extend", json={"seconds": 120})
    # Settled: no partition holds it any more.
    assert r.json()["renewed"] == 0 and r.json()["error"] == "Lease not found", r.text
    await assert_index_matches(broker)
