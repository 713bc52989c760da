from __future__ import annotations

import json

from tests.support.storage import stored_messages

SEED_BODY = b'{"items":[{"queue":"orders.created","partition":"customer-42","transactionId":"order-8891-created","payload":{"orderId":8891}}]}'


async def test_seed_curl_example_answers_201(client):
    r = await client.post("/api/v1/push", content=SEED_BODY,
                          headers={"content-type": "application/json"})
    assert r.status_code == 201
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert isinstance(body, list) and len(body) == 1
    entry = body[0]
    assert set(entry) == {"index", "message_id", "transaction_id", "queueName", "status"}
    assert entry["index"] == 0
    assert entry["transaction_id"] == "order-8891-created"
    assert entry["queueName"] == "orders.created"
    assert entry["status"] == "queued"
    assert entry["message_id"][14] == "7"  # UUIDv7


async def test_payload_bytes_are_stored_exactly(client, broker):
    payloads = [b'1.50', b'123456789012345678901234567890', b'{"z":1,"a":{"y":[1.0,2e3]}}',
                b'"caf\\u00e9 \xc3\xa9"', b'null', b'true', b'[ 1 , 2 ]', b'-0.0']
    items = b",".join(b'{"queue":"exact","payload":' + p + b"}" for p in payloads)
    r = await client.post("/api/v1/push", content=b'{"items":[' + items + b"]}")
    assert r.status_code == 201, r.text
    stored = await stored_messages(broker.db, "exact")
    assert [m.frame.payload for m in stored] == payloads
    assert [m.offset for m in stored] == list(range(len(payloads)))
    ids = [e["message_id"] for e in r.json()]
    assert [str(m.frame.message_id) for m in stored] == ids


async def test_empty_items_is_201_empty_array(client):
    r = await client.post("/api/v1/push", json={"items": []})
    assert r.status_code == 201
    assert r.json() == []


async def test_trace_id_and_producer_sub_in_body_are_ignored(client, broker):
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "t", "payload": 1, "traceId": "not-a-uuid", "producerSub": "mallory"},
        {"queue": "t", "payload": 2, "traceId": 42},
        {"queue": "t", "payload": 3, "traceId": "0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83"},
    ]})
    assert r.status_code == 201, r.text
    stored = await stored_messages(broker.db, "t")
    assert [m.frame.trace_id for m in stored] == [None, None, None]
    assert [m.frame.producer_sub for m in stored] == [None, None, None]


async def test_one_call_spans_queues_and_partitions(client, broker):
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "a", "partition": "p1", "payload": {"n": 1}},
        {"queue": "b", "payload": {"n": 2}},
        {"queue": "a", "partition": "p2", "payload": {"n": 3}},
        {"queue": "a", "partition": "p1", "payload": {"n": 4}},
    ]})
    assert r.status_code == 201
    assert [e["index"] for e in r.json()] == [0, 1, 2, 3]
    assert [e["queueName"] for e in r.json()] == ["a", "b", "a", "a"]
    p1 = await stored_messages(broker.db, "a", "p1")
    assert [json.loads(m.frame.payload)["n"] for m in p1] == [1, 4]
    assert [json.loads(m.frame.payload)["n"] for m in await stored_messages(broker.db, "b")] == [2]
    assert [json.loads(m.frame.payload)["n"] for m in await stored_messages(broker.db, "a", "p2")] == [3]


async def test_generated_transaction_id_is_the_message_id(client):
    r = await client.post("/api/v1/push", json={"items": [{"queue": "g", "payload": 1},
                                                          {"queue": "g", "payload": 1,
                                                           "transactionId": ""}]})
    for entry in r.json():
        assert entry["transaction_id"] == entry["message_id"]
        assert entry["status"] == "queued"
