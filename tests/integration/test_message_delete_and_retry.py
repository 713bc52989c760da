"""DELETE /api/v1/messages/:partitionId/:transactionId hides a message from every group and
every count; POST .../retry delivers a dead letter again, first, to its group (issue 9)."""

from __future__ import annotations

import contextlib

import asyncpg
import trio

from tests.support.consuming import ack, ack_batch, configure, consume_all, data, pop, push
from tests.support.db import db_execute, db_fetchval


async def delete(client, message, status=200):
    r = await client.delete(f"/api/v1/messages/{message['partitionId']}/"
                            f"{message['transactionId']}")
    assert r.status_code == status, r.text
    return r.json()


async def retry(client, message, status=200, group=None):
    query = "" if group is None else f"?consumerGroup={group}"
    r = await client.post(f"/api/v1/messages/{message['partitionId']}/"
                          f"{message['transactionId']}/retry{query}")
    assert r.status_code == status, r.text
    return r.json()


async def dlq(client, group):
    return (await client.get(f"/api/v1/dlq?queue=del&consumerGroup={group}")).json()


async def expire_leases(broker):
    await db_execute(broker.db, "UPDATE queen.consumer_state SET lease_expires_at = "
                     "clock_timestamp() - interval '1 s' WHERE lease_id IS NOT NULL")


async def test_a_deleted_message_is_hidden_from_every_group_and_count(client, broker):
    await push(client, "del", *range(5))
    # "early" has consumed 0 and 1; "late" has consumed nothing.
    early = await pop(client, "del", batch=2, consumerGroup="early")
    await ack_batch(client, early["messages"], group="early")
    assert await pop(client, "del", batch=1, consumerGroup="late") is not None
    listed = (await client.get("/api/v1/messages?queue=del")).json()["messages"]
    third = listed[2]  # newest first: payload 2, which neither group has consumed
    assert third["busStatus"]["consumedBy"] == 0
    segments = await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments")
    body = await delete(client, third)
    assert body == {"success": True, "partitionId": third["partitionId"],
                    "transactionId": third["transactionId"],
                    "message": "Message deleted successfully"}
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == segments
    after = (await client.get("/api/v1/messages?queue=del")).json()["messages"]
    assert third["transactionId"] not in [m["transactionId"] for m in after] and len(after) == 4
    r = await client.get(f"/api/v1/messages/{third['partitionId']}/{third['transactionId']}")
    assert r.status_code == 404
    overview = (await client.get("/api/v1/resources/overview")).json()
    assert overview["messages"]["total"] == 4
    depth = (await client.get("/api/v1/resources/queues/del/depth?group=early")).json()
    assert depth["pending"] == 2  # 5 - 2 consumed - 1 deleted
    await delete(client, third, status=404)


async def test_cursors_step_over_a_deleted_message(client):
    await push(client, "del", "a", "b", "c", "d")
    listed = (await client.get("/api/v1/messages?queue=del")).json()["messages"]
    by_payload = dict(zip(["d", "c", "b", "a"], listed, strict=True))  # newest first
    await delete(client, by_payload["b"])
    await delete(client, by_payload["d"])  # the tail
    for group in ("g1", "g2"):
        assert await consume_all(client, "del", group, batch=10) == ["a", "c"]
    # One at a time: the head of the cursor steps over it too.
    assert await consume_all(client, "del", "g3", batch=1) == ["a", "c"]
    await push(client, "del", "e")
    assert await consume_all(client, "del", "g1") == ["e"]


async def test_deleting_the_message_at_an_idle_cursor_moves_it_and_drops_its_dead_letters(client):
    await push(client, "del", "poison", "fine")
    reply = await pop(client, "del", consumerGroup="g")
    assert (await ack(client, reply["messages"][0], "dlq", group="g"))["dlq"]
    assert (await dlq(client, "g"))["total"] == 1
    await delete(client, reply["messages"][0])
    assert (await dlq(client, "g"))["total"] == 0
    queue = (await client.get("/api/v1/resources/queues/del")).json()
    assert queue["totals"]["total"] == 1 and queue["totals"]["deadLetter"] == 0
    assert await consume_all(client, "del", "g") == ["fine"]


async def test_delete_errors(client):
    await push(client, "del", 1)
    reply = await pop(client, "del")
    pid = reply["partitionId"]
    r = await client.delete(f"/api/v1/messages/{pid}/nope")
    assert r.status_code == 404 and r.json() == {"error": "Message not found"}
    r = await client.delete("/api/v1/messages/not-a-uuid/tx")
    assert r.status_code == 400
    r = await client.delete("/api/v1/messages/00000000-0000-0000-0000-000000000001/tx")
    assert r.status_code == 404


async def dead_letter(client, queue, group, *payloads):
    await push(client, queue, *payloads)
    reply = await pop(client, queue, batch=len(payloads), consumerGroup=group)
    results = await ack_batch(client, reply["messages"], "dlq", group=group, error="broken")
    assert all(r["dlq"] for r in results)
    return reply["messages"]


