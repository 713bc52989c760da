"""/api/v1/consumer-groups: listings, lag, seek, subscription start, delete
(docs/decisions.md#seek: the one operator rewind)."""

from __future__ import annotations

from tests.support.consuming import ack, ack_batch, configure, data, pop, push
from tests.support.db import db_execute, db_fetchval
from tests.support.scenarios import GROUP, known_state


async def groups(client):
    r = await client.get("/api/v1/consumer-groups")
    assert r.status_code == 200, r.text
    return {(g["name"], g["queueName"]): g for g in r.json()}


async def seek(client, group, queue, body=None, partition=None, status=200):
    path = f"/api/v1/consumer-groups/{group}/queues/{queue}"
    if partition is not None:
        path += f"/partitions/{partition}"
    r = await client.post(path + "/seek", json=body) if body is not None else await client.post(
        path + "/seek")
    assert r.status_code == status, r.text
    return r.json()


async def test_group_list_per_group_and_queue(client):
    await known_state(client)
    assert await pop(client, "shop.orders", consumerGroup="fresh", subscriptionMode="new") is None
    await pop(client, "plain", consumerGroup="sleepy")  # holds "x", never acks
    listed = await groups(client)
    g1 = listed[(GROUP, "shop.orders")]
    assert {k: g1[k] for k in ("members", "partitionsWithLag", "totalLag", "processing",
                               "deadLetters", "totalConsumed", "state", "subscriptionMode",
                               "subscriptionTimestamp", "topics")} == {
        "members": 3, "partitionsWithLag": 3, "totalLag": 7, "processing": 1, "deadLetters": 1,
        "totalConsumed": 3, "state": "Stable", "subscriptionMode": "all",
        "subscriptionTimestamp": None, "topics": ["shop.orders"]}
    assert g1["lastConsumedAt"] and g1["subscriptionCreatedAt"] and g1["maxTimeLag"] == 0
    fresh = listed[("fresh", "shop.orders")]
    assert (fresh["subscriptionMode"], fresh["totalLag"], fresh["state"]) == ("new", 0, "Stable")
    assert fresh["subscriptionTimestamp"] is not None
    sleepy = listed[("sleepy", "plain")]
    assert (sleepy["state"], sleepy["totalLag"], sleepy["processing"]) == ("Dead", 2, 1)


async def test_lagging_groups_and_their_state(client, broker):
    await known_state(client)
    await db_execute(broker.db,
        "UPDATE queen.consumer_state cs SET head_at = now() - interval '2 hours' "
        "FROM queen.partitions p WHERE p.id = cs.partition_id AND p.name = 'b'")
    r = await client.get("/api/v1/consumer-groups/lagging?minLagSeconds=3600")
    assert r.status_code == 200
    (row,) = r.json()
    assert (row["consumer_group"], row["queue_name"], row["partition_name"]) == (
        GROUP, "shop.orders", "b")
    assert row["offset_lag"] == 2 and row["time_lag_seconds"] >= 7200
    assert row["lag_hours"] >= 2 and row["oldest_unconsumed_at"] and row["worker_id"] is None
    assert set(row) == {"consumer_group", "queue_name", "partition_name", "partition_id",
                        "worker_id", "offset_lag", "time_lag_seconds", "lag_hours",
                        "oldest_unconsumed_at", "last_consumed_at"}
    everyone = (await client.get("/api/v1/consumer-groups/lagging?minLagSeconds=0")).json()
    assert [r["partition_name"] for r in everyone][0] == "b" and len(everyone) == 3
    listed = await groups(client)
    assert listed[(GROUP, "shop.orders")]["state"] == "Lagging"
    assert listed[(GROUP, "shop.orders")]["maxTimeLag"] >= 7200
    for bad in ("abc", "-1", "1.5"):
        r = await client.get(f"/api/v1/consumer-groups/lagging?minLagSeconds={bad}")
        assert r.status_code == 400 and "minLagSeconds" in r.json()["error"]
    assert (await client.get("/api/v1/consumer-groups/lagging?limit=0")).status_code == 400


