"""POST /api/v1/kv over raw HTTP: every op, every verdict, every refusal (docs/kv-and-locks.md).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import trio
import trio.testing

from queen_trio.broker import open_broker
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.db import db_execute, db_fetchval
from tests.support.proxy import ReplyDroppingProxy


async def kv(client, *ops, status=200):
    r = await client.post("/api/v1/kv", json={"operations": list(ops)})
    assert r.status_code == status, r.text
    return r.json()


def put(key, value, ns="app", **extra):
    return {"op": "put", "ns": ns, "key": key, "value": value,
            **({"forever": True} if "ttlSeconds" not in extra else {}), **extra}


async def expire(broker, ns, key):
    """Make a row expired in place (not swept): the clock of the test is PostgreSQL's."""
    await db_execute(broker.db, "UPDATE queen.kv SET expires_at = now() - interval '1 second' "
                     "WHERE ns = $1 AND key = $2", ns, key)


async def test_put_get_and_the_shapes_the_client_reads(client):
    [w] = (await kv(client, put("a", {"x": 1})))["results"]
    assert w["applied"] is True and w["op"] == "put" and w["key"] == "a" and w["index"] == 0
    assert w["version"] > 0 and w["expiresAt"] is None
    [g, missing] = (await kv(client, {"op": "get", "ns": "app", "key": "a"},
                             {"op": "get", "ns": "app", "key": "nope"}))["results"]
    assert g["found"] is True and g["value"] == {"x": 1} and g["version"] == w["version"]
    assert g["updatedAt"].endswith("Z") and len(g["updatedAt"]) == 27
    assert missing == {"found": False, "key": "nope", "op": "get", "index": 1}
    # {found: true, value: null} differs from {found: false}
    await kv(client, put("null", None))
    [n] = (await kv(client, {"op": "get", "ns": "app", "key": "null"}))["results"]
    assert n["found"] is True and n["value"] is None


async def test_an_empty_batch_answers_an_empty_list(client):
    assert await kv(client) == {"results": []}


async def test_versions_rise_and_a_put_never_inherits_the_expiry(client):
    a = (await kv(client, put("k", 1, ttlSeconds=60)))["results"][0]
    assert a["expiresAt"] is not None
    b = (await kv(client, put("k", 2)))["results"][0]
    assert b["version"] > a["version"] and b["expiresAt"] is None


async def test_put_if_absent_and_expect_zero_beat_an_expired_row(client, broker):
    first = (await kv(client, {"op": "putIfAbsent", "ns": "app", "key": "once", "value": "a",
                               "ttlSeconds": 30}))["results"][0]
    assert first["applied"] is True
    lost = (await kv(client, {"op": "putIfAbsent", "ns": "app", "key": "once", "value": "b",
                              "ttlSeconds": 30}))["results"][0]
    assert lost["applied"] is False and lost["reason"] == "exists"
    assert lost["value"] == "a" and lost["version"] == first["version"]
    await expire(broker, "app", "once")
    [g] = (await kv(client, {"op": "get", "ns": "app", "key": "once"}))["results"]
    assert g["found"] is False  # expired, not swept: absent all the same
    again = (await kv(client, put("once", "c", expect=0)))["results"][0]
    assert again["applied"] is True and again["version"] > first["version"]


async def test_compare_and_set(client):
    v1 = (await kv(client, put("cas", 1)))["results"][0]["version"]
    stale = (await kv(client, put("cas", 2, expect=v1 + 1000)))["results"][0]
    assert stale == {"applied": False, "reason": "version", "value": 1, "version": v1,
                     "expiresAt": None, "op": "put", "key": "cas", "index": 0}
    ok = (await kv(client, put("cas", 2, expect=v1)))["results"][0]
    assert ok["applied"] is True and ok["version"] > v1
    absent = (await kv(client, put("never", 1, expect=5)))["results"][0]
    assert absent["applied"] is False and absent["reason"] == "absent"
    [g] = (await kv(client, {"op": "get", "ns": "app", "key": "never"}))["results"]
    assert g["found"] is False  # expect N > 0 creates nothing


