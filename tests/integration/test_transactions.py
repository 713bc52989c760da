"""POST /api/v1/transaction: pushes and acks that land together, or not at all."""

from __future__ import annotations

import pytest

from tests.support.consuming import data, pop, push
from tests.support.db import db_execute, db_fetchval
from tests.support.storage import stored_messages

TRACE = "0198f2c1-4d3a-4c10-9f2b-6a1e5d0c7b83"


async def transact(client, operations, **extra):
    r = await client.post("/api/v1/transaction", json={"operations": operations, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def ack_op(message, status="completed", **fields):
    return {"type": "ack", "transactionId": message["transactionId"],
            "partitionId": message["partitionId"], "status": status,
            "consumerGroup": message["consumerGroup"], **fields}


async def test_ack_and_push_commit_together(client, broker):
    await push(client, "in", "job")
    reply = await pop(client, "in")
    m = reply["messages"][0]
    import json

    ack = json.dumps(ack_op(m, leaseId=m["leaseId"])).encode()
    raw = (b'{"operations":[' + ack + b',{"type":"push","items":[{"queue":"out","partition":"p",'
           b'"payload":{"result":1.50},"traceId":"' + TRACE.encode() + b'","transactionId":"out-1"}]}],'
           b'"requiredLeases":["' + m["leaseId"].encode() + b'"]}')
    r = await client.post("/api/v1/transaction", content=raw)
    assert r.status_code == 200
    body = r.json()
    assert body["success"] is True
    assert set(body) == {"transactionId", "success", "results"}
    ack_result, push_result = body["results"]
    assert ack_result == {"index": 0, "type": "ack", "transactionId": m["transactionId"],
                          "success": True, "error": None, "dlq": False}
    assert push_result["type"] == "push" and push_result["status"] == "queued"
    assert push_result["queueName"] == "out" and push_result["transactionId"] == "out-1"
    assert push_result["partitionId"]
    assert await pop(client, "in") is None  # acked
    out = await pop(client, "out", partition="p")
    assert out["messages"][0]["traceId"] == TRACE
    assert out["messages"][0]["id"] == push_result["messageId"]
    (stored,) = await stored_messages(broker.db, "out", "p")
    assert stored.frame.payload == b'{"result":1.50}'


async def test_a_stale_ack_commits_nothing(client, broker):
    await push(client, "in", "job")
    reply = await pop(client, "in")
    m = reply["messages"][0]
    await db_execute(broker.db,
        "UPDATE queen.consumer_state SET lease_expires_at = clock_timestamp() - interval '1 s'")
    body = await transact(client, [
        {"type": "push", "items": [{"queue": "out", "payload": 1}]},
        ack_op(m, leaseId=m["leaseId"]),
    ])
    assert body["success"] is False
    assert "Invalid or expired lease" in body["error"]
    assert await stored_messages(broker.db, "out") == []
    # The input is still unacked: redelivered to the next claimer.
    assert data(await pop(client, "in")) == ["job"]


async def test_required_lease_that_is_not_live_aborts_the_bundle(client, broker):
    await push(client, "in", "job")
    m = (await pop(client, "in"))["messages"][0]
    body = await transact(client, [
        {"type": "push", "items": [{"queue": "out", "payload": 1}]},
        ack_op(m)],  # the 0.15 and JS clients send the lease only in requiredLeases
        requiredLeases=["0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83"])
    assert body["success"] is False and "requiredLeases" in body["error"]
    assert await stored_messages(broker.db, "out") == []
    body = await transact(client, [ack_op(m)], requiredLeases=[m["leaseId"]])
    assert body["success"] is True


async def test_duplicate_push_is_reported_not_an_abort(client):
    first = await push(client, "d", "x", txids=["same"])
    body = await transact(client, [{"type": "push", "items": [
        {"queue": "d", "payload": 2, "transactionId": "same"},
        {"queue": "d", "payload": 3, "transactionId": "new"}]}])
    assert body["success"] is True
    assert [r["status"] for r in body["results"]] == ["duplicate", "queued"]
    assert body["results"][0]["messageId"] == first[0]["message_id"]


async def test_flat_push_form_and_default_payload(client):
    body = await transact(client, [
        {"type": "push", "queue": "flat", "partition": "a", "data": {"k": "v"}},
        {"type": "push", "queue": "flat", "partition": "a"}])
    assert body["success"] is True
    assert data(await pop(client, "flat", partition="a", batch=5)) == [{"k": "v"}, {}]


async def test_transaction_push_wakes_a_long_poll(client):
    import trio

    from tests.support.consuming import park_pop

    async with trio.open_nursery() as nursery:
        result = park_pop(nursery, client, "woken")
        await trio.sleep(0.2)
        await transact(client, [{"type": "push", "items": [{"queue": "woken", "payload": 1}]}])
    assert data(result["reply"]) == [1]


@pytest.mark.parametrize(("body", "message"), [
    ({}, "operations array required"),
    ({"operations": {}}, "operations array required"),
    ({"operations": []}, "operations array cannot be empty"),
    ({"operations": [5]}, "must be an object"),
    ({"operations": [{"type": "delete"}]}, "Unknown operation type"),
    ({"operations": [{"type": "push", "items": {}}]}, "must be an array of objects"),
    ({"operations": [{"type": "push", "items": [{"payload": 1}]}]}, "Queue must be a string"),
    ({"operations": [{"type": "push", "items": [{"queue": "q", "traceId": "nope"}]}]},
     "traceId (operation 0) must be a UUID"),
    ({"operations": [{"type": "push", "items": [{"queue": "q", "traceId": 7}]}]},
     "must be a UUID string"),
    ({"operations": [{"type": "ack", "transactionId": "t"}]}, "partitionId is required"),
    ({"operations": [{"type": "ack", "transactionId": "t", "partitionId": "x"}]},
     "not a valid UUID"),
    ({"operations": [{"type": "ack", "transactionId": "t",
                      "partitionId": "0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83", "status": "?"}]},
     "status (operation 0) must be one of"),
    ({"operations": [{"type": "push", "queue": "q"}], "requiredLeases": "L"}, "requiredLeases"),
    ({"operations": [{"type": "push", "queue": "q"}], "requiredLeases": ["L"]}, "not a valid UUID"),
])
async def test_bad_transaction_is_400_and_writes_nothing(client, broker, body, message):
    r = await client.post("/api/v1/transaction", json=body)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b'{"operations":[{"type":"push","queue":"q","payload":NaN}]}'])
