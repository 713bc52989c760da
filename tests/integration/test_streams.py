"""Streams routes (/streams/v1/*) over raw HTTP: registration, cycles, state reads, replays,
fencing, bounds and bad input (docs/streams.md, docs/decisions.md#streams)."""

from __future__ import annotations

import uuid

import httpx
import pytest
import trio

from tests.support.db import db_fetchval

SRC = "st.src"
SINK = "st.sink"


async def register(client: httpx.AsyncClient, name: str = "q1", config_hash: str = "h1",
                   **extra: object) -> httpx.Response:
    return await client.post("/streams/v1/queries", json={
        "name": name, "source_queue": SRC, "config_hash": config_hash, **extra})


async def push(client: httpx.AsyncClient, n: int, partition: str = "p1",
               queue: str = SRC) -> None:
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": queue, "partition": partition, "payload": {"n": i}} for i in range(n)]})
    assert r.status_code == 201, r.text


async def pop(client: httpx.AsyncClient, group: str = "streams.q1", queue: str = SRC,
              batch: int = 10) -> list[dict]:
    r = await client.get(f"/api/v1/pop/queue/{queue}",
                         params={"batch": batch, "consumerGroup": group, "wait": "false"})
    if r.status_code == 204:
        return []
    assert r.status_code == 200, r.text
    return r.json()["messages"]


async def cycle(client: httpx.AsyncClient, **body: object) -> dict:
    r = await client.post("/streams/v1/cycle", json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def state(client: httpx.AsyncClient, qid: str, pid: str, **body: object) -> list[dict]:
    r = await client.post("/streams/v1/state/get",
                          json={"query_id": qid, "partition_id": pid, **body})
    assert r.status_code == 200, r.text
    assert r.json()["success"] is True
    return r.json()["rows"]


async def test_register_fresh_same_hash_mismatch_and_reset(client):
    first = (await register(client)).json()
    assert first["success"] is True and first["fresh"] is True and first["reset"] is False
    uuid.UUID(first["query_id"])
    again = (await register(client)).json()
    assert again["query_id"] == first["query_id"] and again["fresh"] is False
    refused = await register(client, config_hash="h2")
    assert refused.status_code == 409
    assert "config_hash mismatch" in refused.json()["error"]
    assert refused.json()["query_id"] == first["query_id"]
    wiped = (await register(client, config_hash="h2", reset=True)).json()
    assert wiped["reset"] is True and wiped["query_id"] == first["query_id"]
    assert (await register(client, config_hash="h2")).json()["fresh"] is False


async def test_a_stateful_cycle_commits_state_sink_and_ack_together(client, broker):
    qid = (await register(client)).json()["query_id"]
    await push(client, 3)
    msgs = await pop(client)
    assert [m["data"]["n"] for m in msgs] == [0, 1, 2]
    pid, last = msgs[0]["partitionId"], msgs[-1]
    reply = await cycle(client, query_id=qid, partition_id=pid, consumer_group="streams.q1",
                        state_ops=[{"type": "upsert", "key": "b", "value": {"windowEnd": 10}},
                                   {"type": "upsert", "key": "a", "value": {"windowEnd": 20.5}},
                                   {"type": "upsert", "key": "a_x", "value": 1},
                                   {"type": "delete", "key": "zz"}],
                        push_items=[{"queue": SINK, "partition": "p1", "payload": {"sum": 3}}],
                        ack={"transactionId": last["transactionId"], "leaseId": last["leaseId"],
                             "status": "completed", "count": 3})
    assert reply["success"] is True, reply
    assert reply["state_ops_applied"] == 4 and reply["queueName"] == SRC
    assert reply["push_results"][0]["status"] == "queued"
    assert reply["ack_result"] == {"success": True, "count": 1, "lease_released": True,
                                   "dlq": False}
    rows = await state(client, qid, pid)
    assert [r["key"] for r in rows] == ["a", "a_x", "b"]
    # A real prefix ("_" is not a wildcard) and a numeric windowEnd filter.
    assert [r["key"] for r in await state(client, qid, pid, key_prefix="a_")] == ["a_x"]
    assert [r["key"] for r in await state(client, qid, pid, ripe_at_or_before=15)] == ["b"]
    assert [r["key"] for r in await state(client, qid, pid, ripe_at_or_before=20.5)] == ["a", "b"]
    assert [r["key"] for r in await state(client, qid, pid, keys=["b", "nope"])] == ["b"]
    # The lease was released: the group's next pop is empty (all acked), a new group sees the
    # sink message at once.
    assert await pop(client) == []
    assert [m["data"] for m in await pop(client, group="reader", queue=SINK)] == [{"sum": 3}]


async def test_a_stale_lease_fails_fast_and_applies_nothing(client, broker):
    qid = (await register(client)).json()["query_id"]
    await push(client, 2)
    msgs = await pop(client)
    pid = msgs[0]["partitionId"]
    reply = await cycle(client, query_id=qid, partition_id=pid, consumer_group="streams.q1",
                        state_ops=[{"type": "upsert", "key": "k", "value": 1}],
                        push_items=[{"queue": SINK, "payload": {"x": 1}}],
                        ack={"transactionId": msgs[-1]["transactionId"],
                             "leaseId": str(uuid.uuid4())})
    assert reply["success"] is False and reply["error"] == "Invalid or expired lease"
    assert reply["state_ops_applied"] == 0 and reply["push_results"] == []
    assert await state(client, qid, pid) == []
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.queues WHERE name = $1",
                             SINK) == 0


