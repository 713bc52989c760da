"""A claim never outlives its delivery: what cannot be decoded is dead-lettered for the group,
the rest is delivered; a consumer that hangs up takes nothing (issue 8, points 3 and 4)."""

from __future__ import annotations

import contextlib

import asyncpg
import httpx
import pytest
import trio
import trio.testing

from queen_trio.broker import open_broker
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.consuming import ack_batch, configure, pop, push
from tests.support.db import db_execute, db_fetch, db_fetchrow, db_fetchval
from tests.support.sockets import open_request

KEY_A = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
KEY_B = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"


@contextlib.asynccontextmanager
async def client_of(settings, url):
    async with open_broker(settings, url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            yield broker, client


async def fill_vault(database_url, queue="vault"):
    """p0 plaintext, e1 encrypted under KEY_A, p2 plaintext: one partition, in that order."""
    async with client_of(make_settings(database_url, encryption_key=KEY_A), database_url) as (
            _, client):
        await push(client, queue, {"p": 0}, txids=["p0"])
        await configure(client, queue, encryptionEnabled=True)
        await push(client, queue, {"e": 1}, txids=["e1"])
        await configure(client, queue, encryptionEnabled=False)
        await push(client, queue, {"p": 2}, txids=["p2"])


async def dead_letters(client, queue="vault"):
    r = await client.get("/api/v1/dlq", params={"queue": queue})
    assert r.status_code == 200, r.text
    return r.json()["messages"]


async def test_undecryptable_message_is_dead_lettered_and_the_others_delivered(database_url):
    await fill_vault(database_url)
    # The broker restarted with another key: e1 cannot be decrypted.
    async with client_of(make_settings(database_url, encryption_key=KEY_B), database_url) as (
            broker, client):
        first = await pop(client, "vault", batch=10)
        # The lease's delivery stops short of e1: the cursor is cumulative.
        assert [m["transactionId"] for m in first["messages"]] == ["p0"]
        assert await dead_letters(client) == []
        await ack_batch(client, first["messages"])
        second = await pop(client, "vault", batch=10)
        # e1 is at the head now: dead-lettered, and p2 delivered in the same pop.
        assert [m["data"] for m in second["messages"]] == [{"p": 2}]
        (letter,) = await dead_letters(client)
        assert letter["transactionId"] == "e1"
        assert letter["errorMessage"] == "decryption failed"
        assert letter["data"] is None  # unreadable with this key
        await ack_batch(client, second["messages"])
        state = await db_fetchrow(broker.db, "SELECT cursor_offset, lease_id, retry_count "
                                  "FROM queen.consumer_state")
        assert (state["cursor_offset"], state["lease_id"], state["retry_count"]) == (3, None, 0)
        assert broker.consumer.statistics().undecodable == 1
    # The right key makes the dead letter readable again: it kept the ciphertext.
    async with client_of(make_settings(database_url, encryption_key=KEY_A), database_url) as (
            _, client):
        (letter,) = await dead_letters(client)
        assert letter["data"] == {"e": 1}


async def test_auto_ack_dead_letters_what_it_cannot_decrypt(database_url):
    await fill_vault(database_url)
    async with client_of(make_settings(database_url), database_url) as (broker, client):
        # No key at all now.
        reply = await pop(client, "vault", batch=10, autoAck=True)
        assert [m["transactionId"] for m in reply["messages"]] == ["p0", "p2"]
        (letter,) = await dead_letters(client)
        assert (letter["transactionId"], letter["errorMessage"]) == ("e1", "decryption failed")
        assert await pop(client, "vault", batch=10, autoAck=True) is None


async def test_a_frame_that_does_not_parse_is_dead_lettered_alone(client, broker):
    await push(client, "frames", *({"n": n} for n in range(3)), txids=["a", "b", "c"])
    # Corrupt the second frame's payload length (the 4 bytes at 21..24 of its header).
    await db_execute(broker.db, """
        UPDATE queen.segments
           SET frames = overlay(frames PLACING '\\xffffffff'::bytea FROM frame_ends[1] + 22)""")
    reply = await pop(client, "frames", batch=10, autoAck=True)
    assert [m["data"] for m in reply["messages"]] == [{"n": 0}, {"n": 2}]
    rows = await db_fetch(broker.db, "SELECT transaction_id, error_message, message_offset "
                          "FROM queen.dead_letters")
    assert [(r["transaction_id"], r["message_offset"]) for r in rows] == [("b", 1)]
    assert rows[0]["error_message"].startswith("undecodable frame")
    # The DLQ lists it (no payload to show) rather than failing on it.
    (letter,) = await dead_letters(client, "frames")
    assert (letter["transactionId"], letter["data"], letter["traceId"]) == ("b", None, None)
    assert letter["errorMessage"].startswith("undecodable frame")


# -- a consumer that hangs up ----------------------------------------------------------------

async def parked(broker) -> None:
    with trio.fail_after(20):
        while broker.wakeups.statistics().watched_queues < 1:
            await trio.sleep(0.01)


@pytest.mark.parametrize("auto_ack", [True, False])
async def test_a_long_poll_whose_client_hangs_up_claims_nothing(broker, client, http_url,
                                                                auto_ack):
    await configure(client, "hang")
    stream = await open_request(
        http_url, f"/api/v1/pop/queue/hang?wait=true&timeout=30000&autoAck={str(auto_ack).lower()}")
    await parked(broker)
    await stream.aclose()
    # Let the broker read the hang-up before anything is pushed.
    await trio.testing.wait_all_tasks_blocked(cushion=0.1)
    await push(client, "hang", {"n": 1})
    await trio.testing.wait_all_tasks_blocked(cushion=0.1)
    reply = await pop(client, "hang")
    assert reply is not None, "the message went to a consumer that was gone"
    assert [m["data"] for m in reply["messages"]] == [{"n": 1}]
    assert await db_fetchval(broker.db, "SELECT retry_count FROM queen.consumer_state") == 0


async def test_a_claim_whose_reply_cannot_be_sent_gives_its_lease_back(broker, client, http_url):
    await push(client, "slow", {"n": 1})

    async def hold_queue_row():
        # A new group joins under the queue row's lock: the pop's claim waits behind this.
        async def work(conn):
            async with conn.transaction():
                await conn.execute("SELECT 1 FROM queen.queues WHERE name = 'slow' FOR UPDATE")
                await conn.execute("SELECT pg_sleep(60)")

        with contextlib.suppress(asyncpg.QueryCanceledError):
            await broker.db.call(work)

    waiting_claims = ("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                      "AND query LIKE '%pop_claim%'")
    holder = "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_queue_row)
        with trio.fail_after(20):
            while await db_fetchval(broker.db, holder) is None:
                await trio.sleep(0.01)
            stream = await open_request(http_url, "/api/v1/pop/queue/slow?consumerGroup=g1")
            while await db_fetchval(broker.db, waiting_claims) == 0:
                await trio.sleep(0.01)
        # The consumer hangs up while its claim waits; then the claim lands.
        await stream.aclose()
        await trio.testing.wait_all_tasks_blocked(cushion=0.1)
        await db_fetchval(broker.db, "SELECT pg_cancel_backend($1)",
                          await db_fetchval(broker.db, holder))
    lease = ("SELECT st.lease_id, st.retry_count FROM queen.consumer_state st "
             "JOIN queen.subscriptions s ON s.queue_id = st.queue_id "
             "AND s.consumer_group = st.consumer_group WHERE st.consumer_group = 'g1'")
    with trio.fail_after(20):
        while (row := await db_fetchrow(broker.db, lease)) is None or row["lease_id"] is not None:
            await trio.sleep(0.05)
    assert row["retry_count"] == 0, "a lease given back is not a failed delivery"
    reply = await pop(client, "slow", consumerGroup="g1")
    assert [m["data"] for m in reply["messages"]] == [{"n": 1}]
    assert await db_fetchval(broker.db, "SELECT retry_count FROM queen.consumer_state "
                             "WHERE consumer_group = 'g1'") == 0
    assert broker.consumer.statistics().released == 1
