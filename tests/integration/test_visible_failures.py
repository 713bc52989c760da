"""Quiet failures become visible: periodic services log failures with their traceback,
rate-limited; the spool's path is for admins; an open port without authentication is
warned about at boot (issue 8, point 10)."""

from __future__ import annotations

import logging

import httpx
import jwt
import trio

from queen_trio.broker import open_broker
from queen_trio.ops.maintenance import RetentionService
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.db import db_execute
from tests.support.processes import running_broker

SECRET = "test-secret-with-enough-length-0123456789"


async def test_a_periodic_pass_that_keeps_failing_is_logged_once_with_its_traceback(
        broker, caplog):
    caplog.set_level(logging.WARNING, logger="queen_trio.maintenance")
    await db_execute(broker.db, "DROP FUNCTION queen.retention_pass(timestamptz, integer)")
    retention = RetentionService(broker.db, interval=0.01, batch=10)
    async with trio.open_nursery() as nursery:
        await nursery.start(retention.run)
        with trio.fail_after(20):
            while retention.statistics().failures < 5:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    records = [r for r in caplog.records if r.getMessage() == "retention pass failed"]
    assert len(records) == 1, "a failure that repeats is logged once a minute"
    assert records[0].exc_info is not None
    assert "retention_pass" in records[0].error


async def test_the_spool_directory_is_shown_to_admins_only(database_url):
    import time

    env = {"JWT_ENABLED": "true", "JWT_SECRET": SECRET}
    from queen_trio.settings import AuthSettings

    settings = make_settings(database_url, auth=AuthSettings.from_env(env))

    def bearer(role):
        token = jwt.encode({"sub": "s", "role": role, "exp": time.time() + 300}, SECRET,
                           algorithm="HS256")
        return {"authorization": f"Bearer {token}"}

    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            r = await client.get("/api/v1/status/buffers", headers=bearer("read-only"))
            assert r.status_code == 200
            assert "directory" not in r.json()
            r = await client.get("/api/v1/status/buffers", headers=bearer("admin"))
            assert r.json()["directory"] == str(broker.spool.directory.absolute())
            assert r.json()["directory"].startswith("/")


async def test_an_open_port_without_authentication_is_warned_about(database_url, workers):
    async with running_broker({"DATABASE_URL": database_url}, args=["--host", "0.0.0.0"],
                              workers=workers) as open_broker_process:
        await open_broker_process.wait_for_output("authentication off")
    async with running_broker({"DATABASE_URL": database_url}, workers=workers) as loopback:
        pass
    assert "authentication off" not in loopback.output()


async def test_a_broker_listens_on_loopback_unless_told_otherwise(database_url):
    # Issue 25, point 1: no --host, no HOST: 127.0.0.1, as PostgreSQL and Redis do, and so no
    # warning about an open port.
    env = {"DATABASE_URL": database_url, "HOST": ""}
    async with running_broker(env, host=None) as broker:
        port = broker.url.rsplit(":", 1)[1]
        await broker.wait_for_output("queen-trio listening")
    assert f"http://127.0.0.1:{port}" in broker.output()
    assert "authentication off" not in broker.output()