async def test_delete_in_every_form(client):
    gone = (await kv(client, {"op": "delete", "ns": "app", "key": "x"}))["results"][0]
    assert gone["applied"] is False and gone["reason"] == "absent"
    v = (await kv(client, put("x", 1)))["results"][0]["version"]
    held = (await kv(client, {"op": "delete", "ns": "app", "key": "x", "expect": 0}))["results"]
    assert held[0]["reason"] == "exists" and held[0]["version"] == v
    wrong = (await kv(client, {"op": "delete", "ns": "app", "key": "x", "expect": v + 1}))
    assert wrong["results"][0]["reason"] == "version"
    right = (await kv(client, {"op": "delete", "ns": "app", "key": "x", "expect": v}))
    assert right["results"][0]["applied"] is True
    none = (await kv(client, {"op": "delete", "ns": "app", "key": "x", "expect": 0}))
    assert none["results"][0]["applied"] is True


async def test_incr_counts_admits_and_keeps_its_first_expiry(client, broker):
    op = {"op": "incr", "ns": "rate", "key": "u1", "delta": 1, "max": 2, "ttlSeconds": 60}
    one = (await kv(client, op))["results"][0]
    two = (await kv(client, {**op, "ttlSeconds": 3600}))["results"][0]
    three = (await kv(client, op))["results"][0]
    assert (one["applied"], one["value"]) == (True, 1)
    assert (two["applied"], two["value"]) == (True, 2)
    assert two["expiresAt"] == one["expiresAt"]  # the TTL applies only on create
    assert three == {"applied": False, "reason": "limit", "value": 2, "version": two["version"],
                     "op": "incr", "key": "u1", "index": 0}
    low = (await kv(client, {"op": "incr", "ns": "rate", "key": "d", "delta": -1, "min": 0,
                             "forever": True}))["results"][0]
    assert low["applied"] is False and low["reason"] == "limit"
    f = (await kv(client, {"op": "incr", "ns": "rate", "key": "f", "delta": 0.5,
                           "forever": True}))["results"][0]
    assert f["value"] == 0.5
    await kv(client, put("s", "text", ns="rate"))
    typ = (await kv(client, {"op": "incr", "ns": "rate", "key": "s", "delta": 1,
                             "forever": True}))["results"][0]
    assert typ["reason"] == "type" and typ["value"] == "text"
    await expire(broker, "rate", "u1")
    fresh = (await kv(client, op))["results"][0]
    assert fresh["applied"] is True and fresh["value"] == 1  # an expired counter starts again


async def test_check_writes_nothing(client, broker):
    v = (await kv(client, put("c", 1)))["results"][0]["version"]
    ok = (await kv(client, {"op": "check", "ns": "app", "key": "c", "expect": v}))["results"][0]
    assert ok["applied"] is True and ok["version"] == v
    bad = (await kv(client, {"op": "check", "ns": "app", "key": "c", "expect": 0}))["results"][0]
    assert bad["reason"] == "exists"
    nothing = (await kv(client, {"op": "check", "ns": "app", "key": "z", "expect": 3}))
    assert nothing["results"][0]["reason"] == "absent"
    assert await db_fetchval(broker.db, "SELECT version FROM queen.kv WHERE key = 'c'") == v


async def test_get_many_and_get_prefix_pages(client):
    await kv(client, *[put(f"p/{n:02d}", n) for n in range(5)], put("q", 0))
    [many] = (await kv(client, {"op": "getMany", "ns": "app",
                                "keys": ["p/03", "zz", "p/01"]}))["results"]
    assert [r["key"] for r in many["rows"]] == ["p/03", "p/01"]
    assert many["missing"] == ["zz"] and many["truncated"] is False
    page = (await kv(client, {"op": "getPrefix", "ns": "app", "prefix": "p/",
                              "limit": 2}))["results"][0]
    assert [r["key"] for r in page["rows"]] == ["p/00", "p/01"]
    assert page["truncated"] is True and page["nextAfter"] == "p/01"
    rest = (await kv(client, {"op": "getPrefix", "ns": "app", "prefix": "p/", "after": "p/01",
                              "limit": 10, "keysOnly": True}))["results"][0]
    assert [r["key"] for r in rest["rows"]] == ["p/02", "p/03", "p/04"]
    assert rest["truncated"] is False and "value" not in rest["rows"][0]
    # Wildcards in a prefix are characters
    literal = (await kv(client, {"op": "getPrefix", "ns": "app", "prefix": "p%"}))["results"]
    assert literal[0]["rows"] == []


