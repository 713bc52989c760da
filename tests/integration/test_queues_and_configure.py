"""Implicit queues created by a push, and POST /api/v1/configure."""

from __future__ import annotations

import pytest

from queen_trio.queues import options as opts
from tests.support.db import db_fetch, db_fetchrow, db_fetchval

ALL_KEYS = {"priority", "leaseTime", "retryLimit", "retryDelay", "maxSize", "ttl",
            "deadLetterQueue", "dlqAfterMaxRetries", "delayedProcessing", "windowBuffer",
            "retentionSeconds", "completedRetentionSeconds", "retentionEnabled",
            "encryptionEnabled", "maxWaitTimeSeconds", "dedupWindowSeconds"}


async def queue_row(broker, name):
    return await db_fetchrow(broker.db, "SELECT * FROM queen.queues WHERE name = $1", name)


async def test_first_push_creates_queue_config_row_and_partition(client, broker):
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": "orders.created.eu", "partition": "c-1", "payload": 1}]})
    assert r.status_code == 201
    row = await queue_row(broker, "orders.created.eu")
    assert (row["namespace"], row["task"]) == ("orders", "created")
    assert row["configured"] is False
    parts = await db_fetch(broker.db,
        "SELECT p.name, p.next_offset FROM queen.partitions p WHERE p.queue_id = $1", row["id"])
    assert [(p["name"], p["next_offset"]) for p in parts] == [("c-1", 1)]


async def test_undotted_name_has_itself_as_namespace_and_empty_task(client, broker):
    await client.post("/api/v1/push", json={"items": [{"queue": "plain", "payload": 1}]})
    row = await queue_row(broker, "plain")
    assert (row["namespace"], row["task"]) == ("plain", "")


async def test_implicit_queue_leases_60s_and_configured_queue_300s(client, broker):
    await client.post("/api/v1/push", json={"items": [{"queue": "imp", "payload": 1}]})
    assert (await queue_row(broker, "imp"))["lease_time"] == 60
    r = await client.post("/api/v1/configure", json={"queue": "imp", "options": {"retryLimit": 5}})
    assert r.json()["options"]["leaseTime"] == 300
    assert (await queue_row(broker, "imp"))["lease_time"] == 300

    await client.post("/api/v1/configure", json={"queue": "conf"})
    assert (await queue_row(broker, "conf"))["lease_time"] == 300


async def test_explicit_lease_time_survives_a_later_configure_without_it(client, broker):
    await client.post("/api/v1/configure", json={"queue": "lt", "options": {"leaseTime": 45}})
    r = await client.post("/api/v1/configure", json={"queue": "lt", "options": {"retryLimit": 1}})
    assert r.json()["options"]["leaseTime"] == 45
    assert (await queue_row(broker, "lt"))["lease_time"] == 45


async def test_implicit_column_defaults_match_the_python_model(client, broker):
    await client.post("/api/v1/push", json={"items": [{"queue": "cols", "payload": 1}]})
    row = await queue_row(broker, "cols")
    assert {f: row[f] for f in opts.FIELDS} == opts.QueueOptions.implicit().to_columns()


async def test_configure_reply_echoes_every_option(client, broker):
    r = await client.post("/api/v1/configure", json={
        "queue": "shop.orders", "namespace": None, "task": None,
        "options": {"leaseTime": 120, "delayedProcessing": 30, "encryptionEnabled": False,
                    "colour": "blue", "retentionSeconds": 10}})
    assert r.status_code == 200
    body = r.json()
    assert body["configured"] is True
    assert body["queue"] == "shop.orders"
    assert (body["namespace"], body["task"]) == ("shop", "orders")
    assert set(body["options"]) == ALL_KEYS
    assert body["options"]["leaseTime"] == 120
    assert body["options"]["delayedProcessing"] == 30
    assert body["options"]["deadLetterQueue"] is True
    assert body["options"]["dedupWindowSeconds"] == 3600
    assert body["ignoredOptions"] == ["colour"]
    partition = await db_fetchrow(broker.db,
        "SELECT id::text AS id, name FROM queen.partitions WHERE id = $1::uuid",
        body["partitionId"])
    assert partition["name"] == "Default"
    row = await queue_row(broker, "shop.orders")
    assert str(row["id"]) == body["queueId"]
    assert "colour" not in row["explicit_options"]
    assert row["delayed_processing"] == 30


