"""GET /api/v1/messages (every filter, newest first, pagination), one message, and a queue's
messages (docs/api.md: Messages)."""

from __future__ import annotations

import httpx

from queen_trio.broker import open_broker
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.consuming import configure, pop, push
from tests.support.db import db_execute, db_fetchval
from tests.support.scenarios import GROUP, known_state

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


async def listed(client, query="", status=200):
    r = await client.get(f"/api/v1/messages{query}")
    assert r.status_code == status, r.text
    return r.json()


def keyed(body):
    return {(m["partition"], m["transactionId"]): m for m in body["messages"]}


async def test_list_statuses_after_known_consumption(client):
    state = await known_state(client)
    body = await listed(client)
    assert len(body["messages"]) == 12 and body["pagination"] == {"limit": 200, "offset": 0}
    stamps = [m["createdAt"] for m in body["messages"]]
    assert stamps == sorted(stamps, reverse=True)
    a = [m["transactionId"] for m in state["a"]["messages"]]
    by = keyed(body)
    assert [by[("a", t)]["status"] for t in a] == ["completed", "completed", "processing"]
    assert by[("a", a[2])]["leaseExpiresAt"] is not None
    assert by[("b", state["b"]["messages"][0]["transactionId"])]["status"] == "dead_letter"
    assert {m["status"] for m in body["messages"] if m["queue"] == "plain"} == {"pending"}
    assert [m["status"] for m in body["messages"] if m["partition"] == "c"] == ["pending"] * 2
    sample = by[("a", a[0])]
    assert sample["queuePath"] == "shop.orders/a" and sample["namespace"] == "shop"
    assert sample["task"] == "orders" and sample["queueStatus"] is None
    assert sample["busStatus"] == {"consumedBy": 1, "totalGroups": 1}
    assert "data" not in sample and "payload" not in sample
    assert body["mode"] == {"hasQueueMode": False, "busGroupsCount": 1, "type": "bus"}


async def test_list_filters(client):
    await known_state(client)
    for query, expected in [("?status=completed", 2), ("?status=processing", 1),
                            ("?status=dead_letter", 1), ("?status=pending", 8),
                            ("?queue=plain", 2), ("?queue=shop.orders&partition=a", 5),
                            ("?partition=b", 3), ("?ns=shop", 10), ("?namespace=plain", 2),
                            ("?task=orders", 10), ("?queue=shop.orders&status=pending", 6),
                            ("?queue=nope", 0), ("?partition=a&status=completed", 2)]:
        body = await listed(client, query)
        assert len(body["messages"]) == expected, query
    plain = await listed(client, "?queue=plain")
    assert plain["mode"] == {"hasQueueMode": False, "busGroupsCount": 0, "type": "none"}


async def test_queue_mode_status(client):
    await push(client, "qm", 1, 2, 3)
    reply = await pop(client, "qm", batch=1)
    body = await listed(client, "?queue=qm")
    assert body["mode"]["type"] == "queue"
    assert [m["queueStatus"] for m in body["messages"]] == ["pending", "pending", "processing"]
    assert [m["transactionId"] for m in body["messages"]][-1] == reply["messages"][0][
        "transactionId"]


async def test_pages_across_and_within_segments(client):
    for n in range(30):
        await push(client, "many", n)  # one segment each
    await push(client, "many", *range(100, 120))  # one segment of 20
    full = [m["transactionId"] for m in (await listed(client, "?queue=many&limit=1000"))[
        "messages"]]
    assert len(full) == 50
    for limit, offset in [(7, 0), (7, 3), (5, 18), (9, 25), (10, 45), (10, 50)]:
        page = await listed(client, f"?queue=many&limit={limit}&offset={offset}")
        assert [m["transactionId"] for m in page["messages"]] == full[offset:offset + limit]
    everywhere = [m["transactionId"] for m in (await listed(client, "?limit=1000"))["messages"]]
    assert everywhere == full
    single = await listed(client, "?queue=many&partition=Default&limit=4&offset=19")
    assert [m["transactionId"] for m in single["messages"]] == full[19:23]


async def test_time_window(client, broker):
    await push(client, "old", "then")
    await push(client, "new", "now")
    await db_execute(broker.db,
        "UPDATE queen.segments s SET created_at = s.created_at - interval '3 hours' "
        "FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id "
        "WHERE p.id = s.partition_id AND q.name = 'old'")
    assert [m["queue"] for m in (await listed(client))["messages"]] == ["new"]
    wide = await listed(client, "?from=2000-01-01T00:00:00Z")
    assert [m["queue"] for m in wide["messages"]] == ["new", "old"]
    assert (await listed(client, "?from=2999-01-01T00:00:00Z&to=2999-01-02T00:00:00Z"))[
        "messages"] == []


async def test_list_rejects_bad_parameters(client):
    for query in ("?status=done", "?limit=0", "?limit=1001", "?offset=x", "?from=noon",
                  "?from=2030-01-01T00:00:00Z&to=2020-01-01T00:00:00Z"):
        assert "error" in await listed(client, query, status=400)


