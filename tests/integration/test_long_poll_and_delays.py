"""Long polling, delayed processing, window buffer, lease extension."""

from __future__ import annotations

import trio

from tests.support.consuming import ack, configure, data, park_pop, pop, push
from tests.support.db import db_execute, db_fetchval


async def test_long_poll_is_woken_by_a_push(client, broker):
    async with trio.open_nursery() as nursery:
        result = park_pop(nursery, client, "lp")
        await trio.sleep(0.3)
        assert "reply" not in result  # parked, not answered
        before = broker.wakeups.statistics().notifications
        await push(client, "lp", "hello")
        assert broker.wakeups.statistics().notifications > before
    assert data(result["reply"]) == ["hello"]


async def test_long_poll_times_out_with_204(client):
    started = trio.current_time()
    assert await pop(client, "quiet", wait=True, timeout=300) is None
    assert trio.current_time() - started >= 0.3


async def test_cancelled_waiter_leaves_no_lease(client, broker):
    with trio.move_on_after(0.3):
        await pop(client, "cancel", wait=True, timeout=10_000)
    await push(client, "cancel", "x")
    reply = await pop(client, "cancel")
    assert data(reply) == ["x"]
    assert await db_fetchval(broker.db,
        "SELECT count(*) FROM queen.consumer_state WHERE lease_id IS NOT NULL") == 1


async def test_lease_release_by_a_nack_wakes_a_waiter(client):
    await push(client, "rel", "x")
    held = await pop(client, "rel")
    async with trio.open_nursery() as nursery:
        result = park_pop(nursery, client, "rel")
        await trio.sleep(0.2)
        await ack(client, held["messages"][0], "retry")
    assert data(result["reply"]) == ["x"]


async def test_delayed_processing_hides_then_delivers_in_order(client):
    await configure(client, "later", delayedProcessing=2)
    await push(client, "later", "a", "b")
    assert await pop(client, "later") is None
    started = trio.current_time()
    reply = await pop(client, "later", batch=5, wait=True, timeout=10_000)
    assert data(reply) == ["a", "b"]
    assert trio.current_time() - started >= 0.5


async def test_changing_delay_applies_to_stored_messages(client):
    await push(client, "redelay", "x")
    await configure(client, "redelay", delayedProcessing=3600)
    assert await pop(client, "redelay") is None, "raising the delay hides stored messages"
    await configure(client, "redelay", delayedProcessing=None)
    assert data(await pop(client, "redelay")) == ["x"], "lowering it exposes them"


async def test_wildcard_pop_skips_delayed_partitions_for_deliverable_ones(client):
    await configure(client, "mixed", delayedProcessing=2)
    await push(client, "mixed", "delayed", partition="slow")
    await trio.sleep(2.1)
    await push(client, "mixed", "still-delayed", partition="fresh")
    # The only deliverable message is in "slow"; a pop must find it, never answer 204.
    assert data(await pop(client, "mixed", batch=5)) == ["delayed"]


async def test_window_buffer_waits_for_quiet(client):
    await configure(client, "window", windowBuffer=2)
    await push(client, "window", 1)
    assert await pop(client, "window") is None
    await trio.sleep(2.1)
    assert data(await pop(client, "window", batch=5)) == [1]


async def test_lease_extend_covers_all_partitions_and_never_revives(client, broker):
    await push(client, "ext", 1, partition="a")
    await push(client, "ext", 2, partition="b")
    reply = await pop(client, "ext", batch=2, partitions=2)
    lease = reply["leaseId"]
    r = await client.post(f"/api/v1/lease/{lease}/extend", content=b"")
    body = r.json()
    assert r.status_code == 200
    assert body["success"] is True and body["renewed"] == 2 and body["error"] is None
    assert body["leaseId"] == lease and body["newExpiresAt"] == body["expiresAt"]
    r = await client.post(f"/api/v1/lease/{lease}/extend", json={"seconds": 1})
    assert r.json()["renewed"] == 2, "max(current, now + 1) never shortens"
    expiry = await db_fetchval(broker.db,
        "SELECT min(lease_expires_at - clock_timestamp()) FROM queen.consumer_state")
    assert expiry.total_seconds() > 30
    await db_execute(broker.db,
        "UPDATE queen.consumer_state SET lease_expires_at = clock_timestamp() - interval '1 s'")
    r = await client.post(f"/api/v1/lease/{lease}/extend", json={})
    assert r.json()["success"] is False and r.json()["error"] == "Lease already expired"
    r = await client.post("/api/v1/lease/0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83/extend", json={})
    assert r.json()["error"] == "Lease not found"


async def test_listen_connection_reconnects_after_being_cut(broker):
    with trio.fail_after(10):
        while not broker.listener.statistics().connected:
            await trio.sleep(0.01)
    query = ("SELECT pid FROM pg_stat_activity WHERE application_name = 'queen-trio-listen' "
             "AND datname = current_database()")
    old_pid = await db_fetchval(broker.db, query)
    await db_fetchval(broker.db, "SELECT pg_terminate_backend($1)", old_pid)
    with trio.fail_after(10):
        while True:
            pid = await db_fetchval(broker.db, query)
            if pid is not None and pid != old_pid and broker.listener.statistics().connected:
                break
            await trio.sleep(0.05)
