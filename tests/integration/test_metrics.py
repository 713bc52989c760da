"""GET /metrics and /metrics/prometheus: every family parsed back with prometheus_client."""

from __future__ import annotations

import json

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.db import db_execute
from tests.support.processes import running_broker
from tests.support.scenarios import GROUP, known_state


async def scrape(client):
    r = await client.get("/metrics/prometheus")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert r.headers["cache-control"] == "no-cache"
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def value(family, **labels):
    (sample,) = [s for s in family.samples
                 if all(s.labels.get(k) == v for k, v in labels.items())
                 and not s.name.endswith(("_bucket", "_created"))
                 and (family.type != "histogram" or s.name.endswith("_count"))]
    return sample.value


async def test_prometheus_families_after_known_traffic(client, broker):
    await known_state(client)
    me = broker.identity.worker_id
    families = await scrape(client)
    assert value(families["queen_uptime_seconds"], worker_id=me) > 0
    assert value(families["queen_db_pool_max"], worker_id=me) == 10
    # Held by busy shards and fusion callers, never past the pool less its unheld two.
    assert 0 <= value(families["queen_db_pool_held"], worker_id=me) <= 10 - 2
    assert value(families["queen_db_calls"], worker_id=me) > 0  # trio-asyncio crossings
    assert value(families["queen_push_items"], worker_id=me, status="queued") == 12
    assert value(families["queen_push_items"], worker_id=me, status="duplicate") == 0
    assert value(families["queen_messages_pushed"], worker_id=me) == 12
    assert value(families["queen_pop_messages"], worker_id=me) == 6
    assert value(families["queen_ack_messages"], worker_id=me) == 3
    assert value(families["queen_nacks"], worker_id=me) == 2
    assert value(families["queen_dead_lettered"], worker_id=me) == 1
    assert value(families["queen_spool_pending"], worker_id=me) == 0
    assert value(families["queen_spool_failed"], worker_id=me) == 0
    assert value(families["queen_long_polls_parked"], worker_id=me) == 0
    # Histograms: request latency per route, lane segment and bundle sizes.
    latency = families["queen_http_request_duration_seconds"]
    assert latency.type == "histogram"
    assert value(latency, route="/api/v1/push", method="POST") == 4
    segments = families["queen_lane_segment_messages"]
    assert value(segments, worker_id=me) == broker.lane.statistics().segments == 4
    assert value(families["queen_lane_bundle_segments"], worker_id=me) == 4
    # The cluster, from PostgreSQL.
    assert value(families["queen_queue_depth"], queue="shop.orders") == 7
    assert value(families["queen_queue_messages"], queue="plain") == 2
    assert value(families["queen_dlq_depth"], scope="cluster") == 1
    assert value(families["queen_dlq_depth_by_queue"], queue="shop.orders") == 1
    assert value(families["queen_cluster_messages"], scope="cluster") == 12
    lag = families["queen_consumer_group_lag_messages"]
    assert value(lag, queue="shop.orders", consumer_group=GROUP) == 7
    # No family carries a partition: thousands of them would swamp Prometheus.
    for family in families.values():
        for sample in family.samples:
            assert "partition" not in sample.labels and "partition_id" not in sample.labels


async def test_prometheus_renders_every_live_worker(client, broker):
    await client.post("/api/v1/stats/refresh")
    me = broker.identity.worker_id
    # Another worker's latest families, as it would have sampled them; and a stale one.
    await db_execute(broker.db, """
        INSERT INTO queen.worker_figures (worker_id, hostname, pid, started_at, sampled_at,
                                          families)
        SELECT w, 'elsewhere', 4242, f.started_at, now() - age, replace(f.families::text, $1, w)::jsonb
          FROM queen.worker_figures f, (VALUES ('other:1', interval '1 second'),
                                               ('gone:2', interval '1 hour')) v(w, age)
         WHERE f.worker_id = $1""", me)
    families = await scrape(client)
    uptime = families["queen_uptime_seconds"]
    assert {s.labels["worker_id"] for s in uptime.samples} == {me, "other:1"}
    ages = families["queen_worker_last_sample_age_seconds"]
    assert {s.labels["worker_id"] for s in ages.samples} == {me, "other:1"}
    other = [s for s in ages.samples if s.labels["worker_id"] == "other:1"][0]
    assert other.labels["hostname"] == "elsewhere" and other.labels["pid"] == "4242"


async def test_metrics_json(client, broker):
    await known_state(client)
    r = await client.get("/metrics")
    assert r.status_code == 200
    body = r.json()
    assert body["workerId"] == broker.identity.worker_id and body["pid"] == broker.identity.pid
    assert body["messages"]["total"] == 12 and body["requests"]["total"] >= 11
    assert body["database"]["maxConnections"] == 10 and body["memory"]["rss"] > 0
    assert {"lane", "spool", "fusion", "longPolls", "maintenance", "eventLoopLag",
            "statsAge"} <= set(body)
    assert [m["name"] for m in body["maintenance"]] == [
        "partition reclaim", "retention pass", "stats maintenance", "kv sweep"]
    json.dumps(body)


async def test_health_names_the_worker(client, broker):
    body = (await client.get("/health")).json()
    assert body["status"] == "healthy" and body["worker_id"] == broker.identity.worker_id


async def test_every_worker_process_is_rendered_whichever_answers(database_url):
    async with running_broker({"DATABASE_URL": database_url}, workers=2) as server:
        async with httpx.AsyncClient(timeout=30) as http:
            named = set()
            for url in server.worker_urls:
                refreshed = (await http.post(url + "/api/v1/stats/refresh")).json()
                health = (await http.get(url + "/health")).json()
                assert health["worker_id"] == refreshed["workerId"]
                named.add(refreshed["workerId"])
            assert len(named) == 2
            for url in [*server.worker_urls, server.url]:
                text = (await http.get(url + "/metrics/prometheus")).text
                families = {f.name: f for f in text_string_to_metric_families(text)}
                uptime = families["queen_uptime_seconds"]
                assert {s.labels["worker_id"] for s in uptime.samples} == named