async def test_a_retried_dead_letter_comes_first_under_a_lease_and_its_ack_removes_it(client):
    dead, _ = await dead_letter(client, "del", "g", "first", "second")
    await push(client, "del", "third")
    body = await retry(client, dead, group="g")
    assert body == {"success": True, "partitionId": dead["partitionId"],
                    "transactionId": dead["transactionId"], "consumerGroups": ["g"],
                    "retried": 1}
    again = await pop(client, "del", batch=10, consumerGroup="g")
    (copy,) = again["messages"]
    assert (copy["id"], copy["transactionId"], copy["data"]) == (
        dead["id"], dead["transactionId"], "first")
    assert copy["leaseId"]
    # Under the lease: the rest of the partition waits for it.
    assert await pop(client, "del", consumerGroup="g") is None
    result = await ack(client, copy, group="g")
    assert result["success"] is True
    listed = await dlq(client, "g")
    assert [m["data"] for m in listed["messages"]] == ["second"]
    assert await consume_all(client, "del", "g") == ["third"]


async def test_retry_of_every_group_and_its_errors(client):
    await push(client, "del", "x")
    messages = {}
    for group in ("a", "b"):
        reply = await pop(client, "del", consumerGroup=group)
        assert (await ack(client, reply["messages"][0], "dlq", group=group))["dlq"]
        messages[group] = reply["messages"][0]
    await push(client, "del", "y")
    assert await consume_all(client, "del", "c") == ["x", "y"]  # c has no dead letter
    body = await retry(client, messages["a"])
    assert body["consumerGroups"] == ["a", "b"] and body["retried"] == 2
    for group in ("a", "b"):
        copy = await pop(client, "del", batch=5, consumerGroup=group)
        assert data(copy) == ["x"]
        assert (await ack(client, copy["messages"][0], "failed", group=group))["dlq"] is True
    # A nack sends it back to the DLQ; the group goes on with the stream.
    assert (await dlq(client, "a"))["total"] == 1
    assert await consume_all(client, "del", "a") == ["y"]
    error = await retry(client, messages["a"], status=409, group="c")
    assert error == {"error": "Message is not dead-lettered for consumer group c"}
    await push(client, "del", "z")
    live = await pop(client, "del", batch=5, consumerGroup="c")
    (alive,) = live["messages"]
    assert (await retry(client, alive, status=404)) == {"error": "Dead letter not found"}
    r = await client.post("/api/v1/messages/not-a-uuid/tx/retry")
    assert r.status_code == 400


async def test_a_retry_reaches_a_caught_up_group_and_an_auto_ack_pop_settles_it(client, broker):
    dead, = await dead_letter(client, "del", "g", "only")
    assert await pop(client, "del", consumerGroup="g") is None  # caught up
    await retry(client, dead)
    got = await pop(client, "del", consumerGroup="g", autoAck=True)
    assert data(got) == ["only"] and got["leaseId"] == ""
    assert (await dlq(client, "g"))["total"] == 0
    assert await pop(client, "del", consumerGroup="g") is None
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.dead_letters") == 0


async def test_a_retry_waits_for_a_live_stream_lease(client):
    dead, = await dead_letter(client, "del", "g", "old")
    await push(client, "del", "new-1", "new-2")
    held = await pop(client, "del", batch=10, consumerGroup="g")
    assert data(held) == ["new-1", "new-2"]
    await retry(client, dead)
    assert await pop(client, "del", consumerGroup="g") is None  # the stream lease is live
    await ack_batch(client, held["messages"], group="g")  # caught up: the retry stays claimable
    copy = await pop(client, "del", consumerGroup="g")
    assert data(copy) == ["old"]
    assert (await ack(client, copy["messages"][0], group="g"))["success"]
    assert (await dlq(client, "g"))["total"] == 0


async def test_a_stale_lease_cannot_settle_a_retried_dead_letter(client, broker):
    dead, = await dead_letter(client, "del", "g", "m")
    await retry(client, dead)
    first = await pop(client, "del", consumerGroup="g")
    await db_execute(broker.db, "UPDATE queen.consumer_state SET lease_expires_at = "
                     "clock_timestamp() - interval '1 s' WHERE lease_id IS NOT NULL")
    second = await pop(client, "del", consumerGroup="g")
    assert data(second) == ["m"] and second["leaseId"] != first["leaseId"]
    stale = await ack(client, first["messages"][0], group="g")
    assert stale["success"] is False and stale["error"] == "Invalid or expired lease"
    assert (await ack(client, second["messages"][0], group="g"))["success"] is True


