"""Logs that help: info by default with lifecycle lines only, JSON or text, the access log, and
at debug why a pop found nothing."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from queen_trio.logs import JsonFormatter, TextFormatter, configure_logging
from tests.support.consuming import ack, configure, pop, push
from tests.support.processes import running_broker


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.parametrize(("env", "args"), [({"LOG_REQUESTS": "true"}, []),
                                           ({}, ["--access-log"])])
async def test_the_access_log_has_one_line_per_request_whatever_the_level(database_url, env,
                                                                          args, workers):
    env = {"DATABASE_URL": database_url, "LOG_LEVEL": "error", **env}
    async with running_broker(env, args, workers=workers) as server:
        async with httpx.AsyncClient(base_url=server.url) as client:
            r = await client.post("/api/v1/push", json={"items": [
                {"queue": "logged", "payload": 1}, {"queue": "logged", "payload": 2}]})
            assert r.status_code == 201
            r = await client.get("/api/v1/pop/queue/logged", params={"batch": "5"})
            assert r.status_code == 200
        await server.wait_for_output('"route":"/api/v1/pop/queue/:queue"')
        lines = [line for line in json_lines(server.output())
                 if line["logger"] == "queen_trio.access"]
    push_line = next(line for line in lines if line["route"] == "/api/v1/push")
    assert push_line["msg"] == "POST /api/v1/push 201"
    assert (push_line["method"], push_line["status"], push_line["items"],
            push_line["queue"]) == ("POST", 201, 2, "logged")
    assert isinstance(push_line["duration_ms"], float)
    pop_line = next(line for line in lines if line["route"] == "/api/v1/pop/queue/:queue")
    assert (pop_line["status"], pop_line["items"], pop_line["queue"]) == (200, 2, "logged")
    # Nothing else at level error: no start-up lines, no hypercorn banner.
    others = [line for line in json_lines(server.output())
              if line["logger"] != "queen_trio.access"]
    assert others == []


async def test_the_default_level_is_info_with_start_up_lines_as_info_and_no_warnings(
        database_url, workers):
    async with running_broker({"DATABASE_URL": database_url, "LOG_LEVEL": ""},
                              workers=workers) as server:
        async with httpx.AsyncClient(base_url=server.url) as client:
            assert (await client.get("/health")).status_code == 200
        await server.wait_for_output('"msg":"queen-trio listening"')
        lines = json_lines(server.output())
    listening = next(line for line in lines if line["msg"] == "queen-trio listening")
    assert listening["level"] == "info"
    assert [line for line in lines if line["level"] != "info"] == []
    assert not [line for line in lines if line["logger"] == "queen_trio.access"]
    assert "Running on" not in server.output()


def test_log_format_is_text_on_a_terminal_and_json_otherwise(monkeypatch):
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
        configure_logging("info")
        assert isinstance(root.handlers[0].formatter, TextFormatter)
        monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
        configure_logging("info")
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        configure_logging("info", "text")
        assert isinstance(root.handlers[0].formatter, TextFormatter)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    record = logging.LogRecord("queen_trio.server", logging.INFO, "", 0, "queen-trio listening",
                               None, None)
    record.bind = ["http://0.0.0.0:6632"]
    text = TextFormatter().format(record)
    assert text.endswith('info    queen_trio.server: queen-trio listening '
                         'bind=["http://0.0.0.0:6632"]')


def why(caplog) -> list[str]:
    records = [r for r in caplog.records if r.getMessage() == "pop found nothing"]
    assert records, "no debug line"
    caplog.clear()
    return records[-1].why


async def test_at_debug_a_pop_that_finds_nothing_says_why(client, caplog):
    caplog.set_level(logging.DEBUG, logger="queen_trio.pop")
    assert await pop(client, "ghost") is None
    assert why(caplog) == ["ghost: no such queue"]

    await configure(client, "empty")
    assert await pop(client, "empty") is None
    assert why(caplog) == ["empty: nothing pending"]
    assert await pop(client, "empty", partition="nope") is None
    assert why(caplog) == ["empty: no partition named 'nope'"]

    await push(client, "busy", 1)
    assert await pop(client, "busy") is not None
    assert await pop(client, "busy") is None
    (reason,) = why(caplog)
    assert reason.startswith("busy: 1 partition leased until 20")

    await configure(client, "later", delayedProcessing=3600)
    await push(client, "later", 1)
    assert await pop(client, "later") is None
    assert why(caplog)[0].startswith("later: 1 partition delayed by delayedProcessing until")

    await configure(client, "windowed", windowBuffer=3600)
    await push(client, "windowed", 1)
    assert await pop(client, "windowed") is None
    assert why(caplog)[0].startswith("windowed: 1 partition held by the window buffer until")

    await configure(client, "retried", retryDelay=3_600_000)
    await push(client, "retried", 1)
    message = (await pop(client, "retried"))["messages"][0]
    assert (await ack(client, message, "failed"))["success"] is True
    assert await pop(client, "retried") is None
    assert why(caplog)[0].startswith("retried: 1 partition waiting out a retry delay until")

    await push(client, "old-news", 1)
    assert await pop(client, "old-news", consumerGroup="late", subscriptionMode="new") is None
    assert why(caplog)[0].startswith(
        "old-news: nothing pending since the group's subscription start 20")

    r = await client.get("/api/v1/pop", params={"namespace": "no-such-namespace"})
    assert r.status_code == 204
    assert why(caplog) == ["no queue matches the namespace and task"]


async def test_the_reason_costs_a_query_only_at_debug(broker, client, caplog):
    await configure(client, "quiet")
    assert await pop(client, "quiet") is None  # the group joins: later pops fuse
    caplog.set_level(logging.INFO, logger="queen_trio.pop")
    before = broker.db.statistics().calls
    assert await pop(client, "quiet") is None
    at_info = broker.db.statistics().calls - before
    caplog.set_level(logging.DEBUG, logger="queen_trio.pop")
    before = broker.db.statistics().calls
    assert await pop(client, "quiet") is None
    at_debug = broker.db.statistics().calls - before
    assert at_debug == at_info + 1
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG]


async def test_the_access_log_names_the_route_of_a_rejected_request(client, caplog):
    # Issue 25, point 13: a 400 (and a 503, a 404 of a resource) keeps its route.
    caplog.set_level(logging.INFO, logger="queen_trio.access")
    assert (await client.post("/api/v1/push", content=b"{not json")).status_code == 400
    assert (await client.get("/api/v1/resources/queues/nowhere")).status_code == 404
    assert (await client.get("/api/v1/pop/queue/q?batch=zero")).status_code == 400
    assert (await client.get("/no/such/route")).status_code == 404
    lines = [(r.getMessage(), r.route, r.queue) for r in caplog.records
             if r.name == "queen_trio.access"]
    assert lines == [("POST /api/v1/push 400", "/api/v1/push", None),
                     ("GET /api/v1/resources/queues/:queue 404",
                      "/api/v1/resources/queues/:queue", "nowhere"),
                     ("GET /api/v1/pop/queue/:queue 400", "/api/v1/pop/queue/:queue", "q"),
                     ("GET (no route) 404", "(no route)", None)]