async def test_configure_merges_null_resets_and_replace_replaces(client, broker):
    await client.post("/api/v1/configure", json={"queue": "m", "options": {
        "delayedProcessing": 30, "retryLimit": 7}})
    r = await client.post("/api/v1/configure", json={"queue": "m", "options": {"priority": 4}})
    o = r.json()["options"]
    assert (o["delayedProcessing"], o["retryLimit"], o["priority"]) == (30, 7, 4)

    r = await client.post("/api/v1/configure", json={"queue": "m", "options": {
        "delayedProcessing": None}})
    o = r.json()["options"]
    assert (o["delayedProcessing"], o["retryLimit"], o["priority"]) == (0, 7, 4)
    assert (await queue_row(broker, "m"))["delayed_processing"] == 0

    r = await client.post("/api/v1/configure", json={"queue": "m", "mode": "replace",
                                                     "options": {"ttl": 10}})
    o = r.json()["options"]
    assert (o["retryLimit"], o["priority"], o["ttl"]) == (3, 0, 10)


async def test_null_namespace_and_task_keep_their_values(client):
    r = await client.post("/api/v1/configure", json={"queue": "a.b", "namespace": "custom",
                                                     "task": "job"})
    assert (r.json()["namespace"], r.json()["task"]) == ("custom", "job")
    r = await client.post("/api/v1/configure", json={"queue": "a.b", "namespace": None,
                                                     "task": None, "options": {}})
    assert (r.json()["namespace"], r.json()["task"]) == ("custom", "job")
    r = await client.post("/api/v1/configure", json={"queue": "a.b", "mode": "replace"})
    assert (r.json()["namespace"], r.json()["task"]) == ("custom", "job")


async def test_configure_keeps_messages_and_partitions(client, broker):
    await client.post("/api/v1/push", json={"items": [{"queue": "keep", "partition": "x",
                                                       "payload": 1}]})
    await client.post("/api/v1/configure", json={"queue": "keep", "options": {"ttl": 5}})
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 1


async def test_concurrent_configure_calls_merge_one_after_the_other(client):
    import trio

    async def set_option(name, value):
        r = await client.post("/api/v1/configure", json={"queue": "cc", "options": {name: value}})
        assert r.status_code == 200

    async with trio.open_nursery() as nursery:
        for i, name in enumerate(["priority", "retryLimit", "ttl", "windowBuffer", "maxSize"]):
            nursery.start_soon(set_option, name, i + 10)
    r = await client.post("/api/v1/configure", json={"queue": "cc"})
    o = r.json()["options"]
    assert [o[k] for k in ["priority", "retryLimit", "ttl", "windowBuffer", "maxSize"]] == [
        10, 11, 12, 13, 14]


@pytest.mark.parametrize(("body", "message"), [
    ({}, "queue is required"),
    ({"queue": ""}, "queue is required"),
    ({"queue": 5}, "queue must be a string"),
    ({"queue": "q", "options": []}, "options must be an object"),
    ({"queue": "q", "options": {"leaseTime": "60"}}, "option leaseTime must be an integer"),
    ({"queue": "q", "options": {"leaseTime": -1}}, "leaseTime must be between"),
    ({"queue": "q", "options": {"leaseTime": 2**40}}, "leaseTime must be between"),
    ({"queue": "q", "options": {"encryptionEnabled": "yes"}}, "must be a boolean"),
    ({"queue": "q", "options": {"retryLimit": True}}, "must be an integer"),
    ({"queue": "q", "namespace": 3}, "namespace must be a string"),
    ({"queue": "q", "mode": "upsert"}, "mode must be"),
])
async def test_bad_configure_is_400(client, broker, body, message):
    r = await client.post("/api/v1/configure", json=body)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.queues") == 0


@pytest.mark.parametrize("raw", [b"", b"{", b"[1]", b'{"queue":"q","options":{"ttl":NaN}}'])
async def test_configure_bad_json_is_400(client, raw):
    r = await client.post("/api/v1/configure", content=raw)
    assert r.status_code == 400
    assert "error" in r.json()
