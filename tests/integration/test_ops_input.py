"""Input the operations routes cannot use: a 400 JSON naming the parameter, never a 500 (times
outside what datetime holds, digits int() refuses), and request data never becomes a key of
what the broker counts (methods, queue names)."""

from __future__ import annotations

import pytest

from tests.support.consuming import push
from tests.support.db import db_fetchrow, db_fetchval

YEAR_1_PLUS_5 = "0001-01-01T00:00:00+05:00"  # year 0 in UTC
DIGITS = "9" * 5000  # int() refuses more than 4300
SERIES = ("/api/v1/status", "/api/v1/status/analytics", "/api/v1/analytics/system-metrics",
          "/api/v1/analytics/worker-metrics", "/api/v1/analytics/queue-lag",
          "/api/v1/analytics/queue-ops", "/api/v1/analytics/queue-parked-replicas",
          "/api/v1/analytics/retention")

CASES = [
    # The messages list: `to` rounds up to its minute, the window reaches an hour back.
    ("GET", "/api/v1/messages", {"to": "9999-12-31T23:59:30Z"}, None, "to"),
    ("GET", "/api/v1/messages", {"to": "0001-01-01T00:00:30Z"}, None, "to"),
    ("GET", "/api/v1/messages", {"from": YEAR_1_PLUS_5}, None, "from"),
    ("GET", "/api/v1/messages", {"limit": DIGITS}, None, "limit"),
    ("GET", "/api/v1/messages", {"offset": "\u0663"}, None, "offset"),
    # Every series route: the default span reaches before year 1.
    *(("GET", path, {"to": "0001-01-01T00:30:00Z"}, None, "to") for path in SERIES),
    ("GET", "/api/v1/status", {"to": "9999-06-01T00:00:00Z"}, None, "to"),
    ("GET", "/api/v1/status", {"bucketMinutes": "\u00b2"}, None, "bucketMinutes"),
    ("GET", "/api/v1/analytics/queue-ops", {"bucketMinutes": DIGITS}, None, "bucketMinutes"),
    # Times in request bodies.
    ("POST", "/api/v1/consumer-groups/g/subscription", None,
     {"subscriptionTimestamp": YEAR_1_PLUS_5}, "subscriptionTimestamp"),
    ("POST", "/api/v1/consumer-groups/g/queues/q/seek", None, {"timestamp": YEAR_1_PLUS_5},
     "timestamp"),
    ("POST", "/api/v1/consumer-groups/g/queues/q/partitions/p/seek", None,
     {"timestamp": "9999-12-31T23:59:59Z"}, "timestamp"),
    # Query integers and times elsewhere.
    ("GET", "/api/v1/consumer-groups/lagging", {"minLagSeconds": DIGITS}, None,
     "minLagSeconds"),
    ("GET", "/api/v1/dlq", {"offset": DIGITS}, None, "offset"),
    ("GET", "/api/v1/pop/queue/q", {"batch": DIGITS}, None, "batch"),
    ("GET", "/api/v1/pop/queue/q", {"consumerGroup": "g", "subscriptionFrom": YEAR_1_PLUS_5},
     None, "subscriptionFrom"),
]


@pytest.mark.parametrize(("method", "path", "query", "body", "parameter"), CASES,
                         ids=[f"{c[0]} {c[1]} {c[4]}" for c in CASES])
async def test_unusable_input_is_a_400_naming_the_parameter(client, method, path, query, body,
                                                            parameter):
    r = await client.request(method, path, params=query, json=body)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/json"
    assert parameter in r.json()["error"]


async def test_year_1_itself_still_answers(client):
    """The refusals are of what cannot be computed, not of early times."""
    r = await client.get("/api/v1/messages", params={"from": "0001-01-01T00:00:00Z",
                                                    "to": "0001-01-01T00:00:30Z"})
    assert r.status_code == 200 and r.json()["messages"] == []
    r = await client.get("/api/v1/status", params={"from": "0001-01-01T00:00:00Z",
                                                  "to": "0001-01-01T00:30:00Z"})
    assert r.status_code == 200 and r.json()["pointCount"] == 31


async def test_a_content_length_of_thousands_of_digits_is_too_large(client):
    r = await client.post("/api/v1/push", content=b"{}", headers={"content-length": DIGITS})
    assert r.status_code == 413 and "error" in r.json()


async def test_methods_are_counted_from_a_fixed_set(client, broker):
    for method in ("FOOBAR", "PROPFIND", "X-" + "A" * 200):
        r = await client.request(method, "/api/v1/status")
        assert r.status_code == 405
        r = await client.request(method, "/no/such/route")
        assert r.status_code == 404
    activity = broker.activity.statistics()
    assert {method for method, _route, _status in activity.responses} == {"OTHER"}
    assert set(activity.responses) == {("OTHER", "unmatched", 405), ("OTHER", "unmatched", 404)}
    assert {method for method, _route in activity.latency} == {"OTHER"}
    families = (await client.get("/metrics/prometheus")).text
    assert "FOOBAR" not in families and 'method="OTHER"' in families


async def test_pops_of_made_up_queues_leave_no_counts_behind(client, broker):
    await push(client, "real", 1)
    names = [f"made-up-{n}" for n in range(50)]
    for name in names:
        r = await client.get(f"/api/v1/pop/queue/{name}")
        assert r.status_code == 204
    assert (await client.get("/api/v1/pop/queue/real")).status_code == 200
    await broker.sampler.sample_now()
    assert set(broker.activity.statistics().queues) == {"real"}
    sampled = await db_fetchval(broker.db, "SELECT array_agg(DISTINCT queue_name) "
                                "FROM queen.queue_samples")
    assert sampled == ["real"]
    # The pops still count in this process's totals.
    assert broker.activity.statistics().pop_empty == 50

    # A deleted queue's counts go at the next sample; one that comes back counts afresh.
    assert (await client.delete("/api/v1/resources/queues/real")).status_code == 200
    await broker.sampler.sample_now()
    assert broker.activity.statistics().queues == {}
    await push(client, "real", 1, 2)
    await broker.sampler.sample_now()
    pushed = await db_fetchrow(broker.db, "SELECT sum(pushed) AS total, min(least(pushed, "
                               "pop_requests, popped)) AS lowest FROM queen.queue_samples "
                               "WHERE queue_name = 'real'")
    assert (pushed["total"], pushed["lowest"]) == (3, 0)
