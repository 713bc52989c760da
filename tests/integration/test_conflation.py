"""Conflation on durable pops (docs/decisions.md#conflation): a consumer group's stored policy,
the newest deliverable message of each partition, the superseded counted as consumed and never
dead-lettered, the echo on every reply (200, never 204), the refusals; raw HTTP, the official
client, and two brokers on one database."""

from __future__ import annotations

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families

from queen_trio.broker import open_broker
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.browser import Browser, chromium
from tests.support.cli import run_cli
from tests.support.official import run_flow

QUEUE = "prices"


async def push(client: httpx.AsyncClient, partition: str, values: list[int],
               queue: str = QUEUE) -> None:
    r = await client.post("/api/v1/push", json={"items": [
        {"queue": queue, "partition": partition, "payload": v} for v in values]})
    assert r.status_code == 201, r.text


async def pop(client: httpx.AsyncClient, group: str | None, queue: str = QUEUE,
              **params: str) -> httpx.Response:
    query = {"wait": "false", "batch": "10", "partitions": "10", **params}
    if group is not None:
        query["consumerGroup"] = group
    return await client.get(f"/api/v1/pop/queue/{queue}", params=query)


def values(r: httpx.Response) -> list[int]:
    assert r.status_code == 200, r.text
    return [m["data"] for m in r.json()["messages"]]


async def ack(client: httpx.AsyncClient, r: httpx.Response, group: str,
              status: str = "completed") -> None:
    body = r.json()
    a = await client.post("/api/v1/ack/batch", json={"consumerGroup": group, "acknowledgments": [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
         "leaseId": m["leaseId"], "status": status} for m in body["messages"]]})
    assert a.status_code == 200 and all(x["success"] for x in a.json()), a.text


async def consumed(client: httpx.AsyncClient, group: str, queue: str = QUEUE) -> dict[str, int]:
    detail = (await client.get(f"/api/v1/consumer-groups/{group}")).json()
    return {p["partition"]: p["totalConsumed"] for p in detail[queue]["partitions"]}


async def dead_letters(client: httpx.AsyncClient, group: str) -> int:
    r = await client.get("/api/v1/dlq", params={"queue": QUEUE, "consumerGroup": group})
    return int(r.json()["total"])


async def superseded_metric(client: httpx.AsyncClient) -> float:
    text = (await client.get("/metrics/prometheus")).text
    (family,) = [f for f in text_string_to_metric_families(text)
                 if f.name == "queen_conflation_superseded"]
    return sum(s.value for s in family.samples if s.name.endswith("_total"))


async def test_a_conflating_group_gets_the_newest_and_the_rest_count_as_consumed(client):
    await push(client, "eur", [1, 2, 3, 4, 5])
    got = await pop(client, "latest", conflation="true")
    assert values(got) == [5]
    assert got.json()["conflation"] is True and "conflationConflict" not in got.json()
    # The cursor is past the four superseded ones already; the ack settles the fifth.
    assert await consumed(client, "latest") == {"eur": 4}
    await ack(client, got, "latest")
    assert await consumed(client, "latest") == {"eur": 5}
    assert await dead_letters(client, "latest") == 0
    assert await superseded_metric(client) == 4
    # Another group on the same queue, which states nothing, gets every message, no echo.
    every = await pop(client, "every")
    assert values(every) == [1, 2, 3, 4, 5] and "conflation" not in every.json()
    # Newer pushes: the newest again, and a pop without the parameter is served by the stored
    # policy (and echoes it).
    await push(client, "eur", [6, 7, 8])
    plain = await pop(client, "latest")
    assert values(plain) == [8] and plain.json()["conflation"] is True
    await ack(client, plain, "latest")
    assert await consumed(client, "latest") == {"eur": 8}
    assert await superseded_metric(client) == 6
    assert await dead_letters(client, "latest") == 0


