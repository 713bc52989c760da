"""Per-partition order under concurrency, and the (queue, partition) commit boundary."""

from __future__ import annotations

import json

import trio
import trio.testing

from tests.support.db import db_execute, db_fetchval
from tests.support.storage import POISON_TRIGGER, stored_messages


async def test_per_partition_order_under_concurrent_producers(client, broker):
    producers, per_producer = 8, 25

    async def produce(p):
        for seq in range(per_producer):
            r = await client.post("/api/v1/push", json={"items": [
                {"queue": "ord", "partition": "one", "payload": {"p": p, "seq": seq}}]})
            assert r.status_code == 201

    async with trio.open_nursery() as nursery:
        for p in range(producers):
            nursery.start_soon(produce, p)

    stored = await stored_messages(broker.db, "ord", "one")
    assert [m.offset for m in stored] == list(range(producers * per_producer))
    times = [m.created_at for m in stored]
    assert times == sorted(times), "created_at must be monotone in offset order"
    for p in range(producers):
        seqs = [json.loads(m.frame.payload)["seq"] for m in stored
                if json.loads(m.frame.payload)["p"] == p]
        assert seqs == list(range(per_producer))


async def test_batch_keeps_request_order_within_a_partition(client, broker):
    items = [{"queue": "ord", "partition": "b", "payload": n} for n in range(100)]
    r = await client.post("/api/v1/push", json={"items": items})
    assert r.status_code == 201
    stored = await stored_messages(broker.db, "ord", "b")
    assert [int(m.frame.payload) for m in stored] == list(range(100))
    # UUIDv7 ids follow request order as well.
    ids = [str(m.frame.message_id) for m in stored]
    assert ids == sorted(ids)


async def test_one_group_fails_and_the_others_commit(client, broker):
    await db_execute(broker.db, POISON_TRIGGER)
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "atom", "partition": "good-1", "payload": 1},
        {"queue": "atom", "partition": "poison", "payload": 2},
        {"queue": "atom", "partition": "good-2", "payload": 3},
        {"queue": "atom", "partition": "poison", "payload": 4},
    ]})
    assert r.status_code == 500
    body = r.json()
    assert [e["status"] for e in body] == ["queued", "failed", "queued", "failed"]
    assert "poisoned partition" in body[1]["error"]
    assert [int(m.frame.payload) for m in await stored_messages(broker.db, "atom", "good-1")] == [1]
    assert [int(m.frame.payload) for m in await stored_messages(broker.db, "atom", "good-2")] == [3]
    assert await stored_messages(broker.db, "atom", "poison") == []
    # The failed group left its partition consistent: the next push takes offset 0.
    await db_execute(broker.db, "DROP TRIGGER test_poison ON queen.segments")
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "atom", "partition": "poison", "payload": 5}]})
    assert r.status_code == 201
    assert [m.offset for m in await stored_messages(broker.db, "atom", "poison")] == [0]


async def test_failed_bundle_is_split_so_only_the_bad_group_fails(broker):
    """Many requests bundled into one transaction: the poisoned one fails alone."""
    from queen_trio.push.parse import parse_push_body

    await db_execute(broker.db, POISON_TRIGGER)
    outcomes: dict[str, int] = {}

    async def one(partition):
        body = ('{"items":[{"queue":"split","partition":"%s","payload":1}]}' % partition).encode()
        status, _ = await broker.publisher.push(parse_push_body(body), None)
        outcomes[partition] = status

    async with trio.open_nursery() as nursery:
        for n in range(30):
            nursery.start_soon(one, "poison" if n == 7 else f"p{n}")
    assert outcomes.pop("poison") == 500
    assert set(outcomes.values()) == {201}
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 29


async def test_shard_splits_a_failed_bundle_back_into_its_segments(broker, nursery):
    from queen_trio.push.bundle import pack_group, run_bundle
    from queen_trio.push.items import group_items
    from queen_trio.push.lane import PushLane
    from queen_trio.push.outcome import Outcome
    from queen_trio.push.parse import parse_push_body

    await db_execute(broker.db, POISON_TRIGGER)
    gate = trio.Event()
    bundles = []

    async def commit(segments):
        # The first bundle waits at the gate, so the next three segments share one bundle.
        await gate.wait()
        bundles.append([s.partition for s in segments])
        return await broker.db.call(lambda conn: run_bundle(conn, segments))

    lane = PushLane(commit, shards=1, tick_seconds=1.0, idle_seconds=1.0)
    await nursery.start(lane.run)
    packed = []
    for partition in ("w", "a", "poison", "b"):
        body = ('{"items":[{"queue":"s","partition":"%s","payload":1}]}' % partition).encode()
        (group,) = group_items(parse_push_body(body))
        packed.append(pack_group(group, dedup=True, encryption_assumed=False, encrypt=None,
                                 producer_sub=None))
        lane.submit_nowait(packed[-1])
        await trio.testing.wait_all_tasks_blocked()
    gate.set()
    for p in packed:
        await p.done.wait()
    lane.close()
    await lane.wait_closed()
    assert [p.outcome for p in packed] == [Outcome.QUEUED, Outcome.QUEUED, Outcome.FAILED,
                                           Outcome.QUEUED]
    assert bundles == [["w"], ["a", "poison", "b"], ["a"], ["poison"], ["b"]]
    stats = lane.statistics()
    assert (stats.bundle_splits, stats.failed_segments) == (1, 1)
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 3


async def test_max_size_fails_a_group_that_would_overfill_the_queue(client):
    from tests.support.consuming import ack_batch, configure, pop

    await configure(client, "small", maxSize=3)
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "small", "partition": "a", "payload": n} for n in range(2)]})
    assert r.status_code == 201
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "small", "partition": "b", "payload": 10},
        {"queue": "small", "partition": "b", "payload": 11},
        {"queue": "other", "payload": 1}]})
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert [e["status"] for e in r.json()] == ["failed", "failed", "queued"]
    assert r.json()[0]["error"] == "queue full"
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "small", "partition": "b", "payload": 12}]})
    assert r.status_code == 201  # 3 held: exactly at the bound
    # Once the slowest (here: the only) group consumes, there is room again.
    reply = await pop(client, "small", partition="a", batch=2)
    await ack_batch(client, reply["messages"])
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "small", "partition": "b", "payload": n} for n in (13, 14)]})
    assert r.status_code == 201
