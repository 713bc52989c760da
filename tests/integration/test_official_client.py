"""The official Python client (queen-mq 2.6.0), unchanged, against a broker on a real port."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from tests.support.db import db_fetchval
from tests.support.storage import stored_messages

CLIENTS = Path(__file__).parent.parent / "support" / "clients"


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
    assert await db_fetchval(broker.db,
        "SELECT count(*) FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id "
        "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'client.buffered'") == 1


async def test_official_client_consumes_acks_renews_and_reads_the_dlq(http_url):
    r = await run_client("consume_flow.py", http_url)
    assert r["pop_one"] == [{"n": 0}]
    assert r["ack_true"]["success"] is True
    assert r["nack"]["success"] is True
    assert r["after_nack"] == [{"n": 1}, {"n": 2}], "a nack redelivers the message"
    assert r["renew"]["success"] is True and r["renew"]["newExpiresAt"]
    assert r["ack_list"]["success"] is True
    assert r["consume_single"] == [0, 1, 2, 3]
    assert [n for batch in r["consume_batches"] for n in batch] == list(range(25))
    assert max(len(b) for b in r["consume_batches"]) == 10
    assert r["group_g1"] == [0, 1, 2] and r["group_g2"] == [0, 1, 2]
    assert r["late_before"] == [] and r["late_after"] == ["fresh"]
    assert r["dlq"]["total"] == 1 and r["dlq"]["data"] == ["bad"]
    assert r["dlq"]["errors"] == ["cannot handle"]
    assert r["partition_pop"] == [["p1", "one"]]
    assert r["deleted"]["deleted"] is True


async def test_official_client_transaction_acks_and_pushes_together(http_url):
    r = await run_client("transaction_flow.py", http_url)
    assert r["commit"]["success"] is True
    assert [x["type"] for x in r["commit"]["results"]] == ["ack", "push"]
    assert r["input_left"] == []
    assert r["output"] == [{"done": 1}]
    assert r["trace_results"][0]["success"] is True


async def test_official_client_trace_is_readable_by_name(http_url, client):
    await run_client("transaction_flow.py", http_url)
    body = (await client.get("/api/v1/traces/by-name/client-flow")).json()
    assert body["total"] == 1
    assert body["traces"][0]["data"] == {"seen": 1}
    assert body["traces"][0]["event_type"] == "step"
    assert body["traces"][0]["queue_name"] == "tx.traced"


async def test_official_client_admin_and_consumer_group_calls(http_url):
    r = await run_client("admin_flow.py", http_url)
    assert r["overview"]["queues"] == 1 and r["overview"]["messages"]["total"] == 5
    assert r["overview"]["messages"]["deadLetter"] == 1
    assert [n["namespace"] for n in r["namespaces"]["namespaces"]] == ["adm"]
    assert [t["task"] for t in r["tasks"]["tasks"]] == ["jobs"]
    assert [x["name"] for x in r["queues"]["queues"]] == ["adm.jobs"]
    # create() made the Default partition.
    assert [p["name"] for p in r["queue"]["partitions"]] == ["Default", "p1", "p2"]
    assert r["depth"]["pending"] == 3 and r["depth"]["partitionsPending"] == 2
    assert r["depth_group"]["group"] == "workers" and r["depth_group"]["pending"] == 3
    assert [p["name"] for p in r["partitions"]["partitions"]] == ["Default", "p1", "p2"]
    assert len(r["messages"]["messages"]) == 5
    assert r["message"]["payload"] == {"n": 0} and r["message"]["status"] == "completed"
    assert r["retry"]["success"] is True and r["retry"]["consumerGroups"] == ["workers"]
    assert [data for _, data in r["retried_copy"]] == [{"n": 1}]
    assert r["dlq_after_retry"] == 0
    assert r["deleted"]["success"] is True and r["messages_after_delete"] == 5
    assert r["status"]["messages"]["total"] == 5
    assert r["queue_stats"]["queues"][0]["name"] == "adm.jobs"
    assert r["queue_detail"]["queue"]["config"]["retryLimit"] == 0
    assert r["analytics"]["interval"] == "hour"
    assert r["refresh"]["success"] is True
    (group,) = r["groups"]
    assert (group["name"], group["queueName"], group["deadLetters"]) == ("workers", "adm.jobs", 0)
    assert set(r["group"]) == {"adm.jobs"}
    assert {x["partition_name"] for x in r["lagging"]} == {"p1", "p2"}
    # The group joined Default, p1 and p2 but touched p1 only (its pops name p1): the reference
    # counts the touched ones (issue 25, point 14; docs/decisions.md#seek).
    assert r["seek"]["partitionsUpdated"] == 1 and r["seek"]["seekToEnd"] is True
    assert r["health"]["status"] == "healthy"
    assert r["metrics"]["workerId"] and r["system"]["workers"] and r["worker"]["workers"]
    assert r["timestamp"]["success"] is True and r["timestamp"]["rowsUpdated"] == 1
    assert r["delete_for_queue"] == {"success": True, "consumerGroup": "workers",
                                     "queueName": "adm.jobs", "deletedPartitions": 1,
                                     "metadataDeleted": False}
    assert r["delete"]["success"] is True
    assert r["delete_unknown"] == {"success": True, "consumerGroup": "never-existed",
                                   "deletedPartitions": 0, "metadataDeleted": False}
    assert r["groups_after"] == []