async def test_each_partition_gives_its_newest_under_one_lease(client):
    await push(client, "p1", [11, 12, 13])
    await push(client, "p2", [21])
    await push(client, "p3", [31, 32])
    got = await pop(client, "g", conflation="true")
    body = got.json()
    assert sorted(values(got)) == [13, 21, 32]
    assert body["partitionsClaimed"] == 3 and len({m["leaseId"] for m in body["messages"]}) == 1
    # batch stays a global cap: one partition's newest with batch=1.
    await push(client, "p1", [14])
    one = await pop(client, "g", conflation="true", batch="1")
    assert values(one) == []  # p1..p3 are leased until the ack
    await ack(client, got, "g")
    one = await pop(client, "g", conflation="true", batch="1")
    assert values(one) == [14]
    # One partition named in the path.
    await push(client, "p2", [22, 23])
    named = await client.get(f"/api/v1/pop/queue/{QUEUE}/partition/p2",
                             params={"consumerGroup": "g", "conflation": "true"})
    assert values(named) == [23]
    assert await consumed(client, "g") == {"p1": 3, "p2": 2, "p3": 2}


async def test_the_first_stated_policy_is_kept_and_the_other_is_a_conflict(client):
    await push(client, "eur", [1, 2, 3])
    # `pinned` states "every message" first; a conflating pop is then a conflict, served
    # every message, and its reply has no `conflation` key.
    first = await pop(client, "pinned", conflation="false", batch="1")
    assert values(first) == [1] and "conflationConflict" not in first.json()
    await ack(client, first, "pinned")
    conflict = await pop(client, "pinned", conflation="true", batch="1")
    assert values(conflict) == [2]
    assert conflict.json()["conflationConflict"] is True and "conflation" not in conflict.json()
    # The other way round: `last` conflates, a pop stating false gets the newest, and says so.
    other = await pop(client, "last", conflation="true")
    assert values(other) == [3]
    await ack(client, other, "last")
    await push(client, "eur", [4, 5])
    stated_false = await pop(client, "last", conflation="false")
    assert values(stated_false) == [5]
    assert stated_false.json()["conflation"] is True
    assert stated_false.json()["conflationConflict"] is True
    # An empty conflict is still a 200 that carries it.
    await ack(client, conflict, "pinned")
    drained = await pop(client, "pinned")
    await ack(client, drained, "pinned")
    empty = await pop(client, "pinned", conflation="true")
    assert empty.status_code == 200
    assert empty.json()["messages"] == [] and empty.json()["conflationConflict"] is True


async def test_an_empty_or_timed_out_conflating_pop_answers_200_with_the_echo(client):
    # A queue that does not exist yet, one with nothing, and a long poll that times out.
    for r in (await pop(client, "g", queue="nowhere", conflation="true"),):
        assert r.status_code == 200 and r.json()["conflation"] is True
        assert r.json()["messages"] == []
    await push(client, "eur", [1])
    got = await pop(client, "g", conflation="true")
    await ack(client, got, "g")
    empty = await pop(client, "g", conflation="true")
    assert empty.status_code == 200
    assert empty.json() == {"success": True, "queue": QUEUE, "consumerGroup": "g",
                            "messages": [], "partitionsClaimed": 0, "conflation": True}
    waited = await pop(client, "g", conflation="true", wait="true", timeout="200")
    assert waited.status_code == 200 and waited.json()["conflation"] is True
    assert waited.json()["messages"] == []
    # With autopilot the empty answer carries its sizing, as a full one does.
    auto = await pop(client, "g", conflation="true", autopilot="true")
    assert auto.json()["autopilot"]["waitMs"] == 100
    # A pop stating nothing on an empty queue is still a 204.
    assert (await pop(client, "g")).status_code == 204


