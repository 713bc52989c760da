"""GET /api/v1/resources/*: figures from offsets and cursors, true right after the writes."""

from __future__ import annotations

import datetime as dt

from queen_trio.ops.maintenance import retention_pass
from tests.support.consuming import configure, push
from tests.support.scenarios import known_state

COUNTERS = ("total", "pending", "processing", "completed", "failed", "deadLetter")


def counts(**values):
    return {k: values.get(k, 0) for k in COUNTERS}


async def get(client, path, status=200):
    r = await client.get(path)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    return r.json()


async def test_overview_counts_every_message_by_state(client):
    await known_state(client)
    body = await get(client, "/api/v1/resources/overview")
    assert body["queues"] == 2 and body["partitions"] == 4
    assert body["namespaces"] == 2 and body["tasks"] == 1  # "shop", "plain"; "orders"
    assert body["messages"] == counts(total=12, pending=8, processing=1, completed=2, failed=1,
                                      deadLetter=1)
    # Lag over (partition, group) state rows: g1 on a (3 left), b (2) and c (2).
    assert body["lag"]["offset"] == {"avg": 2.333, "median": 2.0, "min": 2.0, "max": 3.0}
    assert set(body["lag"]["time"]) == {"avg", "median", "min", "max"}
    assert isinstance(body["statsAge"], int) and body["timestamp"].endswith("Z")


async def test_overview_throughput_is_exact_after_a_stats_refresh(client):
    await known_state(client)
    r = await client.post("/api/v1/stats/refresh")
    assert r.status_code == 200 and r.json()["success"] is True
    body = await get(client, "/api/v1/resources/overview")
    # 12 stored; 2 completed and 1 dead-lettered settled (the nacks did not), over 5 minutes.
    assert body["throughput"] == {"ingestedPerSecond": 0.04, "processedPerSecond": 0.01}
    assert body["statsAge"] == 0


async def test_queue_list_newest_first_with_counters(client):
    await known_state(client)
    body = await get(client, "/api/v1/resources/queues")
    assert [q["name"] for q in body["queues"]] == ["plain", "shop.orders"]
    plain, shop = body["queues"]
    assert plain["messages"] == counts(total=2, pending=2)
    assert plain["partitions"] == 1 and plain["task"] is None
    assert shop["messages"] == counts(total=10, pending=6, processing=1, completed=2, failed=1,
                                      deadLetter=1)
    assert (shop["namespace"], shop["task"], shop["partitions"]) == ("shop", "orders", 3)
    assert set(shop) >= {"id", "createdAt", "priority", "lastActivity"}
    assert body["pagination"] == {"limit": 1000, "offset": 0}
    page = await get(client, "/api/v1/resources/queues?limit=1&offset=1")
    assert [q["name"] for q in page["queues"]] == ["shop.orders"]
    only = await get(client, "/api/v1/resources/queues?namespace=shop")
    assert [q["name"] for q in only["queues"]] == ["shop.orders"]


async def test_queue_detail_has_every_partition(client):
    await known_state(client)
    body = await get(client, "/api/v1/resources/queues/shop.orders")
    assert body["name"] == "shop.orders"
    by_name = {p["name"]: p for p in body["partitions"]}
    assert list(by_name) == ["a", "b", "c"]
    assert by_name["a"]["stats"] == counts(total=5, pending=2, processing=1, completed=2)
    assert by_name["b"]["stats"] == counts(total=3, pending=2, deadLetter=1)
    assert by_name["c"]["stats"] == counts(total=2, pending=2, failed=1)
    assert by_name["a"]["oldestMessage"] and by_name["a"]["newestMessage"]
    assert body["totals"] == counts(total=10, pending=6, processing=1, completed=2, failed=1,
                                    deadLetter=1)


async def test_depth_per_partition_for_the_slowest_group_or_a_named_one(client):
    await known_state(client)
    body = await get(client, "/api/v1/resources/queues/shop.orders/depth")
    assert body == {"queue": "shop.orders", "group": None, "pending": 7, "partitionsPending": 3,
                    "conflation": False, "effectivePending": 7,
                    "partitions": [{"partition": "a", "pending": 3},
                                   {"partition": "b", "pending": 2},
                                   {"partition": "c", "pending": 2}]}
    assert (await get(client, "/api/v1/resources/queues/shop.orders/depth?group=g1"))[
        "pending"] == 7
    nobody = await get(client, "/api/v1/resources/queues/shop.orders/depth?group=nobody")
    assert (nobody["pending"], nobody["partitions"]) == (0, [])
    plain = await get(client, "/api/v1/resources/queues/plain/depth")
    assert plain["partitions"] == [{"partition": "Default", "pending": 2}]


async def test_partitions_list_with_pagination(client):
    await known_state(client)
    body = await get(client, "/api/v1/resources/partitions?queue=shop.orders")
    assert [(p["name"], p["total"], p["pending"]) for p in body["partitions"]] == [
        ("a", 5, 3), ("b", 3, 2), ("c", 2, 2)]
    assert all(p["queue"] == "shop.orders" and p["lastActivity"] for p in body["partitions"])
    everything = await get(client, "/api/v1/resources/partitions?limit=2&offset=2")
    assert [p["queue"] for p in everything["partitions"]] == ["shop.orders", "shop.orders"]
    assert everything["pagination"] == {"limit": 2, "offset": 2}


async def test_namespaces_and_tasks(client):
    await known_state(client)
    namespaces = await get(client, "/api/v1/resources/namespaces")
    assert namespaces["namespaces"] == [
        {"namespace": "plain", "queues": 1, "partitions": 1,
         "messages": {"total": 2, "pending": 2}},
        {"namespace": "shop", "queues": 1, "partitions": 3,
         "messages": {"total": 10, "pending": 6}}]
    tasks = await get(client, "/api/v1/resources/tasks")
    assert tasks["tasks"] == [{"task": "orders", "queues": 1, "partitions": 3,
                               "messages": {"total": 10, "pending": 6}}]


async def test_counts_follow_retention(client, broker):
    await configure(client, "short", retentionSeconds=60)
    await push(client, "short", 1, 2, 3)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=61)
    assert (await retention_pass(broker.db, wait=True, now=later))["expired"] == 1
    await push(client, "short", 4)
    detail = await get(client, "/api/v1/resources/queues/short")
    assert detail["totals"]["total"] == 1 and detail["totals"]["pending"] == 1


async def test_unknown_queue_is_404_and_bad_paging_is_400(client):
    for path in ("/api/v1/resources/queues/nope", "/api/v1/resources/queues/nope/depth",
                 "/api/v1/resources/partitions?queue=nope"):
        assert (await get(client, path, 404)) == {"error": "Queue not found"}
    for query in ("limit=0", "limit=1001", "limit=ten", "offset=-1"):
        body = await get(client, f"/api/v1/resources/queues?{query}", 400)
        assert "error" in body
        await get(client, f"/api/v1/resources/partitions?{query}", 400)
