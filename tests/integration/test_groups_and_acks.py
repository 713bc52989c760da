"""Consumer groups, subscriptions, acks, retries and the DLQ (docs/decisions.md#pop,
docs/decisions.md#acks)."""

from __future__ import annotations

import trio

from tests.support.consuming import ack, ack_batch, configure, data, pop, push
from tests.support.db import db_execute, db_fetchval


async def expire_leases(broker, queue):
    """Make every lease of the queue's partitions expired (as time passing would)."""
    await db_execute(broker.db,
        "UPDATE queen.consumer_state SET lease_expires_at = clock_timestamp() - interval '1 s' "
        "WHERE lease_id IS NOT NULL AND queue_id = (SELECT id FROM queen.queues WHERE name = $1)",
        queue)


async def test_two_groups_each_receive_every_message_in_order(client):
    await push(client, "fan", *range(10))
    for group in ("billing", "audit"):
        got = []
        while (reply := await pop(client, "fan", batch=3, consumerGroup=group)) is not None:
            got += data(reply)
            assert reply["consumerGroup"] == group
            assert all(m["consumerGroup"] == group for m in reply["messages"])
            results = await ack_batch(client, reply["messages"], group=group)
            assert all(r["success"] for r in results)
        assert got == list(range(10))


async def test_two_consumers_of_one_group_never_hold_the_same_partition(client):
    for p in range(6):
        await push(client, "share", *[f"{p}-{i}" for i in range(5)], partition=f"p{p}")
    held: dict[str, str] = {}
    seen: list[str] = []

    async def consumer(name):
        while True:
            reply = await pop(client, "share", batch=2, consumerGroup="workers")
            if reply is None:
                return
            partition = reply["partition"]
            assert partition not in held, f"{partition} held by {held.get(partition)} and {name}"
            held[partition] = name
            await trio.sleep(0.01)
            seen.extend(data(reply))
            del held[partition]
            for m in reply["messages"]:
                assert (await ack(client, m, group="workers"))["success"]

    async with trio.open_nursery() as nursery:
        for n in range(4):
            nursery.start_soon(consumer, f"c{n}")
    assert sorted(seen) == sorted(f"{p}-{i}" for p in range(6) for i in range(5))


async def test_empty_consumer_group_is_queue_mode(client):
    await push(client, "qm", 1, 2)
    reply = await pop(client, "qm", consumerGroup="")
    assert reply["consumerGroup"] == "__QUEUE_MODE__"
    # The same group: its lease on the only partition is held.
    assert await pop(client, "qm", consumerGroup="__QUEUE_MODE__") is None
    assert (await ack(client, reply["messages"][0], group=""))["success"] is True
    assert data(await pop(client, "qm")) == [2]


async def test_subscription_new_skips_history_and_sees_later_partitions(client):
    await push(client, "sub", "old-1", partition="a")
    assert await pop(client, "sub", consumerGroup="late", subscriptionMode="new") is None
    await push(client, "sub", "new-1", partition="a")
    await push(client, "sub", "new-2", partition="brand-new")
    got = []
    while (reply := await pop(client, "sub", consumerGroup="late", partitions=5, batch=10)):
        got += data(reply)
        await ack_batch(client, reply["messages"], group="late")
    assert sorted(got) == ["new-1", "new-2"]
    # Fixed at first contact: a later pop asking for "all" does not rewind.
    assert await pop(client, "sub", consumerGroup="late", subscriptionMode="all") is None
    # Queue mode ignores subscriptionMode=new.
    assert data(await pop(client, "sub", partition="a", batch=5, subscriptionMode="new")) == [
        "old-1", "new-1"]


async def test_subscription_from_timestamp_includes_a_message_stamped_exactly_then(client, broker):
    await push(client, "ts", "before")
    await trio.sleep(0.01)
    await push(client, "ts", "at")
    await push(client, "ts", "after")
    stamp = await db_fetchval(broker.db,
        "SELECT min(created_at) FROM queen.segments WHERE first_offset = 1")
    iso = stamp.isoformat().replace("+00:00", "Z")
    reply = await pop(client, "ts", batch=10, consumerGroup="g", subscriptionFrom=iso)
    assert data(reply) == ["at", "after"]


