"""The official streaming SDK (queen-mq 2.6.0 `queen.streams`), unchanged, against broker
processes: with 1 and 2 workers, and two brokers on one database (docs/streams.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from tests.support.processes import broker_process

CLIENTS = Path(__file__).parent.parent / "support" / "clients"


async def run_flow(url: str, *scenarios: str) -> dict:
    done = await trio.run_process([sys.executable, str(CLIENTS / "streams_flow.py"), url,
                                   *scenarios],
                                  capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def in_order(rows: list[dict], field: str) -> dict[str, list]:
    by: dict[str, list] = {}
    for row in rows:
        by.setdefault(row["partition"], []).append(row["data"][field])
    return by


def check_stateless(r: dict) -> None:
    assert r["errors"] == 0
    kept = [n for n in range(20) if n % 3]
    assert in_order(r["a"], "n") == {p: kept for p in ("p0", "p1", "p2")}
    assert all(row["data"]["sq"] == row["data"]["n"] ** 2 for row in r["a"])
    assert {p: v for p, v in in_order(r["b"], "n").items()} == {
        p: [n for n in range(20) for _ in (0, 1)] for p in ("p0", "p1", "p2")}


def check_windows(r: dict) -> None:
    assert r["errors"] == 0
    amounts = {w: [w * 100 + i for i in range(5)] for w in range(4)}
    assert r["tumbling"] == [{"count": 5, "sum": sum(amounts[w])} for w in range(4)]
    # Windows of 20 s every 10 s: [-10,10) holds window 0, [0,20) windows 0-1, ... [30,50) 3.
    sliding = [amounts[0]] + [amounts[w] + amounts[w + 1] for w in range(3)] + [amounts[3]]
    assert sorted((x["count"], x["sum"]) for x in r["sliding"]) == sorted(
        (len(a), sum(a)) for a in sliding)
    # Events 1 s apart within a window, 6 s between windows: a 3 s gap makes four sessions.
    assert r["session"] == [{"count": 5, "sum": sum(amounts[w])} for w in range(4)]
    assert r["cron"] == [{"count": 20, "sum": sum(sum(a) for a in amounts.values())}]
    keyed = sorted((x["count"], x["sum"]) for x in r["keyed"])
    expected = []
    for w in range(4):
        odd = [a for a in amounts[w] if a % 2]
        even = [a for a in amounts[w] if not a % 2]
        expected += [(len(odd), sum(odd)), (len(even), sum(even))]
    assert keyed == sorted(expected)


def check_late(r: dict) -> None:
    drop, include = r["drop"], r["include"]
    assert drop["first"] == [{"count": 2, "sum": 3}] and drop["then"] == []
    assert drop["late"] == 1 and drop["errors"] == 0
    assert include["first"] == [{"count": 2, "sum": 3}]
    assert include["then"] == [{"count": 1, "sum": 7}] and include["errors"] == 0


def check_idle(r: dict) -> None:
    assert sum(r["counts"]) == 5 and r["flushes"] >= 1 and r["errors"] == 0


def check_gate(r: dict) -> None:
    for name in ("fast", "slow"):
        g = r[name]
        passed = g["passed"]
        assert passed == list(range(len(passed))), "FIFO, nothing twice"
        bound = g["capacity"] + g["refill"] * g["elapsed"]
        assert len(passed) <= bound, g
        # At least that minus one bucket and the last lease period's refill (its tokens are
        # spent at the next period, after the runner stopped).
        assert len(passed) >= bound - g["capacity"] - g["refill"] * 2, g
        assert g["dead_letters"] == 0 and g["errors"] == 0, g


def check_restart(r: dict) -> None:
    amounts = {w: [w * 100 + i for i in range(5)] for w in range(4)}
    every = [{"count": 5, "sum": sum(amounts[w])} for w in range(4)]
    assert r["first"] + r["second"] == every
    assert r["errors"] == 0
    assert r["refused"] and "config_hash mismatch" in r["refused"].lower()


def check_many(r: dict) -> None:
    assert r["errors"] == 0
    assert len(r["totals"]) == 20
    for p in range(20):
        assert r["totals"][f"p{p:02d}"] == {
            "count": 250, "sum": sum(p * 1000 + i for i in range(250)), "windows": 3}


CHECKS = {"stateless": check_stateless, "windows": check_windows, "late": check_late,
          "idle": check_idle, "gate": check_gate, "restart": check_restart, "many": check_many}


async def check_all(url: str, *names: str) -> None:
    report = await run_flow(url, *names)
    for name in names:
        CHECKS[name](report[name])


async def test_the_sdk_gates(database_url, workers):
    # The gate's bounds are about lease periods: measured alone, not beside the others.
    async with broker_process({"DATABASE_URL": database_url}, workers=workers) as (url, _):
        await check_all(url, "gate")


async def test_the_sdk_stateless_windows_late_events_and_idle_flush(database_url, workers):
    async with broker_process({"DATABASE_URL": database_url}, workers=workers) as (url, _):
        await check_all(url, "stateless", "windows", "late", "idle")


async def test_the_sdk_restart_recovery_and_20_partitions(database_url, workers):
    async with broker_process({"DATABASE_URL": database_url}, workers=workers) as (url, _):
        await check_all(url, "restart", "many")


async def test_the_sdk_with_two_brokers_on_one_database(database_url):
    """Two flows, one through each broker, on one database: queries, state and cursors live
    in the database only."""
    env = {"DATABASE_URL": database_url}
    async with broker_process(env) as (url_a, _), broker_process(env) as (url_b, _):
        report_a = await run_flow(url_a, "stateless", "many")
        report_b = await run_flow(url_b, "stateless", "windows")
        check_stateless(report_a["stateless"])
        check_many(report_a["many"])
        check_stateless(report_b["stateless"])
        check_windows(report_b["windows"])
