"""KV and lock figures in /metrics/prometheus and /metrics: ops by op and verdict, live rows,
permits held."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


async def scrape(client):
    r = await client.get("/metrics/prometheus")
    assert r.status_code == 200
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def value(family, **labels):
    (sample,) = [s for s in family.samples
                 if all(s.labels.get(k) == v for k, v in labels.items())
                 and not s.name.endswith("_created")]
    return sample.value


async def test_kv_and_lock_families(client, broker):
    ops = [{"op": "put", "ns": "m", "key": f"k{n}", "value": n, "forever": True}
           for n in range(3)]
    await client.post("/api/v1/kv", json={"operations": ops})
    await client.post("/api/v1/kv", json={"operations": [
        {"op": "putIfAbsent", "ns": "m", "key": "k0", "value": 1, "forever": True},
        {"op": "get", "ns": "m", "key": "nope"}]})
    await client.post("/api/v1/locks", json={"operations": [
        {"op": "acquire", "name": "a", "ttlSeconds": 60, "owner": "o"},
        {"op": "acquire", "name": "b", "ttlSeconds": 60, "owner": "o"}]})
    await client.post("/api/v1/locks", json={"operations": [
        {"op": "acquire", "name": "a", "ttlSeconds": 60, "owner": "other"}]})
    await broker.kv_sweeper.run_pass()  # reads the live rows and permits
    families = await scrape(client)
    assert value(families["queen_kv_ops"], op="put", verdict="applied") == 3
    assert value(families["queen_kv_ops"], op="putIfAbsent", verdict="exists") == 1
    assert value(families["queen_kv_ops"], op="get", verdict="missing") == 1
    assert value(families["queen_lock_ops"], op="acquire", verdict="ok") == 2
    assert value(families["queen_lock_ops"], op="acquire", verdict="held") == 1
    assert value(families["queen_kv_live_rows"]) == 5
    assert value(families["queen_locks_held"]) == 2
    assert value(families["queen_kv_calls"]) == 4
    assert value(families["queen_maintenance_passes"], service="kv sweep") >= 1
