"""The dashboard's KV, Locks and Consumers pages in a real Chromium, against what the API
returns (screenshots with QUEEN_SCREENSHOT_DIR)."""

from __future__ import annotations

import base64
import json
import time


def supervision_ops(group: str, instance: str, *, beat: float, state: str = "running") -> list:
    document = {"schema": "queen.consumer.status/v1", "instance_id": instance,
                "engine": "python", "hostname": "worker-host", "pid": 4242, "state": state,
                "updated_at_epoch": int(beat), "started_at_epoch": int(beat) - 90,
                "uptime_seconds": 90, "configuration": {"heartbeat_timeout": 30},
                "pool_status": [{"name": "consumer", "queue": "orders", "consumer_group": "billing",
                                 "desired": 2, "running": 2, "busy": 1, "completed": 17,
                                 "failed": 1}]}
    raw = json.dumps(document).encode()
    slot = f"{group}/{instance}"
    return [{"op": "put", "ns": "queen-supervisor", "key": f"{slot}/head", "ttlSeconds": 60,
             "value": {"format": "queen.supervisor.remote-status/v1", "write": "w1",
                       "chunks": 1, "bytes": len(raw)}},
            {"op": "put", "ns": "queen-supervisor", "key": f"{slot}/chunk/0000",
             "ttlSeconds": 60, "value": {"write": "w1", "index": 0,
                                         "data": base64.b64encode(raw).decode()}}]


async def test_kv_locks_and_consumers_pages(browser, client, http_url):
    now = time.time()
    ops = [{"op": "put", "ns": "app", "key": "config/<b>x</b>", "value": {"mode": "fast"},
            "forever": True},
           {"op": "put", "ns": "app", "key": "greeting", "value": "hello", "ttlSeconds": 600},
           *supervision_ops("billing-app", "a" * 32, beat=now),
           *supervision_ops("billing-app", "b" * 32, beat=now - 120)]
    assert (await client.post("/api/v1/kv", json={"operations": ops})).status_code == 200
    grant = (await client.post("/api/v1/locks", json={"operations": [
        {"op": "acquire", "name": "nightly-report", "ttlSeconds": 600, "owner": "host:1:abc"}]})
    ).json()["results"][0]

    await browser.start(http_url, "kv")
    await browser.loaded("kv")
    assert await browser.console_errors() == []
    spaces = (await client.get("/api/v1/resources/kv")).json()["namespaces"]
    for space in spaces:
        row = await browser.text(f"tr[data-row='{space['namespace']}']")
        assert row.startswith(space["namespace"]) and str(space["rows"]) in row.split()
    await browser.screenshot("kv")

    await browser.goto("kv?ns=app")
    await browser.loaded("kv")
    await browser.wait(lambda d: d.find_elements("css selector", "tr[data-row='greeting']"))
    assert "hello" in await browser.text("#main")
    # A hostile key is text, not markup.
    assert "config/<b>x</b>" in await browser.text("#main")
    await browser.screenshot("kv-namespace")

    await browser.goto("locks")
    await browser.loaded("locks")
    row = await browser.text("tr[data-row='nightly-report#0']")
    assert "host:1:abc" in row and f"{grant['token']:,}" in row.replace("\u202f", ",")
    await browser.screenshot("locks")

    await browser.goto("consumers")
    await browser.loaded("consumers")
    main = await browser.text("#main")
    assert "billing-app" in main and "1 live, 1 stale" in main
    assert "stale" in await browser.text(f"tr[data-row='{'b' * 32}']")
    assert "running" in await browser.text(f"tr[data-row='{'a' * 32}']")
    assert await browser.console_errors() == []
    await browser.screenshot("consumers")
