"""Pops: shapes, order, byte-exact payloads, 204s, targeted and wildcard routes."""

from __future__ import annotations

import re

from tests.support.consuming import ack, data, pop, push
from tests.support.db import db_fetchval

MESSAGE_KEYS = {"id", "transactionId", "traceId", "data", "producerSub", "createdAt",
                "partitionId", "partition", "leaseId", "consumerGroup"}


async def test_pop_reply_shape_and_order(client):
    pushed = await push(client, "shape", {"n": 1}, {"n": 2}, {"n": 3}, partition="p1")
    reply = await pop(client, "shape", batch=10)
    assert set(reply) == {"success", "queue", "partition", "partitionId", "leaseId",
                          "consumerGroup", "messages", "partitionsClaimed"}
    assert reply["success"] is True
    assert reply["queue"] == "shape"
    assert reply["partition"] == "p1"
    assert reply["consumerGroup"] == "__QUEUE_MODE__"
    assert reply["partitionsClaimed"] == 1
    assert data(reply) == [{"n": 1}, {"n": 2}, {"n": 3}]
    for m, p in zip(reply["messages"], pushed, strict=True):
        assert set(m) == MESSAGE_KEYS
        assert m["id"] == p["message_id"]
        assert m["transactionId"] == p["transaction_id"]
        assert m["traceId"] is None and m["producerSub"] is None
        assert m["leaseId"] == reply["leaseId"]
        assert m["partitionId"] == reply["partitionId"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", m["createdAt"])


async def test_payload_bytes_are_spliced_verbatim(client):
    raw = b'{"items":[{"queue":"raw","payload":{"z":1.50,"a":123456789012345678901234567890,"s":"caf\\u00e9"}}]}'
    r = await client.post("/api/v1/push", content=raw)
    assert r.status_code == 201
    r = await client.get("/api/v1/pop/queue/raw")
    assert r.status_code == 200
    assert b'"data":{"z":1.50,"a":123456789012345678901234567890,"s":"caf\\u00e9"}' in r.content


async def test_every_json_value_round_trips(client):
    values = [None, True, 0, -1.5e-7, "text", [], {}, [1, {"a": None}]]
    await push(client, "values", *values)
    reply = await pop(client, "values", batch=20)
    assert data(reply) == values


async def test_nothing_to_deliver_is_204_and_creates_nothing(client, broker):
    assert await pop(client, "nope") is None
    assert await pop(client, "nope", partition="x") is None
    await push(client, "exists", 1)
    assert await pop(client, "exists", partition="missing") is None
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.queues") == 1
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.partitions") == 1


async def test_targeted_pop_reads_only_its_partition(client):
    await push(client, "t", "a1", "a2", partition="a")
    await push(client, "t", "b1", partition="b")
    reply = await pop(client, "t", partition="b", batch=10)
    assert data(reply) == ["b1"]
    assert reply["partition"] == "b"


async def test_path_parameters_are_percent_decoded(client):
    await push(client, "a queue/with slash", 1, partition="p/1 ä")
    r = await client.get("/api/v1/pop/queue/a%20queue%2Fwith%20slash/partition/p%2F1%20%C3%A4")
    assert r.status_code == 200
    assert r.json()["partition"] == "p/1 ä"
    assert r.json()["queue"] == "a queue/with slash"


async def test_leased_partition_is_not_given_to_the_same_group(client):
    await push(client, "lease", 1, 2)
    first = await pop(client, "lease")
    assert data(first) == [1]
    assert await pop(client, "lease") is None
    assert await pop(client, "lease", partition="Default") is None
    assert (await ack(client, first["messages"][0]))["success"] is True
    assert data(await pop(client, "lease")) == [2]


async def test_batch_is_a_global_cap_across_partitions(client):
    for p in range(5):
        await push(client, "multi", f"{p}-a", f"{p}-b", partition=f"p{p}")
    reply = await pop(client, "multi", batch=7, partitions=5)
    assert len(reply["messages"]) == 7
    assert reply["partitionsClaimed"] == 4
    by_partition: dict[str, list] = {}
    for m in reply["messages"]:
        assert m["leaseId"] == reply["leaseId"]
        by_partition.setdefault(m["partition"], []).append(m["data"])
    for name, values in by_partition.items():
        assert values == sorted(values)
        assert all(v.startswith(name[1:]) for v in values)


async def test_oldest_pending_partition_is_claimed_first(client):
    await push(client, "fair", "old", partition="z-old")
    await push(client, "fair", "new", partition="a-new")
    assert data(await pop(client, "fair")) == ["old"]
    assert data(await pop(client, "fair")) == ["new"]


async def test_auto_ack_moves_the_cursor_in_the_pop(client):
    await push(client, "auto", 1, 2, 3)
    reply = await pop(client, "auto", batch=2, autoAck=True)
    assert data(reply) == [1, 2]
    assert reply["leaseId"] == ""
    assert all(m["leaseId"] == "" for m in reply["messages"])
    # Nothing to ack, no lease held: the next pop continues at once.
    assert data(await pop(client, "auto", batch=5)) == [3]


async def test_pop_cuts_frames_out_of_a_segment_rebuilt_around_duplicates(client):
    await push(client, "cut", "first", txids=["t1"])
    # One segment, rebuilt without its duplicate; the frames are then read one at a time.
    await push(client, "cut", "dup", "second", "third", txids=["t1", "t2", "t3"])
    got = []
    while (reply := await pop(client, "cut", autoAck=True)) is not None:
        got += data(reply)
    assert got == ["first", "second", "third"]
