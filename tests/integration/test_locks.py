"""POST /api/v1/locks over raw HTTP: acquire, renew, release, get; semaphores; resent calls;
fencing tokens; refusals (docs/kv-and-locks.md)."""

from __future__ import annotations

import pytest

from tests.support.db import db_execute


async def locks(client, *ops, status=200):
    r = await client.post("/api/v1/locks", json={"operations": list(ops)})
    assert r.status_code == status, r.text
    body = r.json()
    if status == 200:
        assert len(body["results"]) == len(ops)
    return body


def acquire(name="job", owner="me", ttl=2, **extra):
    return {"op": "acquire", "name": name, "ttlSeconds": ttl, "owner": owner, **extra}


async def expire_permits(broker, name):
    await db_execute(broker.db, "UPDATE queen.kv SET expires_at = now() - interval '1 second' "
                     "WHERE ns = 'queen-locks' AND key LIKE $1 || '#%'", name)


async def test_acquire_renew_release_and_the_guard(client):
    [a] = (await locks(client, acquire()))["results"]
    assert a["acquired"] is True and a["slot"] == 0 and a["owner"] == "me"
    assert a["guard"] == {"op": "check", "ns": "queen-locks", "key": "job#0",
                          "expect": a["token"], "required": True}
    assert (a["index"], a["op"], a["name"]) == (0, "acquire", "job")
    [other] = (await locks(client, acquire(owner="you")))["results"]
    assert other["acquired"] is False and other["reason"] == "held"
    assert other["holders"][0]["owner"] == "me"
    [r] = (await locks(client, {"op": "renew", "name": "job", "token": a["token"],
                                "ttlSeconds": 2, "slot": 0}))["results"]
    assert r["renewed"] is True and r["token"] > a["token"]
    assert r["guard"]["expect"] == r["token"]
    [stale] = (await locks(client, {"op": "release", "name": "job",
                                    "token": a["token"]}))["results"]
    assert stale["released"] is False and stale["reason"] == "lost"
    [got] = (await locks(client, {"op": "get", "name": "job"}))["results"]
    assert got["held"] is True and got["holders"][0]["token"] == r["token"]
    assert set(got["holders"][0]) == {"slot", "owner", "token", "since", "expiresAt",
                                      "renewedAt"}
    [rel] = (await locks(client, {"op": "release", "name": "job",
                                  "token": r["token"]}))["results"]
    assert rel == {"released": True, "slot": 0, "index": 0, "op": "release", "name": "job"}
    [resent] = (await locks(client, {"op": "release", "name": "job",
                                     "token": r["token"]}))["results"]
    assert resent["released"] is False and resent["reason"] == "lost"
    [none] = (await locks(client, {"op": "get", "name": "job"}))["results"]
    assert none == {"held": False, "holders": [], "index": 0, "op": "get", "name": "job"}


async def test_a_resent_acquire_answers_the_same_permit(client):
    [a] = (await locks(client, acquire(ttl=2)))["results"]
    [before] = (await locks(client, {"op": "get", "name": "job"}))["results"]
    [again] = (await locks(client, acquire(ttl=60)))["results"]
    assert again["acquired"] is True and again["already"] is True
    assert again["token"] == a["token"] and again["guard"] == a["guard"]
    [after] = (await locks(client, {"op": "get", "name": "job"}))["results"]
    # Its expiry extended to the resend's ttl (fixed-width UTC strings compare as times).
    assert after["holders"][0]["expiresAt"] > before["holders"][0]["expiresAt"]
    assert after["holders"][0]["token"] == a["token"]


async def test_a_resent_renew_with_the_owner_is_carried_through(client):
    [a] = (await locks(client, acquire()))["results"]
    [r1] = (await locks(client, {"op": "renew", "name": "job", "token": a["token"],
                                 "ttlSeconds": 2, "owner": "me"}))["results"]
    # The answer was lost; the client sends the same renew again, with the old token.
    [r2] = (await locks(client, {"op": "renew", "name": "job", "token": a["token"],
                                 "ttlSeconds": 2, "owner": "me"}))["results"]
    assert r2["renewed"] is True and r2["token"] > r1["token"]
    [lost] = (await locks(client, {"op": "renew", "name": "job", "token": a["token"],
                                   "ttlSeconds": 2, "owner": "else"}))["results"]
    assert lost["renewed"] is False and lost["reason"] == "lost"