async def test_ack_moves_the_cursor_cumulatively_and_releases_when_all_settled(client):
    await push(client, "cum", *range(5))
    reply = await pop(client, "cum", batch=5)
    third = reply["messages"][2]
    result = await ack(client, third)
    assert result["success"] is True and result["leaseReleased"] is False
    assert result["queueName"] == "cum" and result["partitionName"] == "Default"
    assert result["error"] is None and result["dlq"] is False
    # #1 and #2 were completed with it; the lease stays for #4 and #5.
    assert await pop(client, "cum") is None
    last = await ack(client, reply["messages"][4])
    assert last["leaseReleased"] is True
    assert await pop(client, "cum") is None  # everything settled


async def test_late_ack_never_moves_the_cursor_back(client, broker):
    await push(client, "late", *range(4))
    first = await pop(client, "late", batch=2)
    for m in first["messages"]:
        assert (await ack(client, m))["success"]
    second = await pop(client, "late", batch=2)
    stale = await ack(client, first["messages"][0])
    assert stale["success"] is False
    stale_no_lease = await ack(client, first["messages"][0], lease=False)
    assert stale_no_lease["success"] is False
    cursor = await db_fetchval(broker.db, "SELECT cursor_offset FROM queen.consumer_state")
    assert cursor == 2
    assert data(second) == [2, 3]


async def test_ack_fencing_and_group_mismatch(client):
    await push(client, "fence", 1)
    reply = await pop(client, "fence")
    m = reply["messages"][0]
    wrong = dict(m, leaseId="0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83")
    assert (await ack(client, wrong))["error"] == "Invalid or expired lease"
    other_group = await ack(client, m, group="someone-else")
    assert other_group["success"] is False and other_group["error"]
    unknown = dict(m, transactionId="never-pushed")
    assert (await ack(client, unknown))["error"] == "Message not found"
    # Without a leaseId the ack is honoured while the delivery's lease is live.
    assert (await ack(client, m, lease=False))["success"] is True


async def test_ack_without_lease_after_expiry_is_refused(client, broker):
    await push(client, "exp", 1)
    reply = await pop(client, "exp")
    await expire_leases(broker, "exp")
    result = await ack(client, reply["messages"][0], lease=False)
    assert result["success"] is False


async def test_whole_batch_nack_is_redelivered_then_dead_lettered_uniformly(client):
    await configure(client, "nack", retryLimit=2)
    await push(client, "nack", "m1", "m2", "m3")
    deliveries = 0
    while (reply := await pop(client, "nack", batch=3)) is not None:
        deliveries += 1
        assert data(reply) == ["m1", "m2", "m3"]
        results = await ack_batch(client, reply["messages"], "failed", error="boom")
        assert all(r["success"] for r in results)
    assert deliveries == 3  # retryLimit 2 allows 3 deliveries
    r = await client.get("/api/v1/dlq", params={"queue": "nack"})
    body = r.json()
    assert body["total"] == 3
    assert sorted(m["data"] for m in body["messages"]) == ["m1", "m2", "m3"]
    assert {m["errorMessage"] for m in body["messages"]} == {"boom"}
    assert {m["consumerGroup"] for m in body["messages"]} == {"__QUEUE_MODE__"}


async def test_after_a_dlq_the_next_batch_gets_its_full_retries(client):
    await configure(client, "fresh", retryLimit=1)
    await push(client, "fresh", "poison")
    for _ in range(2):
        reply = await pop(client, "fresh")
        await ack(client, reply["messages"][0], "failed")
    assert await pop(client, "fresh") is None
    await push(client, "fresh", "next")
    reply = await pop(client, "fresh")
    await ack(client, reply["messages"][0], "failed")
    again = await pop(client, "fresh")
    assert data(again) == ["next"], "one failure must not exhaust the retries"


async def test_retry_status_redelivers_without_counting(client, broker):
    await configure(client, "rt", retryLimit=0)
    await push(client, "rt", "x")
    for _ in range(3):
        reply = await pop(client, "rt")
        assert data(reply) == ["x"]
        result = await ack(client, reply["messages"][0], "retry")
        assert result["success"] and result["leaseReleased"]
    assert await db_fetchval(broker.db, "SELECT retry_count FROM queen.consumer_state") == 0


async def test_dlq_status_dead_letters_at_once(client):
    await push(client, "now-dlq", "bad", "good")
    reply = await pop(client, "now-dlq", batch=2)
    result = await ack(client, reply["messages"][0], "dlq", error="unparseable")
    assert result["dlq"] is True and result["success"] is True
    assert (await ack(client, reply["messages"][1]))["leaseReleased"] is True
    dlq = (await client.get("/api/v1/dlq", params={"queue": "now-dlq"})).json()
    assert [m["data"] for m in dlq["messages"]] == ["bad"]
    assert dlq["messages"][0]["errorMessage"] == "unparseable"


