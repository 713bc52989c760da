"""The official 2.6 client's surfaces: every route is built (none answers 404
not_implemented any more), and the client's newer calls run against the broker."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from queen_trio.web.routes import NOT_IN_THIS_BROKER

CLIENTS = Path(__file__).parent.parent / "support" / "clients"


async def test_every_26_surface_is_built_and_an_unknown_route_stays_route_not_found(client):
    # No route of the table answers not_implemented any more (kv, locks, streams, timers,
    # offset reads, ephemeral queues are built); an unknown route is a plain 404.
    assert NOT_IN_THIS_BROKER == ()
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