async def test_an_expired_permit_is_lost_and_the_next_token_is_higher(client, broker):
    [a] = (await locks(client, acquire()))["results"]
    await expire_permits(broker, "job")
    [renew] = (await locks(client, {"op": "renew", "name": "job", "token": a["token"],
                                    "ttlSeconds": 2, "owner": "me"}))["results"]
    assert renew["renewed"] is False and renew["holders"] == []
    [b] = (await locks(client, acquire(owner="next")))["results"]
    assert b["acquired"] is True and b["token"] > a["token"]


async def test_a_semaphore_hands_out_its_slots_then_refuses(client):
    got = [(await locks(client, acquire("pool", f"o{n}", limit=3)))["results"][0]
           for n in range(4)]
    assert sorted(g["slot"] for g in got[:3]) == [0, 1, 2]
    assert got[3]["acquired"] is False and got[3]["reason"] == "held"
    assert len(got[3]["holders"]) == 3
    [again] = (await locks(client, acquire("pool", "o1", limit=3)))["results"]
    assert again["already"] is True and again["slot"] == got[1]["slot"]


async def test_ops_of_one_call_are_independent(client):
    body = await locks(client, acquire("a"), acquire("b"), {"op": "get", "name": "c"})
    assert [r["index"] for r in body["results"]] == [0, 1, 2]
    assert body["results"][0]["acquired"] and body["results"][1]["acquired"]


@pytest.mark.parametrize(("op", "reason"), [
    ({"op": "steal", "name": "x"}, "locks_unknown_op"),
    ({"op": "acquire", "name": "", "ttlSeconds": 1}, "locks_bad_name"),
    ({"op": "acquire", "name": "a#b", "ttlSeconds": 1}, "locks_bad_name"),
    ({"op": "acquire", "name": "a\x07", "ttlSeconds": 1}, "locks_bad_name"),
    ({"op": "acquire", "name": "n" * 257, "ttlSeconds": 1}, "locks_bad_name"),
    ({"op": "acquire", "name": "a"}, "locks_bad_ttl"),
    ({"op": "acquire", "name": "a", "ttlSeconds": 0}, "locks_bad_ttl"),
    ({"op": "acquire", "name": "a", "forever": True, "ttlSeconds": 1}, "locks_bad_ttl"),
    ({"op": "acquire", "name": "a", "ttlSeconds": 1, "limit": 1025}, "locks_bad_limit"),
    ({"op": "acquire", "name": "a", "ttlSeconds": 1, "owner": "o\n"}, "locks_bad_owner"),
    ({"op": "renew", "name": "a", "ttlSeconds": 1, "token": 0}, "locks_bad_token"),
    ({"op": "release", "name": "a", "token": 1, "slot": 1024}, "locks_bad_slot"),
])
async def test_bad_lock_ops_are_400(client, broker, op, reason):
    r = await client.post("/api/v1/locks", json={"operations": [acquire("fine"), op]})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "locks_bad_request" and r.json()["reason"] == reason
    [got] = (await locks(client, {"op": "get", "name": "fine"}))["results"]
    assert got["held"] is False  # refused as a whole, before anything ran


async def test_one_op_per_lock_per_call_and_at_most_64(client):
    r = await client.post("/api/v1/locks", json={"operations": [acquire(), acquire()]})
    assert r.status_code == 400 and r.json()["reason"] == "locks_duplicate_in_call"
    r = await client.post("/api/v1/locks", json={
        "operations": [acquire(f"n{i}") for i in range(65)]})
    assert r.status_code == 400 and r.json()["reason"] == "locks_too_many_ops"
    for raw in (b"", b"[1]", b'{"operations": 3}', b"{bad"):
        r = await client.post("/api/v1/locks", content=raw)
        assert r.status_code == 400, raw


async def test_the_locks_page_lists_every_permit(client):
    await locks(client, acquire("x#y".replace("#", "-"), "me"), acquire("s", "a", limit=2))
    listed = (await client.get("/api/v1/resources/locks")).json()["locks"]
    assert [(lock["name"], lock["owner"]) for lock in listed] == [("s", "a"), ("x-y", "me")]
    assert all(lock["token"] > 0 and lock["expiresAt"] for lock in listed)
