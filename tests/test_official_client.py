"""The official Python client (queen-mq 2.6.0), unchanged, against a broker on a real port."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from tests.storage import stored_messages

CLIENTS = Path(__file__).parent / "clients"


async def run_client(script: str, url: str) -> dict:
    done = await trio.run_process([sys.executable, str(CLIENTS / script), url],
                                  capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


async def test_official_client_configures_and_pushes(http_url, broker):
    report = await run_client("push_flow.py", http_url)
    created = report["created"]
    assert created["configured"] is True
    assert created["options"]["leaseTime"] == 120
    assert created["options"]["retryLimit"] == 2

    first = report["first"]
    assert [e["status"] for e in first] == ["queued", "queued"]
    assert first[0]["transaction_id"] == "order-1"
    again = report["again"]
    assert again[0]["status"] == "duplicate"
    assert again[0]["message_id"] == first[0]["message_id"]
    assert report["default_partition"][0]["status"] == "queued"

    stored = await stored_messages(broker.db, "client.orders", "c-1")
    assert [m.frame.payload for m in stored] == [b'{"orderId":1,"total":1.5}', b'{"orderId":2}']
    assert [m.frame.payload for m in await stored_messages(broker.db, "client.orders")] == [
        b'"just a string"']
    buffered = await stored_messages(broker.db, "client.buffered")
    assert [json.loads(m.frame.payload)["n"] for m in buffered] == list(range(25))
    # One POST carried the whole buffer: one segment.
    assert await broker.db.fetchval(
        "SELECT count(*) FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id "
        "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'client.buffered'") == 1
