"""Deduplication: within the request, against stored data, concurrent, windowed, disabled."""

from __future__ import annotations

import trio

from queen_trio.ids import ZERO_UUID
from tests.support.db import db_execute
from tests.support.storage import stored_messages


def item(txid, payload=1, queue="d", partition="p"):
    return {"queue": queue, "partition": partition, "transactionId": txid, "payload": payload}


async def push(client, *items):
    r = await client.post("/api/v1/push", json={"items": list(items)})
    return r.status_code, r.json()


async def test_within_request_first_item_wins(client, broker):
    status, body = await push(client, item("a", 1), item("b", 2), item("a", 3))
    assert status == 201
    assert [e["status"] for e in body] == ["queued", "queued", "duplicate"]
    assert body[2]["message_id"] == body[0]["message_id"]
    stored = await stored_messages(broker.db, "d", "p")
    assert [m.frame.payload for m in stored] == [b"1", b"2"]


async def test_stored_duplicate_answers_the_original_id_and_writes_nothing(client, broker):
    _, first = await push(client, item("order-1", {"v": 1}))
    status, again = await push(client, item("order-1", {"v": 2}), item("order-2", {"v": 3}))
    assert status == 201
    assert again[0]["status"] == "duplicate"
    assert again[0]["message_id"] == first[0]["message_id"]
    assert again[1]["status"] == "queued"
    stored = await stored_messages(broker.db, "d", "p")
    assert [m.frame.payload for m in stored] == [b'{"v":1}', b'{"v":3}']
    assert [m.offset for m in stored] == [0, 1]


async def test_duplicate_is_scoped_to_the_partition(client, broker):
    await push(client, item("same", partition="x"))
    _, body = await push(client, item("same", partition="y"))
    assert body[0]["status"] == "queued"


async def test_within_request_duplicate_of_a_stored_duplicate_carries_the_original_id(client):
    _, first = await push(client, item("k"))
    _, body = await push(client, item("k"), item("k"))
    assert [e["status"] for e in body] == ["duplicate", "duplicate"]
    assert {e["message_id"] for e in body} == {first[0]["message_id"]}


async def test_32_concurrent_pushes_of_one_transaction_id(client, broker):
    results = []

    async def one(n):
        status, body = await push(client, item("contended", {"n": n}))
        assert status == 201
        results.append(body[0])

    async with trio.open_nursery() as nursery:
        for n in range(32):
            nursery.start_soon(one, n)
    statuses = sorted(e["status"] for e in results)
    assert statuses == ["duplicate"] * 31 + ["queued"]
    assert len({e["message_id"] for e in results}) == 1
    assert len(await stored_messages(broker.db, "d", "p")) == 1


async def test_dedup_window_zero_disables_both_layers(client, broker):
    r = await client.post("/api/v1/configure", json={"queue": "d", "options": {"dedupWindowSeconds": 0}})
    assert r.status_code == 200
    _, body = await push(client, item("t"), item("t"))
    _, again = await push(client, item("t"))
    assert [e["status"] for e in body + again] == ["queued"] * 3
    assert len({e["message_id"] for e in body + again}) == 3
    assert len(await stored_messages(broker.db, "d", "p")) == 3


async def test_dedup_is_bounded_by_the_window(client, broker):
    await client.post("/api/v1/configure", json={"queue": "d", "options": {"dedupWindowSeconds": 3}})
    _, first = await push(client, item("w"))
    _, inside = await push(client, item("w"))
    assert inside[0]["status"] == "duplicate"
    await trio.sleep(3.2)
    _, outside = await push(client, item("w"))
    assert outside[0]["status"] == "queued"
    assert outside[0]["message_id"] != first[0]["message_id"]


async def test_duplicate_of_a_removed_segment_answers_the_zero_uuid(client, broker):
    await push(client, item("gone"))
    await db_execute(broker.db, "DELETE FROM queen.segments")
    _, body = await push(client, item("gone"))
    assert body[0]["status"] == "duplicate"
    assert body[0]["message_id"] == ZERO_UUID


async def test_fused_segment_resolves_duplicates_between_requests(broker):
    """Groups that meet in one fused segment: the first one wins, the rest are duplicates."""
    from queen_trio.push.parse import parse_push_body

    def body(txid, n):
        return ('{"items":[{"queue":"f","transactionId":"%s","payload":%d}]}' % (txid, n)).encode()

    results = []

    async def one(txid, n):
        status, r = await broker.publisher.push(parse_push_body(body(txid, n)), None)
        results.append((txid, r[0]))

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(one, f"tx-{n % 4}", n)
    by_txid: dict[str, set] = {}
    for txid, r in results:
        by_txid.setdefault(txid, set()).add(r["message_id"])
    assert all(len(ids) == 1 for ids in by_txid.values())
    assert sorted(r["status"] for _, r in results).count("queued") == 4
    assert len(await stored_messages(broker.db, "f")) == 4


async def test_a_stored_duplicate_brings_back_only_its_original_id(client, broker):
    import json

    from queen_trio.push.bundle import Segment, pack_group, run_bundle
    from queen_trio.push.items import group_items
    from queen_trio.push.parse import parse_push_body

    body = json.dumps({"items": [item(f"t{i}", {"i": i, "pad": "x" * 1000}, queue="heavy")
                                 for i in range(50)]}).encode()
    status, first = await push(client, *json.loads(body)["items"])
    assert status == 201
    (group,) = group_items(parse_push_body(body))
    segment = Segment.fuse([pack_group(group, dedup=True, encryption_assumed=False,
                                       encrypt=None, producer_sub=None)])
    rows = await broker.db.call(lambda conn: run_bundle(conn, [segment]))
    duplicates = [r for r in rows if r["outcome"] == "duplicate"]
    assert len(duplicates) == 50
    # Each row carries the original's id, not the stored segment holding it (50 KB each).
    assert not [v for r in rows for v in r.values() if isinstance(v, bytes)]
    by_item = {r["item_no"]: str(r["ref_message_id"]) for r in duplicates}
    assert [by_item[n] for n in range(1, 51)] == [e["message_id"] for e in first]


async def test_a_segment_of_new_items_and_duplicates_keeps_the_new_ones_in_order(client, broker):
    _, first = await push(client, item("b", "B"), item("d", "D"))
    status, body = await push(client, item("a", "a"), item("b", "b2"), item("c", "c"),
                              item("d", "d2"), item("e", "e"))
    assert status == 201
    assert [e["status"] for e in body] == ["queued", "duplicate", "queued", "duplicate", "queued"]
    assert [body[1]["message_id"], body[3]["message_id"]] == [e["message_id"] for e in first]
    stored = await stored_messages(broker.db, "d", "p")
    assert [(m.offset, m.frame.payload, m.frame.transaction_id) for m in stored] == [
        (0, b'"B"', "b"), (1, b'"D"', "d"), (2, b'"a"', "a"), (3, b'"c"', "c"), (4, b'"e"', "e")]
    # The index points at the rebuilt segment's offsets: acks and lookups find them.
    from tests.support.consuming import ack_batch, pop

    reply = await pop(client, "d", partition="p", batch=10)
    assert [m["transactionId"] for m in reply["messages"]] == ["b", "d", "a", "c", "e"]
    assert all(r["success"] for r in await ack_batch(client, reply["messages"]))