async def test_group_detail_by_queue_and_partition(client):
    state = await known_state(client)
    r = await client.get(f"/api/v1/consumer-groups/{GROUP}")
    assert r.status_code == 200
    (queue,) = r.json()
    parts = {p["partition"]: p for p in r.json()[queue]["partitions"]}
    assert queue == "shop.orders" and list(parts) == ["a", "b", "c"]
    assert parts["a"]["leaseActive"] is True
    assert parts["a"]["workerId"] == state["a"]["leaseId"]
    assert (parts["a"]["offsetLag"], parts["a"]["totalConsumed"]) == (3, 2)
    assert (parts["b"]["deadLetters"], parts["b"]["leaseActive"]) == (1, False)
    assert parts["c"]["retryCount"] == 1 and parts["c"]["lastConsumedAt"] is None
    assert (await client.get("/api/v1/consumer-groups/nobody")).json() == {}


async def test_seek_to_end_releases_leases_and_resets_retries(client):
    state = await known_state(client)
    body = await seek(client, GROUP, "shop.orders", {"toEnd": True})
    assert body == {"success": True, "consumerGroup": GROUP, "queueName": "shop.orders",
                    "seekToEnd": True, "targetTimestamp": None, "partitionsUpdated": 3}
    # The lease a pop held is gone, and the message is behind the cursor: refused.
    late = await ack(client, state["a"]["messages"][2], group=GROUP)
    assert late["success"] is False
    detail = (await client.get(f"/api/v1/consumer-groups/{GROUP}")).json()["shop.orders"]
    assert all(p["offsetLag"] == 0 and p["retryCount"] == 0 and not p["leaseActive"]
               for p in detail["partitions"])
    depth = (await client.get("/api/v1/resources/queues/shop.orders/depth?group=g1")).json()
    assert depth["pending"] == 0
    # A seek is not consumption.
    assert (await groups(client))[(GROUP, "shop.orders")]["totalConsumed"] == 3
    await push(client, "shop.orders", "fresh", partition="c")
    assert data(await pop(client, "shop.orders", "c", batch=10, consumerGroup=GROUP)) == [
        "fresh"]


async def test_seek_to_a_timestamp_replays_what_came_after_it(client):
    await push(client, "replay", "m1")
    await push(client, "replay", "m2")
    await push(client, "replay", "m3")
    first = await pop(client, "replay", batch=10, consumerGroup="r")
    assert data(first) == ["m1", "m2", "m3"]
    await ack_batch(client, first["messages"], group="r")
    assert await pop(client, "replay", consumerGroup="r") is None
    # A message stamped exactly at the target is not replayed (the next pop starts after it).
    at = first["messages"][0]["createdAt"]
    body = await seek(client, "r", "replay", {"timestamp": at})
    assert body["partitionsUpdated"] == 1 and body["seekToEnd"] is False
    assert body["targetTimestamp"] == at[:23] + "Z"
    leased = await pop(client, "replay", batch=10, consumerGroup="r")
    assert data(leased) == ["m2", "m3"]
    await seek(client, "r", "replay", {"timestamp": "2000-01-01T00:00:00Z"})
    # The seek released that lease: an ack under it is fenced off.
    fenced = await ack(client, leased["messages"][0], group="r")
    assert fenced["success"] is False and fenced["error"] == "Invalid or expired lease"
    assert data(await pop(client, "replay", batch=10, consumerGroup="r")) == ["m1", "m2", "m3"]
    # toEnd wins when both are given.
    assert (await seek(client, "r", "replay", {"toEnd": True, "timestamp": at}))["seekToEnd"]


async def test_seek_touches_only_partitions_where_the_group_has_state(client, broker):
    await known_state(client)
    body = await seek(client, "stranger", "shop.orders", {"toEnd": True})
    assert body["partitionsUpdated"] == 0
    assert ("stranger", "shop.orders") not in await groups(client)
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.consumer_state "
                             "WHERE consumer_group = 'stranger'") == 0


