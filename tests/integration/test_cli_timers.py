"""`queen-trio timers list|peek|cancel` and `queen-trio fetch` against a real broker
(docs/cli.md#timers-and-offset-reads)."""

from __future__ import annotations

import base64
import json

from tests.support.cli import gather, run_cli
from tests.support.consuming import push


async def test_timers_commands_and_fetch(http_url, client):
    ops = [{"op": "schedule", "queue": "cli.t", "timerKey": key,
            "payload": base64.b64encode(json.dumps({"k": key}).encode()).decode(),
            "delayMs": 3_600_000, "txn": f"txn-{key}"} for key in ("a/1", "b", "c")]
    assert (await client.post("/api/v1/timers", json={"operations": ops})).status_code == 200
    await push(client, "cli.log", *[{"n": n} for n in range(5)], partition="p")
    s = ("--server", http_url)
    (summary, listed, table, peeked, missing, fetched, fetched_from, out_of_range,
     unknown) = await gather(
        run_cli("timers", "list", *s, "-o", "json"),
        run_cli("timers", "list", "cli.t", "--limit", "2", *s, "-o", "json"),
        run_cli("timers", "list", "cli.t", *s, "-o", "table"),
        run_cli("timers", "peek", "cli.t", "a/1", *s, "-o", "json"),
        run_cli("timers", "peek", "cli.t", "zzz", *s, "-o", "json"),
        run_cli("fetch", "cli.log", "--partition", "p", *s),
        run_cli("fetch", "cli.log", "--partition", "p", "--offset", "3", *s),
        run_cli("fetch", "cli.log", "--partition", "p", "--offset", "9", *s),
        run_cli("fetch", "nope", *s))
    cancelled, absent = await gather(
        run_cli("timers", "cancel", "cli.t", "c", *s, "-o", "json"),
        run_cli("timers", "cancel", "cli.t", "zzz", "--txn", "mine", *s, "-o", "json"))
    assert summary.status == 0
    assert [(q["queue"], q["pending"]) for q in summary.json()] == [("cli.t", 3)]
    assert [r["timerKey"] for r in listed.json()] == ["a/1", "b"]
    assert "a/1" in table.out and "KEY" in table.out
    assert peeked.status == 0 and peeked.json()["payload"] == {"k": "a/1"}
    assert missing.status == 5
    assert cancelled.status == 0 and cancelled.json()["status"] == "cancelled"
    assert absent.status == 4 and absent.json()["txn"] == "mine"
    assert fetched.status == 0
    assert [r["payload"] for r in fetched.lines()] == [{"n": n} for n in range(5)]
    assert [r["offset"] for r in fetched_from.lines()] == [3, 4]
    assert out_of_range.status == 1 and "OFFSET_OUT_OF_RANGE" in out_of_range.err
    assert unknown.status == 5
