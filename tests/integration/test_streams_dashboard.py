"""The dashboard's Streams pages in a real headless Chromium (tests/support/browser.py)."""

from __future__ import annotations

from tests.support.cli import gather, run_cli


async def seed_stream(client) -> dict:
    """A query with state on two source partitions (one with a watermark) and one message
    left behind its consumer group."""
    reg = (await client.post("/streams/v1/queries", json={
        "name": "orders.per_minute", "source_queue": "orders", "sink_queue": "orders.totals",
        "config_hash": "abc"})).json()
    await client.post("/api/v1/push", json={"items": [
        {"queue": "orders", "partition": p, "payload": {"n": i}}
        for p in ("eu", "us") for i in range(3)]})
    msgs = (await client.get("/api/v1/pop/queue/orders", params={
        "batch": 10, "partitions": 2, "consumerGroup": "streams.orders.per_minute",
        "wait": "false"})).json()["messages"]
    by_partition: dict[str, list] = {}
    for m in msgs:
        by_partition.setdefault(m["partitionId"], []).append(m)
    for n, (pid, group) in enumerate(sorted(by_partition.items())):
        ops = [{"type": "upsert", "key": f"tumb:60\u001f2026-01-01T00:0{k}:00.000Z\u001f{pid}",
                "value": {"acc": {"count": k}, "windowStart": k, "windowEnd": k + 1}}
               for k in range(n + 1)]
        if n == 0:
            ops.append({"type": "upsert", "key": "__wm__",
                        "value": {"eventTimeMs": 1_767_225_600_000}})
        last = group[-2]  # one message stays behind
        reply = (await client.post("/streams/v1/cycle", json={
            "query_id": reg["query_id"], "partition_id": pid,
            "consumer_group": "streams.orders.per_minute", "state_ops": ops,
            "push_items": [{"queue": "orders.totals", "partition": last["partition"],
                            "payload": {"count": n}}],
            "ack": {"transactionId": last["transactionId"], "leaseId": last["leaseId"]}})).json()
        assert reply["success"] is True, reply
    return reg


async def test_the_streams_pages_show_queries_and_their_state_shards(browser, client, http_url):
    await seed_stream(client)
    await browser.start(http_url)
    await browser.goto("streams")
    await browser.loaded("streams")
    assert await browser.console_errors() == []
    assert await browser.unlabelled() == []
    (query,) = (await client.get("/streams/v1/queries")).json()["queries"]
    row = await browser.text(f"tr[data-row='{query['queryId']}']")
    assert row.split()[:4] == ["orders.per_minute", "orders", "orders.totals",
                               "streams.orders.per_minute"]
    assert query["lag"] == 2 and query["stateRows"] == 4 and query["shards"] == 2
    assert row.split()[4:7] == ["2", "2", "4"]  # lag, shards, rows
    await browser.screenshot("streams")

    await browser.goto("streams/orders.per_minute")
    await browser.loaded("stream")
    assert await browser.console_errors() == []
    detail = (await client.get("/streams/v1/queries/orders.per_minute")).json()
    assert await browser.text("[data-tile=rows] dd") == "4"
    assert await browser.text("[data-tile=lag] dd") == "2"
    for shard in detail["stateShards"]:
        text = await browser.text(f"tr[data-row='{shard['partitionId']}']")
        assert text.split()[:3] == [shard["partition"], "1", str(shard["stateRows"])]
    (with_wm,) = [s for s in detail["stateShards"] if s["watermarkMs"] is not None]
    assert with_wm["watermarkMs"] == 1_767_225_600_000
    assert "Jan 1, 00:00:00" in await browser.text(f"tr[data-row='{with_wm['partitionId']}']")
    assert "streams.orders.per_minute" in await browser.text("#main")
    await browser.screenshot("stream")

    await browser.goto("streams/nope")
    await browser.loaded("stream")
    assert "No streams query nope." in await browser.text("#main")


async def test_the_cli_lists_queries_shows_state_and_deletes(client, http_url):
    await seed_stream(client)
    s = ("--server", http_url)
    listed, table, state, one, missing = await gather(
        run_cli("streams", "list", *s, "-o", "json"),
        run_cli("streams", "list", *s, "-o", "table"),
        run_cli("streams", "state", "orders.per_minute", *s, "-o", "json"),
        run_cli("streams", "state", "orders.per_minute", "--partition", "eu", *s, "-o", "json"),
        run_cli("streams", "state", "nope", *s))
    (query,) = listed.json()
    assert (query["name"], query["lag"], query["stateRows"], query["shards"]) == (
        "orders.per_minute", 2, 4, 2)
    assert table.status == 0 and "orders.per_minute" in table.out and "STATE ROWS" in table.out
    assert sorted(row["partition"] for row in state.json()["stateShards"]) == ["eu", "us"]
    assert [row["partition"] for row in one.json()["stateShards"]] == ["eu"]
    assert missing.status == 5 and "no streams query named 'nope'" in missing.err
    deleted = await run_cli("streams", "delete", "orders.per_minute", "--yes", *s)
    assert deleted.status == 0 and "deleted" in deleted.out
    assert (await run_cli("streams", "list", *s, "-o", "json")).json() == []
    assert (await run_cli("streams", "delete", "orders.per_minute", "--yes", *s)).status == 5