async def test_a_waiting_conflating_pop_is_woken_by_a_push(client):
    await push(client, "eur", [0])
    await ack(client, await pop(client, "g", conflation="true"), "g")
    answers: list[httpx.Response] = []

    async def wait() -> None:
        answers.append(await pop(client, "g", conflation="true", wait="true", timeout="5000"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.sleep(0.2)
        await push(client, "eur", [1])
    assert values(answers[0]) == [1] and answers[0].json()["conflation"] is True


async def test_conflation_with_autoack_or_without_a_group_is_a_400(client):
    await push(client, "eur", [1, 2])
    auto = await pop(client, "g", conflation="true", autoAck="true")
    assert auto.status_code == 400
    assert auto.json()["code"] == "conflation_with_auto_ack" and "autoAck" in auto.json()["error"]
    queue_mode = await pop(client, None, conflation="true")
    assert queue_mode.status_code == 400
    assert queue_mode.json()["code"] == "conflation_without_group"
    bad = await pop(client, "g", conflation="maybe")
    assert bad.status_code == 400
    # Nothing was claimed or stored by the refusals.
    assert values(await pop(client, "g")) == [1, 2]


async def test_a_deleted_group_takes_a_new_policy(client):
    await push(client, "eur", [1, 2, 3])
    assert values(await pop(client, "g", conflation="true")) == [3]
    deleted = await client.delete("/api/v1/consumer-groups/g")
    assert deleted.status_code == 200
    again = await pop(client, "g", conflation="false")
    assert values(again) == [1, 2, 3] and "conflationConflict" not in again.json()
    # ... and for one queue only.
    await client.delete(f"/api/v1/consumer-groups/g/queues/{QUEUE}")
    fresh = await pop(client, "g", conflation="true")
    assert values(fresh) == [3] and "conflationConflict" not in fresh.json()


async def test_a_nacked_newest_is_superseded_by_a_newer_one_never_dead_lettered(client):
    await client.post("/api/v1/configure", json={"queue": QUEUE, "options": {"retryLimit": 1}})
    await push(client, "eur", [1, 2])
    got = await pop(client, "g", conflation="true")
    assert values(got) == [2]
    await ack(client, got, "g", status="failed")  # one failed delivery of 2: one retry left
    (state,) = [p for p in (await client.get("/api/v1/consumer-groups/g")).json()[QUEUE][
        "partitions"] if p["partition"] == "eur"]
    assert state["retryCount"] == 1
    await push(client, "eur", [3])
    newer = await pop(client, "g", conflation="true")
    assert values(newer) == [3]
    detail = (await client.get("/api/v1/consumer-groups/g")).json()
    (state,) = [p for p in detail[QUEUE]["partitions"] if p["partition"] == "eur"]
    assert state["retryCount"] == 0 and state["totalConsumed"] == 2
    assert await dead_letters(client, "g") == 0


async def test_the_depth_and_the_group_list_report_the_policy(client):
    await push(client, "a", [1, 2, 3])
    await push(client, "b", [4, 5])
    await pop(client, "latest", conflation="true", batch="1", partitions="1")
    await pop(client, "every", batch="1", partitions="1")
    latest = (await client.get(f"/api/v1/resources/queues/{QUEUE}/depth",
                               params={"group": "latest"})).json()
    assert latest["conflation"] is True
    assert latest["effectivePending"] == latest["partitionsPending"] == 2
    every = (await client.get(f"/api/v1/resources/queues/{QUEUE}/depth",
                              params={"group": "every"})).json()
    assert every["conflation"] is False and every["effectivePending"] == every["pending"] == 5
    listed = {g["name"]: g["conflation"]
              for g in (await client.get("/api/v1/consumer-groups")).json()}
    assert listed == {"latest": True, "every": False}


async def test_the_official_client_conflates(http_url):
    r = await run_flow("conflation_flow.py", http_url)
    assert r["pinned_stated"] == [200, {"success": True, "queue": "cx.prices",
                                        "consumerGroup": "pinned", "messages": [],
                                        "partitionsClaimed": 0}]
    assert r["latest"] == [{"n": 5}]
    assert r["latest_ack"]["success"] is True
    assert r["latest_again"] == [] and r["latest_waited"] == []
    assert r["every"] == [{"n": n} for n in range(1, 6)]
    assert r["pinned"] == [{"n": 1}]  # the stored policy won; the client kept running
    assert r["consumed"] == [{"n": 7}]
    assert r["auto_ack"] == 400


async def test_two_brokers_on_one_database_deliver_each_partitions_newest_once(database_url):
    """The superseding is the claim's, in SQL under the (partition, group) row lock: competing
    consumers of one conflating group on two brokers get each partition's newest once."""
    async with open_broker(make_settings(database_url), database_url) as a, \
            open_broker(make_settings(database_url), database_url) as b:
        ca = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(a)),
                               base_url="http://a")
        cb = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(b)),
                               base_url="http://b")
        partitions = [f"p{k}" for k in range(8)]
        for k, name in enumerate(partitions):
            await push(ca if k % 2 else cb, name, [k * 10 + n for n in range(1, 6)])
        delivered: list[int] = []

        async def consumer(c: httpx.AsyncClient) -> None:
            for _ in range(6):
                r = await pop(c, "g", conflation="true", batch="2", partitions="2")
                delivered.extend(values(r))

        async with trio.open_nursery() as nursery:
            for c in (ca, cb, ca, cb):
                nursery.start_soon(consumer, c)
        assert sorted(delivered) == [k * 10 + 5 for k in range(8)]
        assert sum((await consumed(cb, "g")).values()) == 8 * 4
        assert await superseded_metric(ca) + await superseded_metric(cb) == 8 * 4
        await ca.aclose()
        await cb.aclose()