async def test_poison_message_with_expiring_leases_reaches_the_dlq(client, broker):
    """A consumer that crashes (never acks): retryLimit+1 deliveries, then the DLQ."""
    await configure(client, "poison", retryLimit=2)
    await push(client, "poison", "kills-the-consumer", "fine")
    deliveries = 0
    while True:
        reply = await pop(client, "poison")
        if reply is None or data(reply) != ["kills-the-consumer"]:
            break
        deliveries += 1
        await expire_leases(broker, "poison")  # the consumer died holding it
    assert deliveries == 3
    assert data(reply) == ["fine"]
    dlq = (await client.get("/api/v1/dlq", params={"queue": "poison"})).json()
    assert [m["data"] for m in dlq["messages"]] == ["kills-the-consumer"]


async def test_dead_letter_queue_off_drops_exhausted_messages(client):
    await configure(client, "drop", retryLimit=0, deadLetterQueue=False)
    await push(client, "drop", "gone", "kept")
    reply = await pop(client, "drop")
    assert (await ack(client, reply["messages"][0], "failed"))["dlq"] is False
    assert data(await pop(client, "drop")) == ["kept"]
    dlq = (await client.get("/api/v1/dlq", params={"queue": "drop"})).json()
    assert dlq["total"] == 0


async def test_nack_stops_later_acks_of_the_partition_in_the_same_call(client):
    await push(client, "stop", "a", "b", "c")
    reply = await pop(client, "stop", batch=3)
    ms = reply["messages"]
    body = {"acknowledgments": [
        {"transactionId": ms[0]["transactionId"], "partitionId": ms[0]["partitionId"],
         "status": "completed", "leaseId": ms[0]["leaseId"]},
        {"transactionId": ms[1]["transactionId"], "partitionId": ms[1]["partitionId"],
         "status": "retry", "leaseId": ms[1]["leaseId"]},
        {"transactionId": ms[2]["transactionId"], "partitionId": ms[2]["partitionId"],
         "status": "completed", "leaseId": ms[2]["leaseId"]},
    ]}
    results = (await client.post("/api/v1/ack/batch", json=body)).json()
    assert [r["success"] for r in results] == [True, True, False]
    assert [r["index"] for r in results] == [0, 1, 2]
    assert data(await pop(client, "stop", batch=3)) == ["b", "c"]


async def test_retry_delay_is_a_not_before_time(client):
    await configure(client, "delay", retryDelay=2000)
    await push(client, "delay", "x")
    reply = await pop(client, "delay")
    await ack(client, reply["messages"][0], "failed")
    assert await pop(client, "delay") is None
    await trio.sleep(2.1)
    assert data(await pop(client, "delay")) == ["x"]


async def test_one_ack_batch_call_settles_acks_of_several_groups(client, broker):
    # The ack fusion sends acks of different requests (and groups) in one ack_batch call;
    # each ack is judged against its own group's lease.
    from queen_trio.consume.acks import apply_acks, parse_ack

    await push(client, "fuse", "a", partition="p1")
    await push(client, "fuse", "b", partition="p2")
    one = await pop(client, "fuse", partition="p1", consumerGroup="g1")
    two = await pop(client, "fuse", partition="p2", consumerGroup="g2")
    three = await pop(client, "fuse", partition="p1", consumerGroup="g2")

    def ack_of(group, message, status="completed"):
        body = {"transactionId": message["transactionId"], "partitionId": message["partitionId"],
                "leaseId": message["leaseId"], "status": status}
        return group, parse_ack(body)

    pairs = [ack_of("g1", one["messages"][0]), ack_of("g2", two["messages"][0], "failed"),
             ack_of("g2", three["messages"][0]), ack_of("g1", three["messages"][0])]
    rows = await broker.db.call(lambda conn: apply_acks(conn, pairs))
    by_item = {r.item_no: r for r in rows if not r.released}
    assert [by_item[n].success for n in (1, 2, 3, 4)] == [True, True, True, False]
    assert by_item[4].error == "Invalid or expired lease"  # g2's lease, not g1's
    assert by_item[2].lease_released is True
    assert data(await pop(client, "fuse", partition="p2", consumerGroup="g2")) == ["b"]
