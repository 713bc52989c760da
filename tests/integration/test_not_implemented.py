"""Calls the official 2.6 client makes that this broker lacks get a 404 with code
not_implemented: distinct from an unknown route, never a 5xx (which the client retries and
counts against the broker's health)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import trio

from queen_trio.web.routes import NOT_IN_THIS_BROKER

CLIENTS = Path(__file__).parent.parent / "support" / "clients"


def concrete(template: str) -> str:
    """A path for a template: each :param or *param becomes a value (the rest of a path may
    hold slashes)."""
    return re.sub(r"[:*](\w+)", lambda m: "a/b" if m.group(0)[0] == "*" else "x", template)


@pytest.mark.parametrize(("method", "template"), NOT_IN_THIS_BROKER)
async def test_a_route_of_the_26_client_answers_404_not_implemented(client, method, template):
    r = await client.request(method, concrete(template), json={})
    assert r.status_code == 404
    assert r.json() == {"error": f"{method} {template} is not implemented by this broker",
                        "code": "not_implemented"}


async def test_every_26_surface_is_covered_and_an_unknown_route_stays_route_not_found(client):
    covered = {template.split("/")[3] if template.startswith("/api/v1/") else "streams"
               for _, template in NOT_IN_THIS_BROKER}
    assert {"timers", "fetch", "partitions", "streams"} <= covered
    assert "ephemeral" not in covered  # built: docs/ephemeral.md
    r = await client.post("/api/v1/kvv")
    assert r.status_code == 404 and r.json() == {"error": "Route not found: POST /api/v1/kvv"}


async def test_the_official_client_reads_them_as_unsupported_and_carries_on(http_url):
    done = await trio.run_process([sys.executable, str(CLIENTS / "surfaces_flow.py"), http_url],
                                  capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert report["ephemeral"] == {"pushed": 1}
    assert report["kv"]["found"] is False
    assert report["push_after"][0]["status"] == "queued"
    assert report["once"] == [True, False]
    assert len(report["once_pushed"]) == 1
    # README "What surprises newcomers": consume() without .batch() or .each() hands the
    # handler a list, even of one message.
    assert report["consume_handed"] == ["list"]
