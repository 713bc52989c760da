"""Traces: record events against messages, read them back, follow a flow by name."""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli
from tests.support.consuming import pop, push

UUID = "0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83"


async def trace(client, message, data, names=None, event="info", group=None):
    r = await client.post("/api/v1/traces", json={
        "transactionId": message["transactionId"], "partitionId": message["partitionId"],
        "consumerGroup": group, "eventType": event, "traceNames": names, "data": data})
    return r


async def test_record_and_read_traces(client):
    await push(client, "orders", {"id": 1}, partition="c-1", txids=["o-1"])
    m = (await pop(client, "orders"))["messages"][0]
    r = await trace(client, m, {"step": "received", "amount": 1.5}, ["order-1"])
    assert r.status_code == 201
    assert r.json()["success"] is True and len(r.json()["traceId"]) == 36
    await trace(client, m, {"step": "charged"}, ["order-1", "billing"], event="step")

    r = await client.get(f"/api/v1/traces/{m['partitionId']}/o-1")
    events = r.json()["traces"]
    assert [e["data"]["step"] for e in events] == ["received", "charged"]
    assert events[0]["trace_names"] == ["order-1"]
    assert events[1]["trace_names"] == ["billing", "order-1"]
    assert set(events[0]) == {"id", "event_type", "data", "consumer_group", "worker_id",
                              "created_at", "trace_names"}
    assert events[0]["consumer_group"] == "__QUEUE_MODE__"

    r = await client.get("/api/v1/traces/by-name/order-1")
    body = r.json()
    assert body["total"] == 2 and body["pagination"] == {"limit": 100, "offset": 0}
    first = body["traces"][0]
    assert first["queue_name"] == "orders" and first["partition_name"] == "c-1"
    assert first["message_payload"] == {"id": 1}
    assert first["transaction_id"] == "o-1"

    r = await client.get("/api/v1/traces/names")
    names = {n["trace_name"]: n for n in r.json()["trace_names"]}
    assert names["order-1"]["trace_count"] == 2 and names["order-1"]["message_count"] == 1
    assert names["billing"]["trace_count"] == 1
    assert r.json()["total"] == 2

    assert (await client.get(f"/api/v1/traces/{UUID}/nothing")).json() == {"traces": []}


async def test_a_trace_of_a_message_whose_frame_does_not_parse_shows_no_payload(client, broker):
    from tests.support.db import db_execute

    await push(client, "frames", {"n": 1}, txids=["f-1"])
    m = (await pop(client, "frames"))["messages"][0]
    await trace(client, m, {"step": "seen"}, ["broken-1"])
    # Corrupt the frame's payload length (the 4 bytes at 21..24 of its header).
    await db_execute(broker.db, """
        UPDATE queen.segments SET frames = overlay(frames PLACING '\\xffffffff'::bytea FROM 22)""")
    r = await client.get("/api/v1/traces/by-name/broken-1")
    assert r.status_code == 200, r.text
    (event,) = r.json()["traces"]
    assert event["message_payload"] is None and event["data"] == {"step": "seen"}


async def test_encrypted_payload_is_decrypted_in_traces(database_url):
    import httpx

    from queen_trio.broker import open_broker
    from queen_trio.web.routes import create_app
    from tests.support.brokers import make_settings

    key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
    settings = make_settings(database_url, encryption_key=key)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            await client.post("/api/v1/configure", json={"queue": "sec", "options": {
                "encryptionEnabled": True}})
            await push(client, "sec", {"secret": "s"})
            m = (await pop(client, "sec"))["messages"][0]
            assert m["data"] == {"secret": "s"}
            await trace(client, m, {"ok": True}, ["flow"])
            body = (await client.get("/api/v1/traces/by-name/flow")).json()
            assert body["traces"][0]["message_payload"] == {"secret": "s"}


async def test_the_trace_command_prints_a_timeline(http_url, client):
    # `client` and `http_url` serve the same broker.
    await push(client, "a.step1", "x", txids=["t1"])
    await push(client, "a.step2", "y", txids=["t2"])
    for queue, note in (("a.step1", "first"), ("a.step2", "second")):
        m = (await pop(client, queue))["messages"][0]
        assert (await trace(client, m, {"note": note}, ["flow-7"])).status_code == 201
    done = await run_cli("trace", "flow-7", "--url", http_url, "-o", "table")
    out = done.out
    assert "trace 'flow-7': 2 events on 2 messages" in out
    lines = out.splitlines()
    assert lines[1].split()[:3] == ["TIME", "QUEUE/PARTITION", "GROUP"]
    assert "a.step1/Default" in lines[2] and '{"note":"first"}' in lines[2]
    assert "a.step2/Default" in lines[3] and '{"note":"second"}' in lines[3]
    unreachable = await run_cli("trace", "x", "--url", "http://127.0.0.1:1")
    assert unreachable.status == 6 and "cannot reach" in unreachable.err


async def test_the_trace_command_counts_in_the_singular_and_exits_4_on_an_empty_trace(
        http_url, client):
    await push(client, "solo", "x", txids=["t1"])
    m = (await pop(client, "solo"))["messages"][0]
    assert (await trace(client, m, {"note": "only"}, ["just-one"])).status_code == 201
    one = await run_cli("trace", "just-one", "--url", http_url, "-o", "table")
    assert "trace 'just-one': 1 event on 1 message\n" in one.out
    unknown = await run_cli("trace", "no-such", "--url", http_url, "-o", "table")
    assert unknown.status == 4
    assert unknown.out == "trace 'no-such': no events\n"


@pytest.mark.parametrize(("body", "status", "message"), [
    ({}, 400, "transactionId and partitionId are required"),
    ({"transactionId": "t"}, 400, "transactionId and partitionId are required"),
    ({"transactionId": "t", "partitionId": "bad", "data": 1}, 400, "not a valid UUID"),
    ({"transactionId": "t", "partitionId": UUID}, 400, "data is required"),
    ({"transactionId": 5, "partitionId": UUID, "data": 1}, 400, "transactionId must be"),
    ({"transactionId": "t", "partitionId": UUID, "data": 1, "traceNames": [3]}, 400, "traceNames"),
    ({"transactionId": "t", "partitionId": UUID, "data": 1, "eventType": 9}, 400, "eventType"),
    ({"transactionId": "t", "partitionId": UUID, "data": 1, "consumerGroup": 1}, 400,
     "consumerGroup"),
    ({"transactionId": "t", "partitionId": UUID, "data": 1}, 404, "Message not found"),
])
async def test_bad_trace_input(client, body, status, message):
    r = await client.post("/api/v1/traces", json=body)
    assert r.status_code == status, r.text
    assert message in r.json()["error"]


@pytest.mark.parametrize("path", ["/api/v1/traces/not-a-uuid/t", "/api/v1/traces/names?limit=-1",
                                  "/api/v1/traces/by-name/x?offset=no"])
async def test_bad_trace_queries_are_400(client, path):
    r = await client.get(path)
    assert r.status_code == 400 and "error" in r.json()