async def test_transaction_bad_json_is_400(client, raw):
    r = await client.post("/api/v1/transaction", content=raw)
    assert r.status_code == 400 and "error" in r.json()


@pytest.mark.parametrize("riders", [
    {"timers": [{"op": "schedule", "queue": "q", "timerKey": "t", "delayMs": 1000}]},
    {"kv": [{"op": "put", "ns": "a", "key": "k", "value": 1, "forever": True}],
     "timers": [{"op": "schedule", "queue": "q", "timerKey": "t", "delayMs": 1000}]},
])
@pytest.mark.parametrize("operations", [[], [{"type": "push", "queue": "q", "payload": 1}]])
async def test_a_transaction_with_riders_is_refused_and_commits_nothing(client, broker, riders,
                                                                        operations):
    """A rider this broker cannot honour (timers) is never dropped: the whole transaction is
    refused, its kv rider included."""
    r = await client.post("/api/v1/transaction", json={"operations": operations, **riders})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "kv_bad_request"
    assert r.json()["reason"] == "riders_not_supported"
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.kv") == 0


def once(key, **extra):
    return {"op": "putIfAbsent", "ns": "jobs", "key": key, "value": True, "forever": True,
            "required": True, **extra}


async def test_a_kv_rider_alone_is_a_transaction_and_a_second_once_commits_nothing(client,
                                                                                   broker):
    first = await transact(client, [], kv=[once("job-1")])
    assert first["success"] is True
    assert first["results"] == [{"applied": True, "value": True, "version": first["results"][0]
                                 ["version"], "expiresAt": None, "op": "putIfAbsent",
                                 "key": "job-1", "index": 0}]
    second = await transact(client, [{"type": "push", "queue": "q", "payload": 1}],
                            kv=[once("job-1")])
    assert second["success"] is False and second["reason"] == "kv_precondition"
    assert second["failedIndex"] == 1  # flat: the pushed item is 0
    assert second["kvReason"] == "exists" and second["value"] is True
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0