async def test_a_lost_required_op_rolls_the_call_back(client):
    v = (await kv(client, put("r1", 1)))["results"][0]["version"]
    body = await kv(client, put("r2", 2), {"op": "get", "ns": "app", "key": "r1"},
                    {"op": "putIfAbsent", "ns": "app", "key": "r1", "value": 9, "forever": True,
                     "required": True})
    assert body["ok"] is False and body["success"] is False
    assert body["reason"] == "kv_precondition" and body["failedIndex"] == 2
    assert body["kvReason"] == "exists" and body["version"] == v and body["value"] == 1
    assert body["results"][0] == {"applied": False, "rolledBack": True, "op": "put",
                                  "key": "r2", "index": 0}
    assert body["results"][2]["reason"] == "exists"
    [g] = (await kv(client, {"op": "get", "ns": "app", "key": "r2"}))["results"]
    assert g["found"] is False


@pytest.mark.parametrize(("ops", "reason"), [
    ([{"op": "frob", "ns": "a", "key": "k"}], "kv_unknown_op"),
    ([{"op": "get", "ns": "App", "key": "k"}], "kv_bad_namespace"),
    ([{"op": "get", "ns": "a", "key": ""}], "kv_bad_key"),
    ([{"op": "get", "ns": "a", "key": "k" * 513}], "kv_key_too_large"),
    ([{"op": "put", "ns": "a", "key": "k", "value": 1}], "kv_expiry_not_specified"),
    ([{"op": "put", "ns": "a", "key": "k", "value": 1, "forever": True, "ttlSeconds": 3}],
     "kv_expiry_not_specified"),
    ([{"op": "put", "ns": "a", "key": "k", "value": 1, "ttlSeconds": 0}], "kv_bad_ttl"),
    ([{"op": "put", "ns": "a", "key": "k", "value": 1, "ttlSeconds": True}], "kv_bad_ttl"),
    ([{"op": "put", "ns": "a", "key": "k", "forever": True}], "kv_value_required"),
    ([{"op": "put", "ns": "a", "key": "k", "value": 1, "forever": True, "expect": -1}],
     "kv_bad_expect"),
    ([{"op": "put", "ns": "a", "key": "k", "value": 1, "forever": True, "expect": None}],
     "kv_bad_expect"),
    ([{"op": "check", "ns": "a", "key": "k"}], "kv_bad_expect"),
    ([{"op": "incr", "ns": "a", "key": "k", "delta": "1", "forever": True}], "kv_bad_delta"),
    ([{"op": "incr", "ns": "a", "key": "k", "delta": 1, "forever": True, "expect": 1}],
     "kv_bad_expect"),
    ([{"op": "getPrefix", "ns": "a", "prefix": ""}], "kv_prefix_required"),
    ([{"op": "getMany", "ns": "a", "keys": []}], "kv_bad_keys"),
    ([{"op": "get", "ns": "a", "key": "k", "tenant": "t"}], "kv_tenant_not_an_input"),
    ([{"op": "put", "ns": "a", "key": "k", "value": 1, "forever": True},
      {"op": "delete", "ns": "a", "key": "k"}], "kv_duplicate_key_in_call"),
    ([{"op": "get", "ns": "a", "key": "k"}] * 257, "kv_too_many_ops"),
    ([{"op": "get", "ns": "a", "key": "k", "required": "yes"}], "kv_bad_required"),
    ("nope", "kv_bad_request"),
])
async def test_bad_ops_are_400_with_a_reason_and_write_nothing(client, broker, ops, reason):
    good = {"op": "put", "ns": "a", "key": "written", "value": 1, "forever": True}
    r = await client.post("/api/v1/kv", json={
        "operations": ops if not isinstance(ops, list) or len(ops) > 200 else [good, *ops]})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "kv_bad_request" and r.json()["reason"] == reason
    assert isinstance(r.json()["detail"], str)
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.kv") == 0


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b'{"operations": NaN}', b"\xff\xfe",
                                 b'{"operations":[{"op":"put","ns":"a","key":"k","value":NaN,'
                                 b'"forever":true}]}', b'{}'])
async def test_bad_json_is_400(client, raw):
    r = await client.post("/api/v1/kv", content=raw)
    assert r.status_code == 400 and "error" in r.json()


async def test_a_value_over_64_kib_is_413(client, broker):
    r = await client.post("/api/v1/kv", json={"operations": [
        put("big", "x" * (64 * 1024 + 1))]})
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.kv") == 0