async def test_reference_error_texts(client):
    qid = (await register(client)).json()["query_id"]
    await push(client, 1)
    msgs = await pop(client)
    pid = msgs[0]["partitionId"]
    base = {"query_id": qid, "partition_id": pid, "consumer_group": "streams.q1"}
    assert (await cycle(client, **base, ack={}))["error"] == "ack.transactionId is required"
    assert (await cycle(client, **base, state_ops=[{"type": "merge", "key": "k"}]))[
        "error"] == "Unknown state_op type: merge"
    assert (await cycle(client, **base, ack={"transactionId": "x", "status": "retry"}))[
        "error"] == "Unknown ack.status: retry"
    assert (await cycle(client, **base, ack={"transactionId": "nope",
                                             "leaseId": msgs[0]["leaseId"]}))[
        "error"] == "Message not found"
    unknown = await cycle(client, query_id=str(uuid.uuid4()), partition_id=pid,
                          state_ops=[{"type": "upsert", "key": "k", "value": 1}])
    assert unknown["success"] is False and "Unknown query_id" in unknown["error"]


@pytest.mark.parametrize("body, fragment", [
    ({"query_id": "not-a-uuid", "partition_id": str(uuid.uuid4())}, "query_id is not a valid"),
    ({"partition_id": str(uuid.uuid4())}, "query_id is required"),
    ({"query_id": str(uuid.uuid4()), "partition_id": 7}, "partition_id is required"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "release_lease": "yes"}, "release_lease must be a boolean"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "state_ops": {"type": "upsert"}}, "state_ops must be an array"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "ack": {"transactionId": "t", "count": 1.5}}, "ack.count must be"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "ack": {"transactionId": "t", "leaseId": "zz"}}, "ack.leaseId is not a valid UUID"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "state_ops": [{"type": "upsert", "key": "k" * 1025, "value": 1}]}, "longer than 1024"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "state_ops": [{"type": "upsert", "key": "k\u0000", "value": 1}]}, "NUL"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "state_ops": [{"type": "upsert", "key": "k", "value": "a\u0000"}]}, "NUL"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "push_items": [{"payload": 1}]}, "queue (push_items[0]) is required"),
    ({"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
      "push_items": [{"queue": "q", "traceId": "t"}]}, "traceId"),
])
async def test_bad_cycle_input_is_a_400(client, body, fragment):
    r = await client.post("/streams/v1/cycle", json=body)
    assert r.status_code == 400, r.text
    assert fragment in r.json()["error"]


