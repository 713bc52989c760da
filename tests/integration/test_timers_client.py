"""The official Python client (queen-mq 2.6.0), unchanged: every timer call and status, the
transaction rider, fetch and changed_since (tests/support/clients/timers_flow.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

CLIENTS = Path(__file__).parent.parent / "support" / "clients"


async def test_the_official_client_schedules_cancels_peeks_lists_and_reads_by_offset(http_url):
    done = await trio.run_process([sys.executable, str(CLIENTS / "timers_flow.py"), http_url],
                                  capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    r = json.loads(done.stdout.decode().strip().splitlines()[-1])
    s = r["schedule"]
    assert s["_bool"] is True and s["status"] == "scheduled" and s["txn"] == "cf-1"
    assert s["timerKey"] == "order-1/expire" and s["messageId"] and s["deliverAt"]
    assert r["reschedule"]["status"] == "rescheduled" and r["reschedule"]["txn"] == "cf-2"
    assert r["peek"]["found"] is True and r["peek"]["txn"] == "cf-2"
    assert r["peek_missing"]["_bool"] is False and r["peek_missing"]["found"] is False
    assert r["cancel"]["status"] == "cancelled" and r["cancel"]["txn"] == "cf-3"
    assert r["cancel_again"]["status"] == "absent" and r["cancel_again"]["_bool"] is False
    assert r["cancel_again"]["txn"] == "cf-3"
    assert [row["timerKey"] for row in r["list"]["rows"]] == ["k0", "k1"]
    assert r["list"]["truncated"] is True and r["list"]["nextAfter"] == "k1"
    assert r["list_all"] == ["k0", "k1", "k2", "k3", "k4"]
    assert [x["status"] for x in r["batch"]] == ["cancelled", "cancelled"]
    assert r["builder_zstd"]["status"] == "scheduled"
    delivered = r["delivered"]
    assert [(txn, data) for txn, data, _ in delivered] == [
        ("cf-2", '{"order": 1, "v": 2}'), ("cf-4", '{"b": 1}')]
    # The promised id is the delivered one (fired on time into a quiet partition).
    assert delivered[1][2] == r["builder_zstd"]["messageId"]
    assert r["tx"]["success"] is True
    assert [x["type"] for x in r["tx"]["results"]] == ["ack", "push", "timer"]
    assert r["tx"]["results"][2]["status"] == "scheduled"
    assert r["tx_delivered"] == ['{"pushed": 1}', '{"timer": 1}']
    assert r["tx_alone"]["success"] is True
    assert r["tx_alone"]["results"][0]["status"] == "scheduled"

    f = r["fetch"]
    assert f["a"] == {"offsets": [0, 1, 2, 3, 4], "payloads": [{"n": n} for n in range(5)],
                      "hw": 5, "ls": 0, "next": 5}
    assert f["b"]["offsets"] == [0] and f["b"]["hw"] == 1
    assert f["never"] == {"offsets": [], "payloads": [], "hw": 0, "ls": 0, "next": 0}
    assert r["fetch_from_3"] == [3, 4]
    # A budget of one byte: the first record of each call still comes, one per call.
    assert r["fetch_small_budget"] == [0, 1, 2, 3, 4]
    assert r["fetch_unknown_queue"] == {"a": 0}
    assert r["changed_all"] == ["a", "b"]
    assert len(r["safe_time"]) == len("2026-01-01T00:00:00.000000Z")
    assert r["changed_after_safe"] == []
    assert r["changed_after_write"] == ["b"]
    assert r["changed_unknown"] == []
