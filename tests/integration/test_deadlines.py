"""Everything shielded has a deadline: a busy pool is overload (503, Retry-After, never
spooled), and SIGTERM ends a broker whose PostgreSQL is frozen (issue 8, point 6)."""

from __future__ import annotations

import httpx
import trio

from queen_trio.broker import open_broker
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.db import db_fetchval


async def test_a_pool_with_no_free_connection_is_overload_not_an_outage(database_url):
    settings = make_settings(database_url, db_pool_size=2, push_shards=1,
                             db_connection_timeout_ms=300)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            assert (await client.post("/api/v1/push", json={"items": [
                {"queue": "busy", "payload": 0}]})).status_code == 201

            async def hold():
                await broker.db.call(lambda conn: conn.execute("SELECT pg_sleep(3)"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold)
                nursery.start_soon(hold)
                while broker.db.statistics().in_flight < 2:
                    await trio.sleep(0.01)
                r = await client.post("/api/v1/push", json={"items": [
                    {"queue": "busy", "payload": 1}]})
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "1"
                (entry,) = r.json()
                assert entry["status"] == "failed"
                assert entry["error"].startswith("broker overloaded")
                assert broker.spool.statistics().pending == 0
                r = await client.get("/api/v1/pop/queue/busy")
                assert r.status_code == 503 and r.headers["retry-after"] == "1"
                assert r.json()["error"].startswith("broker overloaded")
        assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 1


async def test_sigterm_ends_a_broker_whose_postgresql_is_frozen(cluster_path, workers):
    import os
    import signal
    import time

    from queen_trio.storage.embedded import EmbeddedPostgres
    from tests.support.processes import process_tree, running_broker

    # A private cluster: freezing it leaves the suite's own server alone.
    cluster = EmbeddedPostgres(cluster_path)
    url = await trio.to_thread.run_sync(cluster.start)
    frozen: list[int] = []
    try:
        async with running_broker({"DATABASE_URL": url}, workers=workers) as broker:
            async with httpx.AsyncClient(base_url=broker.url, timeout=120) as client:
                r = await client.post("/api/v1/push", json={"items": [
                    {"queue": "ice", "payload": 1}]})
                assert r.status_code == 201

                async def request(method, path, **kwargs):
                    try:
                        await client.request(method, path, **kwargs)
                    except httpx.HTTPError:
                        pass  # the broker goes away under it

                postmaster = cluster.postmaster()
                assert postmaster is not None
                frozen = process_tree(postmaster.pid)
                for pid in frozen:
                    os.kill(pid, signal.SIGSTOP)
                async with trio.open_nursery() as nursery:
                    # A push whose commit and a pop whose claim can never finish.
                    nursery.start_soon(lambda: request("POST", "/api/v1/push", json={
                        "items": [{"queue": "ice", "payload": 2}]}))
                    nursery.start_soon(lambda: request("GET", "/api/v1/pop/queue/ice"))
                    await trio.sleep(1)  # let both reach the database
                    started = time.monotonic()
                    broker.proc.send_signal(signal.SIGTERM)
                    # Generous: the bound is the graceful timeout (10 s) plus 10 s. (Shielded
                    # calls alone would hold the exit for their 33 s deadline.)
                    await broker.wait_exit(within=30)
                    print(f"SIGTERM to exit with PostgreSQL frozen: "
                          f"{time.monotonic() - started:.1f} s")
                    nursery.cancel_scope.cancel()
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        await trio.to_thread.run_sync(lambda: cluster.stop(mode="immediate"))