async def test_concurrent_put_if_absent_has_one_winner(client):
    results: list[dict] = []

    async def racer(n: int) -> None:
        body = await kv(client, {"op": "putIfAbsent", "ns": "race", "key": "k", "value": n,
                                 "forever": True})
        results.append(body["results"][0])

    async with trio.open_nursery() as nursery:
        for n in range(16):
            nursery.start_soon(racer, n)
    winners = [r for r in results if r["applied"]]
    assert len(winners) == 1
    assert all(r["value"] == winners[0]["value"] for r in results)


async def test_the_sweeper_removes_only_expired_rows(client, broker):
    from queen_trio.ops.kv_sweep import sweep_expired

    await kv(client, put("live", 1), put("dead", 1, ttlSeconds=60))
    await expire(broker, "app", "dead")
    assert await sweep_expired(broker.kv, wait=True) == 1
    assert await db_fetchval(broker.db, "SELECT array_agg(key) FROM queen.kv") == ["live"]


async def test_reads_for_people(client):
    await kv(client, put("a/1", {"v": 1}), put("b", 2, ns="other"))
    spaces = (await client.get("/api/v1/resources/kv")).json()["namespaces"]
    assert [s["namespace"] for s in spaces] == ["app", "other"] and spaces[0]["rows"] == 1
    page = (await client.get("/api/v1/resources/kv/app", params={"prefix": "a/"})).json()
    assert page["rows"][0]["key"] == "a/1" and page["rows"][0]["value"] == {"v": 1}
    assert (await client.get("/api/v1/resources/kv/Bad")).status_code == 400


async def test_a_plain_write_whose_reply_was_lost_is_500_commit_unknown(database_url, nursery):
    """A call no `required` op can roll back is one statement in its own transaction: when its
    connection dies after the commit, the broker cannot know it applied, so it must not say
    503 (which promises it did not)."""
    parts = urlsplit(database_url)
    proxy = ReplyDroppingProxy(parts.port or 5432)
    port = await nursery.start(proxy.run)
    proxied = urlunsplit(parts._replace(netloc=f"{parts.netloc.rsplit(':', 1)[0]}:{port}"))
    settings = make_settings(proxied, kv_pool_size=1)
    async with open_broker(settings, settings.database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            await kv(client, put("lost", 1))  # the KV connection is open, kv_apply prepared
            await trio.testing.wait_all_tasks_blocked(cushion=0.1)
            proxy.drop_next_reply()
            r = await client.post("/api/v1/kv", json={"operations": [put("lost", 2)]})
            assert proxy.dropped.is_set()
            assert r.status_code == 500, r.text
            assert r.json()["error"] == "kv_error" and r.json()["reason"] == "commit_unknown"
            [g] = (await kv(client, {"op": "get", "ns": "app", "key": "lost"}))["results"]
            assert g["value"] == 2  # it had committed


@pytest.mark.parametrize("lost", ["the write itself", "a read after a write"])
async def test_a_lock_call_whose_write_may_have_applied_is_500_commit_unknown(
        database_url, nursery, lost):
    """Each lock op is its own implicit transaction: once a write was sent, a lost connection
    cannot be a 503 (which promises nothing applied), whether it hit the write or a later op."""
    parts = urlsplit(database_url)
    proxy = ReplyDroppingProxy(parts.port or 5432)
    port = await nursery.start(proxy.run)
    proxied = urlunsplit(parts._replace(netloc=f"{parts.netloc.rsplit(':', 1)[0]}:{port}"))
    settings = make_settings(proxied, kv_pool_size=1)

    async def locks(client, *ops):
        return await client.post("/api/v1/locks", json={"operations": list(ops)})

    async with open_broker(settings, settings.database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            # The connection is open and both statements are prepared.
            r = await locks(client, {"op": "acquire", "name": "warm", "ttlSeconds": 60},
                            {"op": "get", "name": "cold"})
            assert r.status_code == 200, r.text
            await trio.testing.wait_all_tasks_blocked(cushion=0.1)
            acquire = {"op": "acquire", "name": "job", "ttlSeconds": 60}
            if lost == "the write itself":
                proxy.drop_next_reply()
                r = await locks(client, acquire)
            else:
                proxy.drop_next_reply(after=1)
                r = await locks(client, acquire, {"op": "get", "name": "other"})
            assert proxy.dropped.is_set()
            assert r.status_code == 500, r.text
            assert r.json()["error"] == "kv_error" and r.json()["reason"] == "commit_unknown"
            held = await locks(client, {"op": "get", "name": "job"})
            assert held.json()["results"][0]["held"] is True  # it had applied
