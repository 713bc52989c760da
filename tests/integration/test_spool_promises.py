"""The spool keeps its promise: transient failures are retried, never failed; failed/ replays
on demand; a short write never answers buffered; a commit whose reply was lost is never
stored twice; spool disk I/O stays off the event loop (issue 8, point 7)."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import subprocess
import sys
import tempfile
import threading

import asyncpg
import httpx
import trio

from queen_trio.broker import open_broker
from queen_trio.push.spool import SpoolRecord, read_records
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.db import db_execute, db_fetchval
from tests.support.processes import broker_env, free_port, serve_command
from tests.support.proxy import ReplyDroppingProxy
from tests.support.storage import POISON_TRIGGER, stored_messages


@contextlib.asynccontextmanager
async def broker_client(settings):
    async with open_broker(settings, settings.database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            yield broker, client


def record(queue, partition, txid, payload=b"1"):
    import uuid_utils

    return SpoolRecord(queue=queue, partition=partition, message_id=uuid_utils.uuid7().bytes,
                       transaction_id=txid, producer_sub=None, trace_id=None, payload=payload,
                       encrypted=False)


async def drained(broker):
    with trio.fail_after(60):
        while broker.spool.statistics().pending:
            await trio.sleep(0.05)


async def test_a_lock_timeout_on_replay_is_retried_not_failed(database_url, caplog):
    caplog.set_level(logging.INFO, logger="queen_trio.spool")
    settings = make_settings(database_url, db_lock_timeout_ms=200)
    async with broker_client(settings) as (broker, client):
        r = await client.post("/api/v1/push", json={"items": [
            {"queue": "locked", "payload": 0, "transactionId": "t0"}]})
        assert r.status_code == 201

        async def hold_partition_row():
            async def work(conn):
                async with conn.transaction():
                    await conn.execute("SELECT 1 FROM queen.partitions FOR UPDATE")
                    await conn.execute("SELECT pg_sleep(60)")

            with contextlib.suppress(asyncpg.QueryCanceledError):
                await broker.db.call(work)

        holder = ("SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' "
                  "AND pid <> pg_backend_pid()")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold_partition_row)
            with trio.fail_after(20):
                while await db_fetchval(broker.db, holder) is None:
                    await trio.sleep(0.01)
            await broker.spool.append([record("locked", "Default", f"t{n}")
                                       for n in range(1, 4)])
            # The replay meets the lock (55P03): it waits its turn instead of failing.
            with trio.fail_after(20):
                while not any("spool replay paused" in m for m in caplog.messages):
                    await trio.sleep(0.05)
            assert broker.spool.statistics().failed == 0
            assert broker.spool.statistics().pending == 3
            await db_fetchval(broker.db, "SELECT pg_cancel_backend($1)",
                              await db_fetchval(broker.db, holder))
        await drained(broker)
        assert broker.spool.statistics().failed == 0
        stored = await stored_messages(broker.db, "locked")
        assert [m.frame.transaction_id for m in stored] == ["t0", "t1", "t2", "t3"]


async def test_failed_records_replay_on_demand_through_the_admin_route(database_url):
    settings = make_settings(database_url)
    async with broker_client(settings) as (broker, client):
        await db_execute(broker.db, POISON_TRIGGER)
        await broker.spool.append([record("poisoned", "poison", "p1")])
        with trio.fail_after(20):
            while broker.spool.statistics().failed == 0:
                await trio.sleep(0.05)
        await db_execute(broker.db, "DROP TRIGGER test_poison ON queen.segments")
        r = await client.post("/api/v1/status/buffers/retry")
        assert r.status_code == 200, r.text
        assert r.json()["requeued"] == 1
        await drained(broker)
        assert broker.spool.statistics().failed == 0
        assert [m.frame.transaction_id
                for m in await stored_messages(broker.db, "poisoned", "poison")] == ["p1"]


def spool_retry(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "queen_trio", "spool", "retry", *args],
                          env=broker_env(env), capture_output=True, text=True, timeout=120)


async def test_spool_retry_replays_the_directory_when_no_broker_runs(database_url, tmp_path):
    spool_dir = tmp_path / "spool"
    settings = make_settings(database_url, spool_dir=spool_dir)
    async with broker_client(settings) as (broker, _):
        await db_execute(broker.db, POISON_TRIGGER)
        await broker.spool.append([record("offline", "poison", "o1")])
        with trio.fail_after(20):
            while broker.spool.statistics().failed == 0:
                await trio.sleep(0.05)
        await db_execute(broker.db, "DROP TRIGGER test_poison ON queen.segments")
    done = await trio.to_thread.run_sync(lambda: spool_retry(
        "--database-url", database_url, env={"FILE_BUFFER_DIR": str(spool_dir)}))
    assert done.returncode == 0, done.stderr
    assert "requeued 1" in done.stdout and "replayed 1" in done.stdout
    assert not list((spool_dir / "failed").glob("*.log"))
    async with broker_client(make_settings(database_url)) as (broker, _):
        assert [m.frame.transaction_id
                for m in await stored_messages(broker.db, "offline", "poison")] == ["o1"]


async def test_spool_retry_asks_the_running_broker(database_url, http_url, broker):
    done = await trio.to_thread.run_sync(lambda: spool_retry(
        "--url", http_url, env={"FILE_BUFFER_DIR": str(broker.spool.directory)}))
    assert done.returncode == 0, done.stderr
    assert "asked the running broker" in done.stdout and "requeued 0" in done.stdout


async def test_a_short_spool_write_never_answers_buffered(tmp_path):
    """A broker whose files may not grow past 64 KB (RLIMIT_FSIZE): the kernel cuts the spool
    write short, as a full disk would."""
    spool_dir = tmp_path / "spool"
    port = free_port()
    limit = 64 * 1024

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    output = tempfile.TemporaryFile()
    # No database: every push goes to the spool.
    env = broker_env({"DATABASE_URL": f"postgresql://nobody@127.0.0.1:{free_port()}/none",
                      "FILE_BUFFER_DIR": str(spool_dir), "LOG_LEVEL": "error"})
    proc = subprocess.Popen(serve_command("--host", "127.0.0.1", "--port", str(port)), env=env,
                            stdout=output, stderr=subprocess.STDOUT, preexec_fn=limited)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            with trio.fail_after(60):
                while True:
                    try:
                        await client.get("/health")
                        break
                    except httpx.TransportError:
                        await trio.sleep(0.1)
            small = {"items": [{"queue": "disk", "payload": {"n": 1}, "transactionId": "a"}]}
            big = {"items": [{"queue": "disk", "payload": {"pad": "x" * 1000},
                              "transactionId": f"big-{n}"} for n in range(100)]}
            r = await client.post("/api/v1/push", json=small)
            assert [e["status"] for e in r.json()] == ["buffered"]
            r = await client.post("/api/v1/push", json=big)
            assert r.status_code == 503, r.text
            assert {e["status"] for e in r.json()} == {"failed"}
            assert "spool write failed" in r.json()[0]["error"]
            r = await client.post("/api/v1/push", json={"items": [
                {"queue": "disk", "payload": {"n": 2}, "transactionId": "b"}]})
            assert [e["status"] for e in r.json()] == ["buffered"]
    finally:
        proc.terminate()
        proc.wait(30)
        output.close()
    # What was answered buffered is all there, whole; the short write left nothing behind.
    # (Each worker keeps its own spool directory under it, with more than one worker.)
    records = [r for path in sorted(spool_dir.rglob("spool-*.log")) for r in read_records(path)]
    assert [r.transaction_id for r in records] == ["a", "b"]


async def test_a_commit_whose_reply_was_lost_is_stored_once(database_url, nursery):
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(database_url)
    proxy = ReplyDroppingProxy(parts.port or 5432)
    port = await nursery.start(proxy.run)
    proxied = urlunsplit(parts._replace(netloc=f"{parts.netloc.rsplit(':', 1)[0]}:{port}"))
    settings = make_settings(proxied, db_pool_size=2, push_shards=1)
    async with broker_client(settings) as (broker, client):
        await client.post("/api/v1/configure", json={
            "queue": "once", "options": {"dedupWindowSeconds": 0}})
        for n in range(2):  # every pool connection has push_bundle prepared
            r = await client.post("/api/v1/push", json={"items": [
                {"queue": "once", "payload": n, "transactionId": f"warm-{n}"}]})
            assert r.status_code == 201
        await trio.testing.wait_all_tasks_blocked(cushion=0.1)
        proxy.drop_next_reply()
        r = await client.post("/api/v1/push", json={"items": [
            {"queue": "once", "payload": 2, "transactionId": "lost-reply"}]})
        assert proxy.dropped.is_set()
        # The commit landed, but the broker could not know: it spooled the item.
        assert [e["status"] for e in r.json()] == ["buffered"]
        await drained(broker)
        stored = await stored_messages(broker.db, "once")
        assert [m.frame.transaction_id for m in stored].count("lost-reply") == 1


async def test_spool_disk_io_runs_in_worker_threads(database_url):
    main = threading.get_ident()
    on_loop: list[str] = []
    watching = False

    def audit(event, args):
        if watching and event == "open" and threading.get_ident() == main:
            path = str(args[0])
            if "queen-spool" in path or path.endswith(".log"):
                on_loop.append(path)

    sys.addaudithook(audit)
    settings = make_settings(database_url)
    watching = True
    try:
        async with broker_client(settings) as (broker, _):
            await broker.spool.append([record("threads", "Default", "t1")])
            await drained(broker)
            await db_execute(broker.db, POISON_TRIGGER)
            await broker.spool.append([record("threads", "poison", "t2")])
            with trio.fail_after(20):
                while broker.spool.statistics().failed == 0:
                    await trio.sleep(0.05)
    finally:
        watching = False
    assert on_loop == []
    assert len(os.listdir(settings.spool_directory / "failed")) == 2  # the records and why


async def test_records_appended_while_a_replay_runs_all_land_in_order(database_url):
    """Appends race the replay: every round seals the file being appended to and replays the
    files sealed then, never one that a later append reopens (a replay that took the new file
    removed it with the records appended after its read: lost, and the spool's counts forgot
    the partition, so later pushes committed ahead of what was left)."""
    settings = make_settings(database_url)
    per_partition, partitions = 60, 4
    async with broker_client(settings) as (broker, _):

        async def appender(partition: str) -> None:
            for n in range(per_partition):
                await broker.spool.append([record("race", partition, f"{partition}-{n}",
                                                  payload=str(n).encode())])
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            for p in range(partitions):
                nursery.start_soon(appender, f"p{p}")
        await drained(broker)
        stored = {f"p{p}": [m.frame.transaction_id
                            for m in await stored_messages(broker.db, "race", f"p{p}")]
                  for p in range(partitions)}
    assert stored == {f"p{p}": [f"p{p}-{n}" for n in range(per_partition)]
                      for p in range(partitions)}