async def test_one_message_with_every_group(client):
    state = await known_state(client)
    first = state["a"]["messages"][0]
    r = await client.get(f"/api/v1/messages/{first['partitionId']}/{first['transactionId']}")
    assert r.status_code == 200
    body = r.json()
    assert (body["id"], body["payload"], body["status"]) == (first["id"], 0, "completed")
    assert body["queue"] == "shop.orders" and body["partition"] == "a"
    assert body["consumerGroups"] == [{"name": GROUP, "status": "completed", "consumed": True,
                                       "leaseExpiresAt": None}]
    assert body["queueConfig"] == {"leaseTime": 60, "retryLimit": 3, "retryDelay": 0,
                                   "ttl": 3600, "priority": 0}
    assert body["mode"] == {"hasQueueMode": False, "busGroupsCount": 1, "consumedByGroups": 1,
                            "type": "bus"}
    assert body["isEncrypted"] is False and body["errorMessage"] is None
    dead = state["b"]["messages"][0]
    body = (await client.get(f"/api/v1/messages/{dead['partitionId']}/"
                             f"{dead['transactionId']}")).json()
    assert (body["status"], body["errorMessage"], body["retryCount"]) == ("dead_letter", "bad", 0)
    assert body["deadLetters"][0]["consumerGroup"] == GROUP
    leased = state["a"]["messages"][2]
    body = (await client.get(f"/api/v1/messages/{leased['partitionId']}/"
                             f"{leased['transactionId']}")).json()
    assert body["status"] == "processing" and body["leaseExpiresAt"]
    assert body["consumerGroups"][0]["leaseExpiresAt"] == body["leaseExpiresAt"]


async def test_one_message_errors(client):
    await push(client, "solo", 1)
    pid = (await pop(client, "solo"))["partitionId"]
    r = await client.get(f"/api/v1/messages/{pid}/no-such-tx")
    assert r.status_code == 404 and r.json() == {"error": "Message not found"}
    r = await client.get("/api/v1/messages/00000000-0000-0000-0000-000000000001/tx")
    assert r.status_code == 404
    r = await client.get("/api/v1/messages/not-a-uuid/tx")
    assert r.status_code == 400 and "partitionId" in r.json()["error"]


async def test_one_message_is_decrypted(database_url):
    settings = make_settings(database_url, encryption_key=KEY)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            await configure(client, "vault", encryptionEnabled=True)
            (pushed,) = await push(client, "vault", {"card": "4111"})
            reply = await pop(client, "vault")
            pid = reply["partitionId"]
            body = (await client.get(f"/api/v1/messages/{pid}/{pushed['transaction_id']}")).json()
            assert body["payload"] == {"card": "4111"} and body["isEncrypted"] is True


async def test_a_message_whose_frame_does_not_parse_is_shown_without_its_payload(client,
                                                                                 broker):
    await push(client, "frames", {"n": 0}, {"n": 1}, txids=["a", "b"])
    # Corrupt the second frame's payload length (the 4 bytes at 21..24 of its header).
    await db_execute(broker.db, """
        UPDATE queen.segments
           SET frames = overlay(frames PLACING '\\xffffffff'::bytea FROM frame_ends[1] + 22)""")
    (b, a) = (await listed(client, "?queue=frames"))["messages"]
    r = await client.get(f"/api/v1/messages/{b['partitionId']}/b")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["id"], body["transactionId"], body["payload"], body["isEncrypted"]) == (
        b["id"], "b", None, None)
    assert body["payloadError"].startswith("undecodable frame")
    good = (await client.get(f"/api/v1/messages/{a['partitionId']}/a")).json()
    assert (good["payload"], good["payloadError"]) == ({"n": 0}, None)


async def test_dead_letters_of_a_deleted_partition_are_left_out(client, broker):
    """Dead letters have no foreign key to their partition: the reclaimer's delete leaves
    them behind."""
    state = await known_state(client)
    dead = state["b"]["messages"][0]
    await db_execute(broker.db, "DELETE FROM queen.partitions WHERE id = $1::uuid",
                     dead["partitionId"])
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.dead_letters") == 1
    body = await listed(client, "?status=dead_letter")
    assert body["messages"] == []
    assert len((await listed(client))["messages"]) == 9  # a's 5, c's 2, plain's 2


async def test_queue_messages_for_the_status_page(client):
    await known_state(client)
    r = await client.get("/api/v1/status/queues/shop.orders/messages")
    assert r.status_code == 200
    rows = r.json()
    assert len(rows) == 10 and set(rows[0]) == {"id", "transactionId", "partitionId",
                                                "queuePath", "queue", "partition", "status",
                                                "createdAt"}
    assert len((await client.get("/api/v1/status/queues/shop.orders/messages?limit=3")).json()) == 3
    r = await client.get("/api/v1/status/queues/nope/messages")
    assert r.status_code == 404