async def test_bounds_are_413_and_other_routes_refuse_bad_input(client):
    ids = {"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4())}
    r = await client.post("/streams/v1/cycle", json={
        **ids, "state_ops": [{"type": "delete", "key": "k"}] * 10_001})
    assert r.status_code == 413 and "at most 10000" in r.json()["error"]
    r = await client.post("/streams/v1/cycle", json={
        **ids, "state_ops": [{"type": "upsert", "key": "k", "value": "x" * (1024 * 1024)}]})
    assert r.status_code == 413
    r = await client.post("/streams/v1/state/get", json={"query_id": "x", "partition_id": "y"})
    assert r.status_code == 400 and "not a valid UUID" in r.json()["error"]
    r = await client.post("/streams/v1/state/get", json={**ids, "ripe_at_or_before": "5"})
    assert r.status_code == 400
    r = await client.post("/streams/v1/state/get", json={**ids, "keys": None})
    assert r.status_code == 200 and r.json() == {"success": True, "rows": []}
    for body, status in [(b"", 400), (b"[1]", 400), (b"{", 400)]:
        r = await client.post("/streams/v1/queries", content=body)
        assert r.status_code == status
    assert (await client.post("/streams/v1/queries", json={"name": "n", "source_queue": "s"})
            ).json()["error"] == "config_hash is required"
    r = await register(client, reset="true")
    assert r.status_code == 400 and "reset must be a boolean" in r.json()["error"]


async def test_replayed_cycles_are_answered_with_the_first_reply(client, broker):
    """Each of the three kinds of cycle sent twice gives one sink message, with the sink's
    dedup window at 0 (generated transaction ids could not catch a replay)."""
    r = await client.post("/api/v1/configure", json={"queue": SINK, "options": {
        "dedupWindowSeconds": 0}})
    assert r.status_code == 200, r.text
    qid = (await register(client)).json()["query_id"]
    await push(client, 4)
    msgs = await pop(client, batch=2)
    pid = msgs[0]["partitionId"]
    base = {"query_id": qid, "partition_id": pid, "consumer_group": "streams.q1"}

    # 1. Acked, release_lease:true. The replay answers the first reply (success:true).
    body = {**base, "push_items": [{"queue": SINK, "partition": "r1", "payload": {"k": 1}}],
            "ack": {"transactionId": msgs[-1]["transactionId"], "leaseId": msgs[-1]["leaseId"],
                    "status": "completed", "count": 2}, "release_lease": True}
    first = await cycle(client, **body)
    replay = await cycle(client, **body)
    assert first["success"] is True and replay == first

    # 2. Acked, release_lease:false (the gate's partial allow): the lease stays live, the
    # replay passes the lease check, and still pushes nothing.
    msgs = await pop(client, batch=2)
    body = {**base, "push_items": [{"queue": SINK, "partition": "r2", "payload": {"k": 2}}],
            "ack": {"transactionId": msgs[0]["transactionId"], "leaseId": msgs[0]["leaseId"]},
            "release_lease": False}
    first = await cycle(client, **body)
    assert first["success"] is True and first["ack_result"]["lease_released"] is False
    assert await cycle(client, **body) == first

    # 3. An ack-less flush: its deletes are its key.
    await cycle(client, **base, state_ops=[{"type": "upsert", "key": "w1", "value": 1}])
    body = {**base, "state_ops": [{"type": "delete", "key": "w1"}], "ack": None,
            "push_items": [{"queue": SINK, "partition": "r3", "payload": {"k": 3}}]}
    first = await cycle(client, **body)
    assert first["success"] is True
    assert await cycle(client, **body) == first

    for partition in ("r1", "r2", "r3"):
        got = await db_fetchval(broker.db, """
            SELECT coalesce(sum(s.message_count), 0) FROM queen.segments s
              JOIN queen.partitions p ON p.id = s.partition_id
              JOIN queen.queues q ON q.id = p.queue_id
             WHERE q.name = $1 AND p.name = $2""", SINK, partition)
        assert got == 1, partition
    # The window's key written again is a new window: its flush is not a replay.
    await cycle(client, **base, state_ops=[{"type": "upsert", "key": "w1", "value": 2}])
    again = await cycle(client, **body)
    assert again["success"] is True and again != first


async def test_concurrent_first_registrations_with_different_hashes_one_wins(client):
    for round_no in range(5):
        name = f"race-{round_no}"
        replies: list[httpx.Response] = []

        async def one(name: str, config_hash: str, replies: list[httpx.Response]) -> None:
            replies.append(await register(client, name=name, config_hash=config_hash))

        async with trio.open_nursery() as nursery:
            for h in ("a", "b", "c"):
                nursery.start_soon(one, name, h, replies)
        statuses = sorted(r.status_code for r in replies)
        assert statuses == [200, 409, 409], [r.text for r in replies]
        winner = next(r.json() for r in replies if r.status_code == 200)
        assert winner["fresh"] is True
        assert {r.json()["query_id"] for r in replies} == {winner["query_id"]}


async def test_the_cursor_never_moves_back_and_delete_removes_the_query(client, broker):
    qid = (await register(client)).json()["query_id"]
    await push(client, 3)
    msgs = await pop(client)
    pid = msgs[0]["partitionId"]
    base = {"query_id": qid, "partition_id": pid, "consumer_group": "streams.q1"}
    ok = await cycle(client, **base, state_ops=[{"type": "upsert", "key": "k", "value": 1}],
                     ack={"transactionId": msgs[-1]["transactionId"],
                          "leaseId": msgs[-1]["leaseId"]})
    assert ok["success"] is True
    back = await cycle(client, **base, ack={"transactionId": msgs[0]["transactionId"]})
    assert back["success"] is False and "never moves backwards" in back["error"]
    listed = (await client.get("/streams/v1/queries")).json()["queries"]
    assert [(q["name"], q["stateRows"]) for q in listed] == [("q1", 1)]
    detail = (await client.get("/streams/v1/queries/q1")).json()
    assert detail["stateShards"][0]["partition"] == "p1"
    assert detail["stateShards"][0]["lag"] == 0
    assert (await client.delete("/streams/v1/queries/q1")).json()["success"] is True
    assert (await client.delete("/streams/v1/queries/q1")).status_code == 404
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.stream_state") == 0


async def test_state_of_a_deleted_queue_goes_with_it(client, broker):
    qid = (await register(client)).json()["query_id"]
    await push(client, 1)
    pid = (await pop(client))[0]["partitionId"]
    await cycle(client, query_id=qid, partition_id=pid,
                state_ops=[{"type": "upsert", "key": "k", "value": 1}])
    assert (await client.delete(f"/api/v1/resources/queues/{SRC}")).status_code == 200
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.stream_state") == 0
    # The queue and partition made again: a new partition id, no state.
    await push(client, 1)
    pid2 = (await pop(client))[0]["partitionId"]
    assert pid2 != pid and await state(client, qid, pid2) == []


async def test_a_full_sink_fails_the_whole_cycle(client, broker):
    r = await client.post("/api/v1/configure", json={"queue": SINK, "options": {"maxSize": 1}})
    assert r.status_code == 200, r.text
    qid = (await register(client)).json()["query_id"]
    await push(client, 1)
    msgs = await pop(client)
    pid = msgs[0]["partitionId"]
    reply = await cycle(client, query_id=qid, partition_id=pid, consumer_group="streams.q1",
                        state_ops=[{"type": "upsert", "key": "k", "value": 1}],
                        push_items=[{"queue": SINK, "payload": {"i": i}} for i in range(2)],
                        ack={"transactionId": msgs[0]["transactionId"],
                             "leaseId": msgs[0]["leaseId"]})
    assert reply["success"] is False and "queue full" in reply["error"]
    assert await state(client, qid, pid) == []


async def test_metrics_count_cycles_by_outcome_and_the_state(client, broker):
    from prometheus_client.parser import text_string_to_metric_families

    qid = (await register(client)).json()["query_id"]
    await push(client, 1)
    msgs = await pop(client)
    pid = msgs[0]["partitionId"]
    body = {"query_id": qid, "partition_id": pid, "consumer_group": "streams.q1",
            "state_ops": [{"type": "upsert", "key": "k", "value": {"n": 1}}],
            "ack": {"transactionId": msgs[0]["transactionId"], "leaseId": msgs[0]["leaseId"]}}
    assert (await cycle(client, **body))["success"] is True
    assert (await cycle(client, **body))["success"] is True  # a replay
    assert (await cycle(client, **{**body, "ack": {"transactionId": "nope"}}))[
        "success"] is False
    assert (await cycle(client, **{**body, "ack": {}}))["success"] is False
    text = (await client.get("/metrics/prometheus")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    me = broker.identity.worker_id
    cycles = {s.labels["outcome"]: s.value for s in families["queen_streams_cycles"].samples
              if s.labels.get("worker_id") == me and s.name.endswith("_total")}
    assert cycles == {"committed": 1, "replayed": 1, "failed": 1, "refused": 1}
    (rows,) = families["queen_streams_state_rows"].samples
    assert rows.value == 1
    (size,) = families["queen_streams_state_bytes"].samples
    assert size.value > 0
    as_json = (await client.get("/metrics")).json()["streams"]
    assert as_json["cycles"] == {"committed": 1, "replayed": 1, "failed": 1, "refused": 1}
