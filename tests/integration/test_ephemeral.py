"""Ephemeral queues (docs/ephemeral.md): the official client for every verb and option, raw
HTTP for the wire and bad input, a restart, two workers and two brokers on one database."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import httpx
import trio

from tests.support.auth import SECRET, bearer, token
from tests.support.browser import Browser, chromium
from tests.support.cli import run_cli
from tests.support.db import db_fetchval
from tests.support.processes import running_broker

CLIENTS = Path(__file__).parent.parent / "support" / "clients"
FAST = {"QUEEN_EPHEMERAL_HEARTBEAT_MS": "200"}


async def run_client(*args: str) -> dict:
    done = await trio.run_process([sys.executable, str(CLIENTS / "ephemeral_flow.py"), *args],
                                  capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


async def test_every_verb_and_option_through_the_official_client(http_url, broker):
    r = await run_client(http_url)
    assert r["configure"]["options"]["leaseSeconds"] == 2
    assert r["configure"]["tier"] == "declared"
    assert r["push"] == {"pushed": 3}
    assert r["first"] == [[{"n": 0}, 1, "Default"], [{"n": 1}, 1, "Default"],
                          [{"n": 2}, 1, "Default"]]
    assert [x["outcome"] for x in r["ack1"]["results"]] == ["acked", "redelivered",
                                                           "redelivered"]
    assert r["again"] == [[{"n": 1}, 2], [{"n": 2}, 2]]
    # attempts 2 > retryLimit 1: dropped and counted, answered acked.
    assert [x["outcome"] for x in r["ack2"]["results"]] == ["acked", "acked"]
    assert r["ack_twice"]["results"][0]["outcome"] == "unknown"
    assert r["depth"]["pending"] == 0 and r["depth"]["drops"]["retry"] == 2
    assert r["missing"] == "ephemeral_queue_not_found"
    assert r["woken"] == [{"hello": "world"}] and r["woken_before_timeout"]
    assert r["fan_a"] == r["fan_b"] == [{"k": 1}, {"k": 2}]
    assert r["fan_a_again"] == []
    assert sorted(r["competing"]) == list(range(40))  # each once, none twice
    assert r["lease"] == [[1], [2], []]
    assert r["lease_late_ack"]["results"][0]["outcome"] == "unknown"
    assert r["lease_depth"]["drops"]["retry"] == 1
    assert r["reject"] == {"code": "queue_full", "status": 429}
    assert r["reject_all_or_nothing"] == 2
    assert r["drop_oldest"] == [3, 4, 5]
    assert r["drop_depth"]["drops"]["bounds"] == 2
    assert r["drop_bytes"] == ["cccc"]
    assert r["ttl"] == [] and r["ttl_depth"]["drops"]["ttl"] == 1
    assert r["window"] == [{"w": 0}, {"w": 1}, {"w": 2}]
    assert r["buffered"] == list(range(25))
    listed = {q["queue"]: q for q in r["queues"]["queues"]}
    assert listed["eph.jobs"]["tier"] == "declared"
    assert listed["eph.wake"]["tier"] == "implicit"
    assert listed["eph.drop"]["drops"]["bounds"] == 2
    assert r["reset"] == {"queue": "eph.work", "dropped": 0}
    assert r["reset_missing"] == {"queue": "eph.nothing", "dropped": 0}
    assert r["delete"]["deleted"] is True and r["delete"]["declared"] is True
    assert r["delete_missing"]["deleted"] is False
    # Declarations in PostgreSQL, never a message.
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.ephemeral_queues "
                                        "WHERE queue = 'eph.drop'") == 0
    assert await db_fetchval(broker.db, "SELECT options->>'leaseSeconds' FROM "
                                        "queen.ephemeral_queues WHERE queue = 'eph.jobs'") == "2"


async def test_the_wire_and_bad_input_over_raw_http(client):
    push = await client.post("/api/v1/ephemeral/push",
                             json={"queue": "raw", "partition": "p", "messages": [
                                 {"payload": {"a": [1, "x"]}}, {"payload": None}, {}]})
    assert push.status_code == 201 and push.json() == {"pushed": 3}
    assert push.headers["content-type"] == "application/json"
    pop = await client.get("/api/v1/ephemeral/pop", params={"queue": "raw", "batch": "5"})
    assert pop.status_code == 200
    body = pop.json()
    assert body["queue"] == "raw"
    assert [m["payload"] for m in body["messages"]] == [{"a": [1, "x"]}, None, None]
    assert {m["partition"] for m in body["messages"]} == {"p"}
    empty = await client.get("/api/v1/ephemeral/pop",
                             params={"queue": "raw", "wait": "true", "timeout": "100"})
    assert empty.status_code == 200 and empty.json()["messages"] == []
    assert (await client.post("/api/v1/ephemeral/ack", json={"queue": "raw", "acks": [
        {"id": "garbage"}, {"id": "1.2.1.cA"}]})).json()["results"] == [
        {"id": "garbage", "outcome": "unknown"}, {"id": "1.2.1.cA", "outcome": "stale"}]

    def bad(response: httpx.Response) -> None:
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "ephemeral_bad_request", response.text

    bad(await client.post("/api/v1/ephemeral/configure",
                          json={"queue": "raw", "options": {"maxLenght": 3}}))
    bad(await client.post("/api/v1/ephemeral/configure",
                          json={"queue": "raw", "options": {"maxLength": -1}}))
    bad(await client.post("/api/v1/ephemeral/configure",
                          json={"queue": "raw", "options": {"maxLength": 1.5}}))
    bad(await client.post("/api/v1/ephemeral/configure",
                          json={"queue": "raw", "options": {"policy": "drop"}}))
    bad(await client.post("/api/v1/ephemeral/configure",
                          json={"queue": "raw", "options": {"windowBuffer": {"n": 1}}}))
    bad(await client.post("/api/v1/ephemeral/configure", json={"queue": "", "options": {}}))
    bad(await client.post("/api/v1/ephemeral/push", content=b"{not json"))
    bad(await client.post("/api/v1/ephemeral/push", json={"queue": "a\x01b", "messages": []}))
    bad(await client.post("/api/v1/ephemeral/push", json={"queue": "raw", "messages": 3}))
    bad(await client.post("/api/v1/ephemeral/ack", json={"queue": "raw", "acks": [
        {"id": "x", "status": "maybe"}]}))
    bad(await client.get("/api/v1/ephemeral/pop", params={"queue": "raw", "batch": "0"}))
    bad(await client.get("/api/v1/ephemeral/pop", params={"queue": "raw", "timeout": "x",
                                                          "wait": "true"}))
    missing = await client.get("/api/v1/ephemeral/queues/nope/depth")
    assert missing.status_code == 404
    assert missing.json()["code"] == "ephemeral_queue_not_found"
    # Nothing a refusal touched was changed.
    assert (await client.get("/api/v1/ephemeral/queues/raw/depth")).json()["tier"] == "implicit"


async def test_the_memory_budget_answers_503(database_url):
    async with running_broker({"DATABASE_URL": database_url,
                               "QUEEN_EPHEMERAL_MAX_BYTES": "2000", **FAST}) as server:
        async with httpx.AsyncClient(base_url=server.url) as c:
            r = await c.post("/api/v1/ephemeral/push",
                             json={"queue": "big", "messages": [{"payload": "x" * 5000}]})
            assert r.status_code == 503
            assert r.json()["code"] == "ephemeral_unavailable"
            assert r.headers["retry-after"] == "1"


async def test_a_restart_brings_declared_queues_back_empty_and_old_ids_ack_stale(
        database_url):
    env = {"DATABASE_URL": database_url, **FAST}
    async with running_broker(env) as server:
        before = await run_client(server.url, "before")
    async with running_broker(env) as server:
        after = await run_client(server.url, "after", json.dumps(before["ids"]))
    assert before["ids"]
    assert [x["outcome"] for x in after["ack"]["results"]] == ["stale"]
    assert after["pop"] == []
    assert ["eph.kept", "declared", 0] in after["queues"]
    assert after["implicit"] == "ephemeral_queue_not_found"


async def test_two_workers_push_through_one_and_pop_through_the_other(database_url):
    async with running_broker({"DATABASE_URL": database_url, **FAST}, workers=2) as server:
        one, two = server.worker_urls
        r = await run_client(one, "relay", two)
        assert r["woken"] == [{"req": 1}]
        assert r["ack"]["results"][0]["outcome"] == "acked"
        assert sorted(r["competing"]) == list(range(60))
        assert r["depth"]["pending"] == 0
        # SIGKILL the owning worker: the other takes the rings over, a new incarnation.
        async with httpx.AsyncClient(timeout=30) as c:
            owner = (await c.get(one + "/api/v1/ephemeral/queues")).json()["owner"]
            pid = int(owner.split("/")[0].rsplit(":", 1)[1])
            assert pid in server.worker_pids()
            await c.post(one + "/api/v1/ephemeral/push",
                         json={"queue": "eph.k", "messages": [{"payload": 1}]})
            (held,) = (await c.get(two + "/api/v1/ephemeral/pop",
                                   params={"queue": "eph.k"})).json()["messages"]
            ids = {url: (await c.get(url + "/health")).json()["worker_id"] for url in (one, two)}
            survivor = two if owner.startswith(ids[one] + "/") else one
            os.kill(pid, signal.SIGKILL)
            with trio.fail_after(30):
                while True:
                    try:
                        now = (await c.get(survivor + "/api/v1/ephemeral/queues")).json()
                    except httpx.TransportError:
                        now = {"owner": owner}
                    if now["owner"] != owner:
                        break
                    await trio.sleep(0.1)
            acked = await c.post(survivor + "/api/v1/ephemeral/ack",
                                 json={"queue": "eph.k", "acks": [{"id": held["id"]}]})
            assert acked.json()["results"][0]["outcome"] == "stale"
            assert (await c.get(survivor + "/api/v1/ephemeral/pop",
                                params={"queue": "eph.k"})).json()["messages"] == []


async def test_two_brokers_on_one_database_and_the_owner_killed(database_url):
    env = {"DATABASE_URL": database_url, **FAST}
    async with running_broker(env) as a, running_broker(env) as b:
        r = await run_client(a.url, "relay", b.url)
        assert sorted(r["competing"]) == list(range(60))
        async with httpx.AsyncClient(timeout=30) as c:
            listed = (await c.get(b.url + "/api/v1/ephemeral/queues")).json()
            owner = listed["owner"]
            # The owner's peer listener: the ephemeral routes and /health only.
            peer = "http://" + listed["ownerAddress"]
            assert (await c.get(peer + "/api/v1/ephemeral/queues")).status_code == 200
            assert (await c.get(peer + "/health")).status_code == 200
            refused = await c.get(peer + "/api/v1/resources/queues")
            assert refused.status_code == 404 and "peer listener" in refused.json()["error"]
            assert owner == (await c.get(a.url + "/api/v1/ephemeral/queues")).json()["owner"]
            a_id = (await c.get(a.url + "/health")).json()["worker_id"]
            dead, alive = (a, b) if owner.startswith(a_id + "/") else (b, a)
            await c.post(alive.url + "/api/v1/ephemeral/push",
                         json={"queue": "eph.moved", "messages": [{"payload": 1}]})
            held = (await c.get(alive.url + "/api/v1/ephemeral/pop",
                                params={"queue": "eph.moved"})).json()["messages"]
            assert len(held) == 1
            os.kill(dead.proc.pid, signal.SIGKILL)
            dead.proc.wait()
            # The survivor takes the rings over: a new incarnation, empty; the old id is stale.
            acked = await c.post(alive.url + "/api/v1/ephemeral/ack",
                                 json={"queue": "eph.moved", "acks": [{"id": held[0]["id"]}]})
            assert acked.status_code == 200
            assert acked.json()["results"][0]["outcome"] == "stale"
            queues = (await c.get(alive.url + "/api/v1/ephemeral/queues")).json()
            assert queues["owner"] != owner
            pushed = await c.post(alive.url + "/api/v1/ephemeral/push",
                                  json={"queue": "eph.moved", "messages": [{"payload": 2}]})
            assert pushed.status_code == 201
            got = (await c.get(alive.url + "/api/v1/ephemeral/pop",
                               params={"queue": "eph.moved"})).json()["messages"]
            assert [m["payload"] for m in got] == [2]


async def test_the_cli_and_the_metrics(http_url, client):
    pushed = await run_cli("--server", http_url, "ephemeral", "push", "cli.q",
                           "--partition", "p1", stdin='{"a": 1}\n{"a": 2}\n\n')
    assert pushed.status == 0, pushed.err
    assert pushed.json() == {"pushed": 2}
    listed = await run_cli("--server", http_url, "ephemeral", "list", "-o", "json")
    assert listed.status == 0, listed.err
    (row,) = [q for q in listed.json()["queues"] if q["queue"] == "cli.q"]
    assert (row["depth"], row["tier"]) == (2, "implicit")
    depth = await run_cli("--server", http_url, "ephemeral", "depth", "cli.q", "-o", "json")
    assert depth.json()["partitions"] == [{"partition": "p1", "pending": 2, "bytes": 14}]
    assert (await run_cli("--server", http_url, "ephemeral", "depth", "nope")).status == 4
    popped = await run_cli("--server", http_url, "ephemeral", "pop", "cli.q", "--batch", "5",
                           "--auto-ack")
    assert popped.status == 0, popped.err
    assert [m["payload"] for m in popped.lines()] == [{"a": 1}, {"a": 2}]
    empty = await run_cli("--server", http_url, "ephemeral", "pop", "cli.q", "--wait", "0.2")
    assert empty.status == 4 and empty.out == ""
    bad = await run_cli("--server", http_url, "ephemeral", "push", "cli.q", stdin="{nope\n")
    assert bad.status == 2 and "line 1" in bad.err

    await client.post("/api/v1/ephemeral/configure",
                      json={"queue": "m.q", "options": {"maxLength": 1, "policy": "dropOldest"}})
    await client.post("/api/v1/ephemeral/push",
                      json={"queue": "m.q", "messages": [{"payload": 1}, {"payload": 22}]})
    text = (await client.get("/metrics/prometheus")).text
    assert 'queen_ephemeral_depth{queue="m.q"' in text
    assert [line for line in text.splitlines()
            if line.startswith('queen_ephemeral_dropped_total{queue="m.q",reason="bounds"')
            ][0].endswith(" 1.0")
    assert [line for line in text.splitlines()
            if line.startswith('queen_ephemeral_pushed_total{queue="m.q"')][0].endswith(" 2.0")
    assert "queen_ephemeral_owner{" in text
    figures = (await client.get("/metrics")).json()["ephemeral"]
    assert figures["owner"] is True and figures["drops"]["bounds"] == 1


async def test_the_dashboard_shows_each_queue_its_figures_and_the_owner(client, http_url):
    await client.post("/api/v1/ephemeral/configure",
                      json={"queue": "dash.feed", "options": {"maxLength": 2,
                                                              "policy": "dropOldest"}})
    await client.post("/api/v1/ephemeral/push", json={
        "queue": "dash.feed", "partition": "room-7",
        "messages": [{"payload": {"n": n}} for n in range(5)]})
    await client.get("/api/v1/ephemeral/pop", params={"queue": "dash.feed", "group": "ui"})
    await client.post("/api/v1/ephemeral/push",
                      json={"queue": "dash.inbox", "messages": [{"payload": "<b>hi</b>"}]})
    listed = (await client.get("/api/v1/ephemeral/queues")).json()
    with chromium() as driver:
        browser = Browser(driver)
        await browser.start(http_url)
        await browser.loaded("overview")
        await browser.goto("ephemeral")
        await browser.loaded("ephemeral")
        assert await browser.console_errors() == []
        feed = await browser.text("tr[data-row='dash.feed']")
        assert feed.split()[:4] == ["dash.feed", "declared", "2", "14"]
        assert "bounds 3" in feed
        inbox = await browser.text("tr[data-row='dash.inbox']")
        assert inbox.split()[:3] == ["dash.inbox", "implicit", "1"]
        assert listed["owner"] in await browser.text("[data-key=eph-owner]")
        await browser.screenshot("ephemeral")


async def owner_listing(c: httpx.AsyncClient, url: str, headers: dict[str, str]) -> dict:
    """The listing, once a process owns the rings: two brokers just started may not have
    settled who does yet, and a relay meanwhile answers 503 `no_owner`."""
    with trio.fail_after(30):
        while True:
            listed = await c.get(url + "/api/v1/ephemeral/queues", headers=headers)
            if listed.status_code != 503:
                assert listed.status_code == 200, listed.text
                return listed.json()
            await trio.sleep(0.1)


async def test_a_relay_carries_the_callers_token_and_only_members_may_relay(database_url):
    env = {"DATABASE_URL": database_url, "JWT_ENABLED": "true", "JWT_SECRET": SECRET, **FAST}
    writer, reader = bearer(token(role="read-write")), bearer(token(role="read-only"))
    async with running_broker(env) as a, running_broker(env) as b, \
            httpx.AsyncClient(timeout=30) as c:
        owner = await owner_listing(c, a.url, reader)
        a_id = (await c.get(a.url + "/health")).json()["worker_id"]
        owning, other = (a, b) if owner["owner"].startswith(a_id + "/") else (b, a)
        # Through the process that does not own: relayed with the caller's token, which
        # the owner checks again.
        pushed = await c.post(other.url + "/api/v1/ephemeral/push", headers=writer,
                              json={"queue": "auth.q", "messages": [{"payload": 1}]})
        assert pushed.status_code == 201, pushed.text
        assert (await c.post(other.url + "/api/v1/ephemeral/push", headers=reader, json={
            "queue": "auth.q", "messages": []})).status_code == 403
        assert (await c.get(other.url + "/api/v1/ephemeral/queues")).status_code == 401
        depth = await c.get(other.url + "/api/v1/ephemeral/queues/auth.q/depth", headers=reader)
        assert depth.json()["pending"] == 1
        # A request that claims to be a relay without a member's secret is refused.
        forged = await c.post(owning.url + "/api/v1/ephemeral/reset", headers={
            **writer, "x-queen-ephemeral-peer": "someone 0123"}, json={"queue": "auth.q"})
        assert forged.status_code == 403
        assert forged.json()["code"] == "ephemeral_forbidden"
        assert (await c.get(owning.url + "/api/v1/ephemeral/queues/auth.q/depth",
                            headers=reader)).json()["pending"] == 1


async def test_an_owner_whose_session_ends_drops_its_rings_and_comes_back_new(broker, client):
    # The lock went with the session: whoever takes it next (here the same process, at its
    # next try) owns a new incarnation, and ids of the old one are stale.
    await client.post("/api/v1/ephemeral/configure", json={"queue": "s.q", "options": {}})
    await client.post("/api/v1/ephemeral/push", json={"queue": "s.q", "messages": [{}]})
    (held,) = (await client.get("/api/v1/ephemeral/pop", params={"queue": "s.q"})).json()[
        "messages"]
    before = (await client.get("/api/v1/ephemeral/queues")).json()["incarnation"]
    assert await db_fetchval(broker.db, "SELECT count(pg_terminate_backend(pid)) FROM "
                             "pg_stat_activity WHERE application_name = "
                             "'queen-trio-ephemeral'") == 1
    with trio.fail_after(30):
        while True:
            listed = (await client.get("/api/v1/ephemeral/queues")).json()
            if listed["incarnation"] not in ("", before) and broker.ephemeral.owner:
                break
            await trio.sleep(0.1)
    assert broker.ephemeral.ownership.losses == 1
    assert [(q["queue"], q["tier"], q["depth"]) for q in listed["queues"]] == [
        ("s.q", "declared", 0)]
    acked = await client.post("/api/v1/ephemeral/ack",
                              json={"queue": "s.q", "acks": [{"id": held["id"]}]})
    assert acked.json()["results"][0]["outcome"] == "stale"
