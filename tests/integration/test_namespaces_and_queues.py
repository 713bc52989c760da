"""Namespace/task pops, autopilot, queue delete."""

from __future__ import annotations

from tests.support.consuming import data, pop, push
from tests.support.db import db_fetchval


async def test_namespace_pop_spans_queues_higher_priority_first(client):
    await push(client, "shop.orders", "order")
    await push(client, "shop.refunds", "refund")
    await push(client, "other.orders", "elsewhere")
    r = await client.post("/api/v1/configure", json={"queue": "shop.refunds",
                                                     "options": {"priority": 5}})
    assert r.status_code == 200
    r = await client.get("/api/v1/pop", params={"namespace": "shop", "batch": "10"})
    assert r.status_code == 200
    reply = r.json()
    assert [m["data"] for m in reply["messages"]] == ["refund", "order"]
    assert [m["queue"] for m in reply["messages"]] == ["shop.refunds", "shop.orders"]
    assert reply["queue"] == "shop.refunds"
    assert len({m["leaseId"] for m in reply["messages"]}) == 1
    r = await client.get("/api/v1/pop", params={"task": "orders", "batch": "10",
                                                "consumerGroup": "g"})
    assert sorted(m["data"] for m in r.json()["messages"]) == ["elsewhere", "order"]


async def test_autopilot_sizes_the_omitted_knobs(client):
    for p in range(3):
        await push(client, "auto", *range(5), partition=f"p{p}")
    reply = await pop(client, "auto", autopilot=True)
    assert len(reply["messages"]) == 15
    assert reply["autopilot"] == {"partitions": 10, "batch": 100, "waitMs": 0}
    assert reply["partitionsClaimed"] == 3


async def test_delete_queue_removes_everything(client, broker):
    await push(client, "gone", 1, 2, partition="a")
    reply = await pop(client, "gone", consumerGroup="g")
    r = await client.delete("/api/v1/resources/queues/gone")
    assert r.status_code == 200
    assert r.json() == {"deleted": True, "queue": "gone", "existed": True}
    for table in ("queues", "partitions", "segments", "transaction_index", "consumer_state",
                  "subscriptions"):
        assert await db_fetchval(broker.db, f"SELECT count(*) FROM queen.{table}") == 0, table
    r = await client.delete("/api/v1/resources/queues/gone")
    assert r.json()["existed"] is False
    # An old lease's ack now fails cleanly.
    m = reply["messages"][0]
    r = await client.post("/api/v1/ack", json={"transactionId": m["transactionId"],
                                               "partitionId": m["partitionId"],
                                               "leaseId": m["leaseId"], "consumerGroup": "g"})
    assert r.status_code == 200 and r.json()[0]["success"] is False
    # Pushing again starts from scratch (the same transaction ids are new again).
    await push(client, "gone", 1, partition="a")
    assert data(await pop(client, "gone", partition="a")) == [1]
