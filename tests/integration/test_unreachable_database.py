"""A database that cannot be reached (a mistyped host or port) is impossible to miss, and
never a traceback (issue 25, point 3): the broker still starts and spools (docs/decisions.md#booting-with-the-database-down),
says so in one line naming the host, the port and the error (at most every 30 s), and /health
gives the reason; `--require-database` refuses to start with that line instead."""

from __future__ import annotations

import json

import httpx
import pytest
import trio

from tests.support.processes import free_port, refused_start, running_broker


def nowhere() -> tuple[str, int]:
    port = free_port()  # nothing listens there
    return f"postgresql://queen:secret@127.0.0.1:{port}/queen", port


def log_lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


async def test_a_broker_whose_database_is_unreachable_says_why_once_without_a_traceback():
    url, port = nowhere()
    async with running_broker({"DATABASE_URL": url, "LOG_FORMAT": "json"}, health=503) as broker:
        async with httpx.AsyncClient(base_url=broker.url) as client:
            r = await client.post("/api/v1/push", json={"items": [{"queue": "q", "payload": 1}]})
            assert r.status_code == 201 and r.json()[0]["status"] == "buffered"
            health = (await client.get("/health")).json()
            # Every field /health had, plus the reason.
            assert health["status"] == "unhealthy" and health["database"] == "disconnected"
            assert {"server", "version", "worker_id"} <= health.keys()
            assert health["reason"] == (f"database unreachable at 127.0.0.1:{port}: connection "
                                        "refused (nothing listens on that port)")
            # The schema is retried every second meanwhile, and the periodic passes run.
            await trio.sleep(3)
            again = await client.get("/health")
            assert again.status_code == 503 and again.json()["reason"] == health["reason"]
    output = broker.output()
    assert "Traceback" not in output
    lines = log_lines(output)
    unreachable = [line for line in lines if "unreachable" in line["msg"]]
    assert [line["msg"] for line in unreachable] == [health["reason"]]
    assert unreachable[0]["level"] == "warning"
    # Nothing else complains about it: no failed pass, sample or LISTEN line.
    assert [line for line in lines if line["level"] not in ("info", "debug")] == unreachable


@pytest.mark.parametrize("how", [{"args": ["--require-database"]},
                                 {"env": {"QUEEN_REQUIRE_DATABASE": "true"}}],
                         ids=["flag", "variable"])
async def test_require_database_refuses_to_start_without_it(how):
    url, port = nowhere()
    done = await refused_start({"DATABASE_URL": url, **how.get("env", {})}, how.get("args"))
    assert done.returncode == 2
    errors = done.stderr.decode().strip().splitlines()
    assert errors == [f"queen-trio: configuration error: database unreachable at 127.0.0.1:{port}:"
                      f" connection refused (nothing listens on that port) ("
                      f"{'--require-database' if 'args' in how else 'QUEEN_REQUIRE_DATABASE'} "
                      "refuses to start without it)"]
    assert "Traceback" not in done.stdout.decode() + done.stderr.decode()


async def test_connections_the_broker_cut_itself_are_not_an_unreachable_database(database_url,
                                                                                  caplog):
    """A stop past its graceful deadline cuts the pool (`Database.abort`); what fails after
    that failed because of the cut, not the database: no "database unreachable ... pool is
    closed" warning, and the database's reachability stays as it was."""
    from queen_trio.errors import DatabaseUnavailable
    from queen_trio.storage.database import open_database

    async with open_database(database_url, pool_size=2) as db:
        assert await db.call(lambda conn: conn.fetchval("SELECT 1")) == 1
        await db.abort()
        with pytest.raises(DatabaseUnavailable, match="pool is closed"):
            await db.call(lambda conn: conn.fetchval("SELECT 1"))
        assert db.reachability.reason is None
    assert "database unreachable" not in caplog.text