async def test_seek_one_partition(client, broker):
    state = await known_state(client)
    body = await seek(client, GROUP, "shop.orders", {"toEnd": True}, partition="a")
    assert body["updated"] is True and body["partitionName"] == "a"
    assert body["cursorMovedTo"] == state["a"]["messages"][0]["createdAt"][:23] + "Z"
    detail = (await client.get(f"/api/v1/consumer-groups/{GROUP}")).json()["shop.orders"]
    lags = {p["partition"]: p["offsetLag"] for p in detail["partitions"]}
    assert lags == {"a": 0, "b": 2, "c": 2}
    assert (await seek(client, GROUP, "shop.orders", {"toEnd": True}, partition="zz",
                       status=404)) == {"error": "Partition not found"}
    assert (await seek(client, GROUP, "nope", {"toEnd": True}, status=404)) == {
        "error": "Queue not found"}


async def test_seek_needs_to_end_or_a_timestamp(client):
    await push(client, "sk", 1)
    for body in (None, {}, {"toEnd": False}):
        error = await seek(client, "g", "sk", body, status=400)
        assert error == {"error": "Must specify either 'toEnd': true or 'timestamp'"}
    assert "timestamp" in (await seek(client, "g", "sk", {"timestamp": "noon"}, status=400))[
        "error"]
    assert (await seek(client, "g", "sk", {"toEnd": "yes"}, status=400))["error"]
    assert (await seek(client, "g", "sk", {"timestamp": 5}, status=400))["error"]
    r = await client.post("/api/v1/consumer-groups/g/queues/sk/seek", content=b"{bad")
    assert r.status_code == 400


async def test_deleting_a_group_frees_a_max_size_queue(client):
    await configure(client, "bounded", maxSize=3)
    await push(client, "bounded", 1, 2, 3)
    done = await pop(client, "bounded", batch=3, consumerGroup="fast")
    await ack_batch(client, done["messages"], group="fast")
    held = await pop(client, "bounded", consumerGroup="slow")
    r = await client.post("/api/v1/push", json={"items": [{"queue": "bounded", "payload": 4}]})
    assert r.status_code == 429
    r = await client.delete("/api/v1/consumer-groups/slow?deleteMetadata=true")
    assert r.status_code == 200
    assert r.json() == {"success": True, "consumerGroup": "slow", "deletedPartitions": 1,
                        "metadataDeleted": True}
    r = await client.post("/api/v1/push", json={"items": [{"queue": "bounded", "payload": 4}]})
    assert r.status_code == 201
    # Its lease went with it.
    late = await ack(client, held["messages"][0], group="slow")
    assert late["success"] is False
    assert set(await groups(client)) == {("fast", "bounded")}


async def test_deleting_an_unknown_group_is_a_success_with_nothing_deleted(client):
    r = await client.delete("/api/v1/consumer-groups/never-was")
    assert r.status_code == 200
    assert r.json() == {"success": True, "consumerGroup": "never-was", "deletedPartitions": 0,
                        "metadataDeleted": False}
    await push(client, "q", 1)
    r = await client.delete("/api/v1/consumer-groups/never-was/queues/q?deleteMetadata=false")
    assert r.json() == {"success": True, "consumerGroup": "never-was", "queueName": "q",
                        "deletedPartitions": 0, "metadataDeleted": False}
    r = await client.delete("/api/v1/consumer-groups/g/queues/nope")
    assert r.status_code == 404 and r.json() == {"error": "Queue not found"}
    r = await client.delete("/api/v1/consumer-groups/g?deleteMetadata=maybe")
    assert r.status_code == 400