async def test_rider_results_follow_the_pushes_and_acks_in_one_commit(client, broker):
    await push(client, "in", "job")
    m = (await pop(client, "in"))["messages"][0]
    body = await transact(client, [ack_op(m), {"type": "push", "items": [
        {"queue": "out", "payload": 1}, {"queue": "out", "payload": 2}]}],
        kv=[{"op": "incr", "ns": "c", "key": "done", "delta": 1, "forever": True},
            {"op": "get", "ns": "c", "key": "done"}])
    assert body["success"] is True
    assert [r.get("type") for r in body["results"]] == ["ack", "push", "push", None, None]
    assert [r["index"] for r in body["results"]] == [0, 1, 2, 3, 4]
    assert body["results"][3]["value"] == 1 and body["results"][4]["value"] == 1


async def test_a_failed_ack_rolls_the_rider_back(client, broker):
    bogus = {"type": "ack", "transactionId": "nope", "partitionId": TRACE,
             "consumerGroup": "g", "status": "completed"}
    body = await transact(client, [bogus], kv=[once("k")])
    assert body["success"] is False
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.kv") == 0


async def test_a_stale_guard_refuses_the_bundle(client, broker):
    r = await client.post("/api/v1/locks", json={"operations": [
        {"op": "acquire", "name": "L", "ttlSeconds": 2, "owner": "me"}]})
    grant = r.json()["results"][0]
    r = await client.post("/api/v1/locks", json={"operations": [
        {"op": "renew", "name": "L", "token": grant["token"], "ttlSeconds": 2, "owner": "me"}]})
    body = await transact(client, [{"type": "push", "queue": "q", "payload": 1}],
                          kv=[grant["guard"]])
    assert body["success"] is False and body["kvReason"] == "version"
    assert body["failedIndex"] == 1 and body["value"]["owner"] == "me"
    assert body["version"] == r.json()["results"][0]["token"]
    ok = await transact(client, [{"type": "push", "queue": "q", "payload": 1}],
                        kv=[r.json()["results"][0]["guard"]])
    assert ok["success"] is True


@pytest.mark.parametrize(("kv", "reason"), [
    ([{"op": "getPrefix", "ns": "a", "prefix": "x"}], "kv_prefix_in_transaction"),
    ([{"op": "get", "ns": "a", "key": "k"}] * 65, "kv_too_many_ops"),
    ([{"op": "nope"}], "kv_unknown_op"),
    ("x", "kv_bad_request"),
])
async def test_a_bad_rider_is_400_and_commits_nothing(client, broker, kv, reason):
    r = await client.post("/api/v1/transaction", json={
        "operations": [{"type": "push", "queue": "q", "payload": 1}], "kv": kv})
    assert r.status_code == 400 and r.json()["reason"] == reason
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0


async def test_no_operations_and_no_rider_is_still_400(client):
    r = await client.post("/api/v1/transaction", json={"operations": [], "kv": []})
    assert r.status_code == 400


@pytest.mark.parametrize("riders", [{"kv": []}, {"kv": None, "timers": []}])
async def test_empty_riders_are_no_riders(client, riders):
    body = await transact(client, [{"type": "push", "queue": "q", "payload": 1}], **riders)
    assert body["success"] is True
