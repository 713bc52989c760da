"""The push lane: dispatch on arrival, idle flushers, cancellation, shutdown drain."""

from __future__ import annotations

import trio
import trio.lowlevel

from queen_trio.broker import open_broker
from queen_trio.push.parse import parse_push_body
from tests.support.brokers import make_settings
from tests.support.db import db_fetchval
from tests.support.storage import stored_messages


def body(queue="lane", partition="p", payload=1):
    return ('{"items":[{"queue":"%s","partition":"%s","payload":%d}]}'
            % (queue, partition, payload)).encode()


async def test_lone_push_with_a_60s_backstop_costs_one_call(database_url):
    settings = make_settings(database_url, fusion_hold_ms=60_000)
    async with open_broker(settings, database_url) as broker:
        before = broker.db.statistics().calls
        # Far below the 60 s tick: the lone push must not wait for it.
        with trio.fail_after(10):
            status, results = await broker.publisher.push(parse_push_body(body()), None)
        assert status == 201 and results[0]["status"] == "queued"
        assert broker.db.statistics().calls - before == 1
        assert broker.lane.statistics().bundles == 1


async def test_idle_flusher_exits_and_is_recreated(database_url):
    settings = make_settings(database_url, flush_idle_seconds=0.05)
    async with open_broker(settings, database_url) as broker:
        await broker.publisher.push(parse_push_body(body(payload=1)), None)
        assert broker.lane.statistics().active_flushers == 1
        while broker.lane.statistics().active_flushers:
            await trio.sleep(0.02)
        status, _ = await broker.publisher.push(parse_push_body(body(payload=2)), None)
        assert status == 201
        stored = await stored_messages(broker.db, "lane", "p")
        assert [m.frame.payload for m in stored] == [b"1", b"2"]


async def test_cancelled_request_does_not_cancel_its_flush(broker):
    with trio.CancelScope() as scope:
        scope.cancel()
        await broker.publisher.push(parse_push_body(body(payload=7)), None)
    assert scope.cancelled_caught
    with trio.fail_after(10):
        while not await stored_messages(broker.db, "lane", "p"):
            await trio.sleep(0.01)
    stored = await stored_messages(broker.db, "lane", "p")
    assert [m.frame.payload for m in stored] == [b"7"]


async def test_leaving_the_broker_flushes_every_accepted_group(database_url):
    answered: list[int] = []
    settings = make_settings(database_url)
    async with open_broker(settings, database_url) as broker:
        async with trio.open_nursery() as nursery:
            for n in range(200):
                async def one(n=n):
                    status, _ = await broker.publisher.push(
                        parse_push_body(body(partition=f"p{n % 10}", payload=n)), None)
                    if status == 201:
                        answered.append(n)
                nursery.start_soon(one)
            # Cancel the requests themselves right away: the groups are already accepted.
            await trio.lowlevel.checkpoint()
            nursery.cancel_scope.cancel()
        db = broker.db
        lane = broker.lane
    # open_broker has returned: the lane drained before the pool closed.
    assert lane.statistics().active_flushers == 0
    async with open_broker(settings, database_url) as broker:
        total = await db_fetchval(broker.db, "SELECT coalesce(sum(message_count), 0) FROM queen.segments")
        payloads = set()
        for p in range(10):
            payloads |= {int(m.frame.payload) for m in await stored_messages(broker.db, "lane", f"p{p}")}
    assert set(answered) <= payloads
    assert total == len(payloads)
    del db


async def test_a_push_after_the_lane_closed_is_spooled_not_dropped(broker):
    broker.lane.close()
    status, results = await broker.publisher.push(parse_push_body(body()), None)
    assert status == 201
    assert results[0]["status"] == "buffered"
    assert broker.spool.statistics().pending == 1
