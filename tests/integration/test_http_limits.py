"""HTTP limits: NUL in stored text, JSON depth, the whole-request read deadline, the
connection cap, and a bad ack in a fused batch (issue 8, point 8)."""

from __future__ import annotations

import json

import pytest

NUL = "\u0000"
PARTITION = "00000000-0000-0000-0000-000000000001"


def body(value):
    return json.dumps(value).encode()


@pytest.mark.parametrize("method,path,content", [
    ("GET", "/api/v1/pop/queue/a%00b", None),
    ("GET", "/api/v1/pop/queue/ok?consumerGroup=g%00", None),
    ("GET", "/api/v1/pop?namespace=n%00", None),
    ("GET", "/api/v1/pop/queue/ok?subscriptionMode=all%00", None),
    ("GET", "/api/v1/dlq?queue=q%00", None),
    ("GET", "/api/v1/traces/by-name/t%00", None),
    ("GET", f"/api/v1/traces/{PARTITION}/tx%00", None),
    ("DELETE", "/api/v1/resources/queues/q%00", None),
    ("POST", "/api/v1/push", body({"items": [{"queue": f"q{NUL}", "payload": 1}]})),
    ("POST", "/api/v1/push", body({"items": [{"queue": "q", "partition": f"p{NUL}",
                                              "payload": 1}]})),
    ("POST", "/api/v1/push", body({"items": [{"queue": "q", "transactionId": f"t{NUL}",
                                              "payload": 1}]})),
    ("POST", "/api/v1/ack", body({"transactionId": "t", "partitionId": PARTITION,
                                  "status": "failed", "error": f"e{NUL}"})),
    ("POST", "/api/v1/ack", body({"transactionId": f"t{NUL}", "partitionId": PARTITION})),
    ("POST", "/api/v1/ack", body({"transactionId": "t", "partitionId": PARTITION,
                                  "consumerGroup": f"g{NUL}"})),
    ("POST", "/api/v1/ack/batch", body({"acknowledgments": [
        {"transactionId": "t", "partitionId": PARTITION, "status": "dlq",
         "error": f"e{NUL}"}]})),
    ("POST", "/api/v1/transaction", body({"operations": [
        {"type": "push", "items": [{"queue": f"q{NUL}", "payload": 1}]}]})),
    ("POST", "/api/v1/transaction", body({"operations": [
        {"type": "ack", "transactionId": "t", "partitionId": PARTITION,
         "error": f"e{NUL}", "status": "failed"}]})),
    ("POST", "/api/v1/traces", body({"transactionId": "t", "partitionId": PARTITION,
                                     "data": {}, "eventType": f"e{NUL}"})),
    ("POST", "/api/v1/traces", body({"transactionId": "t", "partitionId": PARTITION,
                                     "data": {}, "traceNames": [f"n{NUL}"]})),
    ("POST", "/api/v1/configure", body({"queue": f"q{NUL}"})),
    ("POST", "/api/v1/configure", body({"queue": "q", "namespace": f"n{NUL}"})),
])
async def test_a_nul_in_text_is_a_400(client, method, path, content):
    r = await client.request(method, path, content=content,
                             headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert "NUL" in r.json()["error"]


@pytest.mark.parametrize("method,path", [
    ("POST", "/api/v1/push"), ("POST", "/api/v1/configure"), ("POST", "/api/v1/ack"),
    ("POST", "/api/v1/transaction"), ("POST", "/api/v1/traces"),
    ("POST", "/api/v1/lease/00000000-0000-0000-0000-000000000001/extend"),
])
@pytest.mark.parametrize("depth", [129, 1000])
async def test_json_deeper_than_128_levels_is_a_400(client, method, path, depth):
    if path == "/api/v1/push":
        content = b'{"items":[{"queue":"deep","payload":' + b"[" * depth + b"]" * depth + b"}]}"
    else:
        content = b'{"x":' + b"[" * depth + b"]" * depth + b"}"
    r = await client.request(method, path, content=content)
    assert r.status_code == 400, r.text
    assert "nested" in r.json()["error"]


async def test_json_of_128_levels_and_brackets_in_strings_are_fine(client):
    payload = b"[" * 120 + b'"[[[[{{{{\\"[[[["' + b"]" * 120
    items = b",".join(b'{"queue":"deep","payload":%s}' % payload for _ in range(3))
    r = await client.post("/api/v1/push", content=b'{"items":[' + items + b"]}")
    assert r.status_code == 201, r.text