async def test_the_cli_pops_with_a_stated_policy(http_url, client):
    await push(client, "eur", [1, 2, 3])
    s = ("--server", http_url)
    latest = await run_cli("pop", QUEUE, "--group", "ui", "--conflation", "-n", "10", *s)
    assert latest.status == 0 and [m["data"] for m in latest.lines()] == [3]
    (m,) = latest.lines()
    settled = await client.post("/api/v1/ack", json={
        "transactionId": m["transactionId"], "partitionId": m["partitionId"],
        "leaseId": m["leaseId"], "consumerGroup": "ui", "status": "completed"})
    assert settled.json()[0]["success"] is True
    # Nothing left: the empty 200 is "no message" (exit 4), as a 204 is.
    empty = await run_cli("pop", QUEUE, "--group", "ui", "--conflation", *s)
    assert empty.status == 4 and empty.out == ""
    # Stating the other policy: served by the stored one, and told so.
    await push(client, "eur", [4, 5])
    other = await run_cli("pop", QUEUE, "--group", "ui", "--no-conflation", "-n", "10", *s)
    assert [m["data"] for m in other.lines()] == [5]
    assert "keeps its stored policy (conflation on)" in other.err


async def test_the_dashboard_shows_a_groups_delivery_policy(http_url, client):
    await push(client, "eur", [1, 2])
    await pop(client, "latest", conflation="true")
    await push(client, "eur", [1], queue="other")
    await pop(client, "latest", queue="other")  # joins `other`, states nothing
    with chromium() as driver:
        browser = Browser(driver)
        await browser.start(http_url, "groups/latest")
        await browser.loaded("group")
        assert await browser.console_errors() == []
        text = await browser.text("#main")
        assert "delivery conflation (newest per partition)" in text
        assert "delivery every message" in text
        await browser.screenshot("group-conflation")


async def test_a_namespace_pop_conflates_each_queue_by_its_own_policy(client):
    await push(client, "eur", [1, 2, 3], queue="fx.spot")
    await push(client, "eur", [4, 5], queue="fx.forward")
    got = await client.get("/api/v1/pop", params={
        "namespace": "fx", "consumerGroup": "g", "conflation": "true", "batch": "10",
        "partitions": "10"})
    assert got.status_code == 200 and got.json()["conflation"] is True
    assert sorted((m["queue"], m["data"]) for m in got.json()["messages"]) == [
        ("fx.forward", 5), ("fx.spot", 3)]
    await ack(client, got, "g")
    empty = await client.get("/api/v1/pop", params={
        "namespace": "fx", "consumerGroup": "g", "conflation": "true"})
    assert empty.status_code == 200
    assert empty.json()["messages"] == [] and empty.json()["conflation"] is True
