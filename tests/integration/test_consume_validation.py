"""Bad input on every consumption route: 4xx with {"error"}, never 5xx, nothing changed."""

from __future__ import annotations

import pytest

from tests.support.consuming import data, pop, push

UUID = "0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83"


@pytest.mark.parametrize("query", [
    {"batch": "-1"}, {"batch": "0"}, {"batch": "ten"}, {"batch": "1.5"}, {"batch": "99999999"},
    {"timeout": "-5"}, {"timeout": "soon"}, {"partitions": "0"}, {"partitions": "x"},
    {"wait": "maybe"}, {"autoAck": "yes"}, {"subscriptionMode": "sometimes"},
    {"subscriptionFrom": "yesterday"}, {"consumerGroup": "g" * 300},
])
async def test_bad_pop_parameters_are_400(client, query):
    await push(client, "v", 1)
    for path in ("/api/v1/pop/queue/v", "/api/v1/pop/queue/v/partition/Default"):
        r = await client.get(path, params=query)
        assert r.status_code == 400, (path, query, r.text)
        assert "error" in r.json()
    # Nothing was leased by the refused pops.
    assert data(await pop(client, "v")) == [1]


async def test_namespace_pop_needs_namespace_or_task(client):
    r = await client.get("/api/v1/pop")
    assert r.status_code == 400 and "namespace or task" in r.json()["error"]


@pytest.mark.parametrize(("body", "message"), [
    ({}, "transactionId is required"),
    ({"transactionId": 5, "partitionId": UUID}, "transactionId must be a string"),
    ({"transactionId": "t"}, "partitionId is required"),
    ({"transactionId": "t", "partitionId": "not-a-uuid"}, "not a valid UUID"),
    ({"transactionId": "t", "partitionId": 42}, "must be a UUID string"),
    ({"transactionId": "t", "partitionId": UUID, "leaseId": "nope"}, "leaseId is not a valid UUID"),
    ({"transactionId": "t", "partitionId": UUID, "status": "maybe"}, "status must be one of"),
    ({"transactionId": "t", "partitionId": UUID, "status": 1}, "status must be one of"),
    ({"transactionId": "t", "partitionId": UUID, "consumerGroup": 3}, "consumerGroup must be"),
    ({"transactionId": "t", "partitionId": UUID, "error": {"x": 1}}, "error must be"),
])
async def test_bad_ack_is_400(client, body, message):
    r = await client.post("/api/v1/ack", json=body)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]


@pytest.mark.parametrize(("body", "message"), [
    ({}, "acknowledgments array is required"),
    ({"acknowledgments": {}}, "acknowledgments array is required"),
    ({"acknowledgments": [5]}, "must be an object"),
    ({"acknowledgments": [{"transactionId": "t", "partitionId": UUID}, {"transactionId": "t"}]},
     "partitionId is required"),
    ({"acknowledgments": [{"transactionId": "t", "partitionId": UUID, "status": "nope"}]},
     "status (item 0) must be one of"),
])
async def test_bad_ack_batch_is_400(client, body, message):
    r = await client.post("/api/v1/ack/batch", json=body)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]


@pytest.mark.parametrize("raw", [b"{", b"[1,2]", b'{"transactionId":NaN}', b"\xff"])
async def test_ack_bad_json_is_400(client, raw):
    for path in ("/api/v1/ack", "/api/v1/ack/batch"):
        r = await client.post(path, content=raw)
        assert r.status_code == 400, r.text


async def test_empty_ack_batch_is_an_empty_array(client):
    r = await client.post("/api/v1/ack/batch", json={"acknowledgments": []})
    assert r.status_code == 200 and r.json() == []


@pytest.mark.parametrize(("lease", "body", "status"), [
    ("not-a-uuid", b"{}", 400),
    (UUID, b'{"seconds":"60"}', 400),
    (UUID, b'{"seconds":-1}', 400),
    (UUID, b'{"seconds":true}', 400),
    (UUID, b"[]", 400),
    (UUID, b"{", 400),
])
async def test_bad_lease_extend_is_400(client, lease, body, status):
    r = await client.post(f"/api/v1/lease/{lease}/extend", content=body)
    assert r.status_code == status, r.text
    assert "error" in r.json()


@pytest.mark.parametrize("query", [{"limit": "-1"}, {"limit": "x"}, {"offset": "-3"}])
async def test_bad_dlq_query_is_400(client, query):
    r = await client.get("/api/v1/dlq", params=query)
    assert r.status_code == 400 and "error" in r.json()


async def test_pop_during_a_database_outage_is_503(client, broker, admin_url):
    from tests.support.outage import database_cut_off

    await push(client, "out", 1)
    async with database_cut_off(admin_url, broker.settings.database_url):
        r = await client.get("/api/v1/pop/queue/out")
        assert r.status_code == 503
        assert "database connection unavailable" in r.json()["error"]
        r = await client.post("/api/v1/ack", json={"transactionId": "t", "partitionId": UUID})
        assert r.status_code == 503