async def test_two_concurrent_deletes_of_a_message_one_deletes_it_the_other_is_404(client, broker):
    dead, = await dead_letter(client, "del", "g", "twice")
    path = f"/api/v1/messages/{dead['partitionId']}/{dead['transactionId']}"
    here = "datname = current_database() AND pid <> pg_backend_pid()"
    holder = f"SELECT pid FROM pg_stat_activity WHERE {here} AND query LIKE '%pg_sleep(60)%'"
    waiting = (f"SELECT count(*) FROM pg_stat_activity WHERE {here} "
               "AND wait_event_type = 'Lock' AND query LIKE '%queen.delete_message%'")

    async def hold_the_dead_letter():
        # The first delete waits on this row after hiding the message, its transaction open;
        # held until the test cancels the statement (no timing to race).
        async def work(conn):
            async with conn.transaction():
                await conn.execute("SELECT 1 FROM queen.dead_letters WHERE transaction_id = $1 "
                                   "FOR UPDATE", dead["transactionId"])
                await conn.execute("SELECT pg_sleep(60)")

        with contextlib.suppress(asyncpg.QueryCanceledError):
            await broker.db.call(work)

    replies = {}

    async def delete_as(name):
        r = await client.delete(path)
        replies[name] = (r.status_code, r.json())

    async def until(query, value):
        with trio.fail_after(20):
            while (found := await db_fetchval(broker.db, query)) != value:
                await trio.sleep(0.01)
        return found

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_the_dead_letter)
        with trio.fail_after(20):
            while (pid := await db_fetchval(broker.db, holder)) is None:
                await trio.sleep(0.01)
        nursery.start_soon(delete_as, "first")
        await until(waiting, 1)
        # The second checked before the first commits, then waits on the group's state row.
        nursery.start_soon(delete_as, "second")
        await until(waiting, 2)
        await db_fetchval(broker.db, "SELECT pg_cancel_backend($1)", pid)
    assert replies["first"][0] == 200 and replies["first"][1]["success"] is True
    assert replies["second"] == (404, {"error": "Message not found"})
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.hidden_messages") == 1
    assert await db_fetchval(broker.db, "SELECT hidden FROM queen.hidden_counts") == 1
    assert (await dlq(client, "g"))["total"] == 0


async def assert_delivered_afresh(client, broker, payload):
    """Delivered now, and again after its lease expires: with retryLimit 1 or 2 and a failed
    delivery carried over, that expiry would dead-letter it."""
    assert data(await pop(client, "del", batch=1, consumerGroup="g")) == [payload]
    await expire_leases(broker)
    assert data(await pop(client, "del", batch=1, consumerGroup="g")) == [payload]
    assert (await dlq(client, "g"))["total"] == 0


async def test_a_claim_stepping_over_a_deleted_message_leaves_its_failures_behind(client, broker):
    await configure(client, "del", retryLimit=2)
    await push(client, "del", "poison", "next")
    for _ in range(2):
        reply = await pop(client, "del", batch=1, consumerGroup="g")
        assert data(reply) == ["poison"]
        assert (await ack(client, reply["messages"][0], "failed", group="g"))["dlq"] is False
    held = await pop(client, "del", batch=1, consumerGroup="g")
    assert data(held) == ["poison"]
    await delete(client, held["messages"][0])  # under a live lease: the cursor stays on it
    await expire_leases(broker)
    # The claim steps over it; its two failed deliveries are not "next"'s.
    await assert_delivered_afresh(client, broker, "next")


async def test_deleting_the_message_at_a_cursor_leaves_its_failures_and_delay_behind(
        client, broker):
    await configure(client, "del", retryLimit=1, retryDelay=3_600_000)
    await push(client, "del", "poison", "next")
    reply = await pop(client, "del", batch=1, consumerGroup="g")
    assert (await ack(client, reply["messages"][0], "failed", group="g"))["dlq"] is False
    # No lease now: the delete moves the cursor, past one failed delivery and an hour's
    # retryDelay, both the deleted message's.
    await delete(client, reply["messages"][0])
    await assert_delivered_afresh(client, broker, "next")


async def test_a_retried_dead_letter_whose_leases_expire_is_a_dead_letter_again_after_its_retries(
        client, broker):
    await configure(client, "del", retryLimit=1)
    dead, = await dead_letter(client, "del", "g", "stuck")
    await push(client, "del", "after")
    await retry(client, dead)
    for _ in range(2):  # retryLimit + 1 deliveries, as for any message
        assert data(await pop(client, "del", batch=10, consumerGroup="g")) == ["stuck"]
        await expire_leases(broker)
    # No longer delivered first: the group goes on with the partition.
    assert await consume_all(client, "del", "g") == ["after"]
    (listed,) = (await dlq(client, "g"))["messages"]
    assert listed["data"] == "stuck"
    assert listed["errorMessage"] == "Lease expired without an ack 2 times after a retry"
    # Another retry counts its own deliveries.
    await retry(client, dead)
    assert data(await pop(client, "del", consumerGroup="g")) == ["stuck"]
    await expire_leases(broker)
    copy = await pop(client, "del", consumerGroup="g")
    assert data(copy) == ["stuck"]
    assert (await ack(client, copy["messages"][0], group="g"))["success"] is True
    assert (await dlq(client, "g"))["total"] == 0