async def test_delete_for_one_queue_keeps_the_others(client):
    await push(client, "one", 1)
    await push(client, "two", 1)
    for queue in ("one", "two"):
        await pop(client, queue, consumerGroup="both")
    r = await client.delete("/api/v1/consumer-groups/both/queues/one")
    assert r.json()["deletedPartitions"] == 1 and r.json()["metadataDeleted"] is True
    assert set(await groups(client)) == {("both", "two")}


async def test_delete_without_metadata_rejoins_at_the_old_start(client):
    await push(client, "keep", "before")
    assert await pop(client, "keep", consumerGroup="late", subscriptionMode="new") is None
    await push(client, "keep", "after-1")
    got = await pop(client, "keep", consumerGroup="late", subscriptionMode="new")
    await ack_batch(client, got["messages"], group="late")
    await push(client, "keep", "after-2")
    r = await client.delete("/api/v1/consumer-groups/late?deleteMetadata=false")
    assert r.json()["deletedPartitions"] == 1 and r.json()["metadataDeleted"] is False
    # It re-joins at its old start, whatever this pop asks for.
    reply = await pop(client, "keep", batch=10, consumerGroup="late", subscriptionMode="all")
    assert data(reply) == ["after-1", "after-2"]
    await client.delete("/api/v1/consumer-groups/late?deleteMetadata=true")
    reply = await pop(client, "keep", batch=10, consumerGroup="late", subscriptionMode="all")
    assert data(reply) == ["before", "after-1", "after-2"]


async def test_subscription_update_restarts_groups_that_consumed_nothing(client):
    await push(client, "subq", "old")
    assert await pop(client, "subq", consumerGroup="s", subscriptionMode="new") is None
    r = await client.post("/api/v1/consumer-groups/s/subscription",
                          json={"subscriptionTimestamp": "2000-01-01T00:00:00Z"})
    assert r.status_code == 200
    assert r.json() == {"success": True, "consumerGroup": "s",
                        "newTimestamp": "2000-01-01T00:00:00.000Z", "rowsUpdated": 1,
                        "partitionsRepositioned": 1}
    assert data(await pop(client, "subq", consumerGroup="s")) == ["old"]
    r = await client.post("/api/v1/consumer-groups/s/subscription", json={})
    assert r.status_code == 400
    assert r.json() == {"error": "Missing subscriptionTimestamp in request body"}
    r = await client.post("/api/v1/consumer-groups/s/subscription",
                          json={"subscriptionTimestamp": "soon"})
    assert r.status_code == 400


async def test_seek_and_delete_count_only_the_partitions_the_group_touched(client, broker):
    """Issue 25, point 14: a configured queue has a Default partition nobody pushes to; the
    group joins it but never touches it (consumer_state.touched_at stays NULL), and neither a
    seek nor a delete counts it. A touch is a cursor that moved, or a lease held."""
    await configure(client, "touch")  # creates the Default partition
    await push(client, "touch", 1, partition="consumed")
    await push(client, "touch", 2, partition="leased")
    await push(client, "touch", 3, partition="nacked")
    first = await pop(client, "touch", "consumed", consumerGroup="t")
    await ack(client, first["messages"][0], group="t")
    await pop(client, "touch", "leased", consumerGroup="t")  # holds a lease there
    nacked = await pop(client, "touch", "nacked", consumerGroup="t")
    await ack(client, nacked["messages"][0], status="retry", group="t")  # a lease, given back
    touched = await db_fetchval(
        broker.db, "SELECT array_agg(p.name ORDER BY p.name) FROM queen.consumer_state cs "
        "JOIN queen.partitions p ON p.id = cs.partition_id "
        "WHERE cs.consumer_group = 't' AND cs.touched_at IS NOT NULL")
    assert touched == ["consumed", "leased", "nacked"]
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.consumer_state "
                             "WHERE consumer_group = 't'") == 4  # Default joined, untouched
    body = await seek(client, "t", "touch", {"toEnd": True})
    assert body["partitionsUpdated"] == 3
    r = await client.delete("/api/v1/consumer-groups/t/queues/touch")
    assert r.json()["deletedPartitions"] == 3
