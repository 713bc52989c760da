"""The official streaming SDK (queen-mq 2.6.0 `queen.streams`), unchanged, against broker
processes: with 1 and 2 workers, and two brokers on one database (docs/streams.md)."""

from __future__ import annotations

import datetime as dt
import json
import math
import signal
import sys
from pathlib import Path

import httpx
import trio

from tests.support.processes import broker_process, free_port

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
        # At least the bucket and the whole tokens refilled from the first pass (the bucket's
        # state starts there) to the stop, less two lease periods: a token is spent at the
        # next period's pop, and the last period's after the runner stopped.
        refilled = math.floor(g["refill"] * (g["first_pass_to_stop"] - 2))
        assert len(passed) >= g["capacity"] + refilled, g
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
        # Both at once, so each broker's cycles interleave with the other's in the database.
        async with trio.open_nursery() as nursery:
            reports: dict[str, dict] = {}

            async def flow(key: str, url: str, *names: str) -> None:
                reports[key] = await run_flow(url, *names)

            nursery.start_soon(flow, "a", url_a, "stateless", "restart")
            nursery.start_soon(flow, "b", url_b, "stateless", "windows")
        check_stateless(reports["a"]["stateless"])
        check_restart(reports["a"]["restart"])
        check_stateless(reports["b"]["stateless"])
        check_windows(reports["b"]["windows"])


def sdk_order(message: dict) -> tuple[int, str]:
    """The SDK's order within a partition (queen/streams/runtime/runner.py): createdAt cut to
    the millisecond, then the id."""
    at = dt.datetime.fromisoformat(message["createdAt"].replace("Z", "+00:00"))
    return int(at.timestamp() * 1000), message["id"]


async def test_the_sdk_order_is_offset_order_with_two_workers_and_concurrent_pushes(
        database_url):
    """Producers on both workers push into one partition while a group that joins in the
    middle pops and acks: what it receives, in delivery (offset) order, is in the SDK's order,
    each message once, none skipped (docs/decisions.md#commit-times-a-millisecond-apart)."""
    env = {"DATABASE_URL": database_url}
    total = 8 * 40
    async with broker_process(env, workers=2) as (url, _):
        delivered: list[dict] = []

        async def producer(k: int) -> None:
            async with httpx.AsyncClient(base_url=url) as c:
                for i in range(40):
                    r = await c.post("/api/v1/push", json={"items": [
                        {"queue": "order.src", "partition": "p", "payload": {"k": k, "i": i}}]})
                    assert r.status_code == 201, r.text

        async def consumer() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=30) as c:
                while len(delivered) < total:
                    r = await c.get("/api/v1/pop/queue/order.src", params={
                        "consumerGroup": "streams.order", "batch": 50, "wait": "true",
                        "timeout": 500})
                    if r.status_code == 204:
                        continue
                    msgs = r.json()["messages"]
                    delivered.extend(msgs)
                    ack = await c.post("/api/v1/ack/batch", json={
                        "consumerGroup": "streams.order", "acknowledgments": [
                            {"transactionId": m["transactionId"],
                             "partitionId": m["partitionId"], "leaseId": m["leaseId"],
                             "status": "completed"} for m in msgs]})
                    assert ack.status_code == 200, ack.text
                    assert all(x["success"] for x in ack.json()), (ack.text, msgs)

        with trio.move_on_after(45):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consumer)
                async with trio.open_nursery() as producers:
                    for k in range(8):
                        producers.start_soon(producer, k)
    assert len(delivered) == total, f"{len(delivered)} of {total} delivered"
    keys = [sdk_order(m) for m in delivered]
    assert keys == sorted(keys) and len(set(keys)) == total
    assert sorted((m["data"]["k"], m["data"]["i"]) for m in delivered) == sorted(
        (k, i) for k in range(8) for i in range(40))
    for k in range(8):  # each producer's own pushes in its order
        assert [m["data"]["i"] for m in delivered if m["data"]["k"] == k] == list(range(40))
    # What makes it so: the partition's segments were committed more than a millisecond apart.
    gaps = await commit_gaps_ms(database_url)
    assert len(gaps) >= 1 and all(gap >= 1.001 for gap in gaps), gaps


async def commit_gaps_ms(database_url: str) -> list[float]:
    """The gaps (ms) between successive commit times of order.src/p, read with asyncpg in a
    thread of its own (the test runs on Trio)."""
    import asyncio

    import asyncpg

    async def read() -> list[float]:
        conn = await asyncpg.connect(database_url)
        try:
            rows = await conn.fetch("""
                SELECT extract(epoch FROM s.created_at - lag(s.created_at)
                                OVER (ORDER BY s.first_offset)) * 1000 AS gap
                  FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id
                  JOIN queen.queues q ON q.id = p.queue_id
                 WHERE q.name = 'order.src' AND p.name = 'p'""")
        finally:
            await conn.close()
        return [float(r["gap"]) for r in rows if r["gap"] is not None]

    return await trio.to_thread.run_sync(lambda: asyncio.run(read()))


async def test_a_sigkilled_broker_mid_stream_loses_and_doubles_no_window(database_url):
    """The broker is killed with SIGKILL while the SDK streams (source leaseTime 2 s) and
    started again on the same port and database: the sink holds exactly one result per
    window (docs/decisions.md#streams-replayed-cycles)."""
    port = free_port()
    env = {"DATABASE_URL": database_url}
    url = f"http://127.0.0.1:{port}"
    report: dict = {}

    async def flow() -> None:
        report.update(await run_flow(url, "crash"))

    with trio.fail_after(55):
        async with trio.open_nursery() as nursery:
            async with broker_process(env, port=port) as (_, proc):
                nursery.start_soon(flow)
                # Killed mid-stream, not mid-registration: the SDK gives up on registering
                # after three quick retries (a loaded machine can take seconds to start the
                # flow), while its cycle loop rides out an outage.
                async with httpx.AsyncClient(base_url=url) as client:
                    while not any(query["name"] == "crash" for query in
                                  (await client.get("/streams/v1/queries")).json()["queries"]):
                        await trio.sleep(0.2)
                await trio.sleep(2)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            async with broker_process(env, port=port):
                while not report:
                    await trio.sleep(0.2)
    expected = sorted(sum(w * 100 + i for i in range(5)) for w in range(8))
    assert report["crash"]["windows"] == expected
