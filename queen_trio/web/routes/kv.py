"""KV and locks: POST /api/v1/kv, POST /api/v1/locks, and the reads for people (the
dashboard's KV, Locks and Consumers pages, the CLI): GET /api/v1/resources/kv[/:ns],
/api/v1/resources/locks, /api/v1/resources/consumers (docs/kv-and-locks.md)."""

from __future__ import annotations

import time

from ... import wire
from ...broker import Broker
from ...kv.locks import run_locks
from ...kv.ops import MAX_PREFIX_LIMIT, NAMESPACE, KvBadRequest
from ...kv.supervision import SUPERVISOR_NAMESPACE, instances
from ..http import Response, json_response
from ..request import Request

# The Consumers page reads at most this many supervision rows (two per live instance).
MAX_SUPERVISION_ROWS = 10_000


async def kv_batch(broker: Broker, request: Request) -> Response:
    reply = await broker.kv.batch(request.body)
    return json_response(200, reply, items=len(reply.get("results", [])))


async def locks(broker: Broker, request: Request) -> Response:
    reply = await run_locks(broker.kv, request.body)
    return json_response(200, reply, items=len(reply["results"]))


async def namespaces(broker: Broker, request: Request) -> Response:
    return json_response(200, {"namespaces": await broker.kv.namespaces()})


async def browse(broker: Broker, request: Request) -> Response:
    ns = request.params["ns"]
    if not NAMESPACE.fullmatch(ns):
        raise KvBadRequest("kv_bad_namespace", "ns must match [a-z0-9][a-z0-9._-]{0,63}")
    limit = wire.query_int(request.query, "limit", 100, minimum=1, maximum=MAX_PREFIX_LIMIT)
    page = await broker.kv.browse(ns, request.query.get("prefix", ""),
                                  request.query.get("after") or None, limit)
    return json_response(200, {"namespace": ns, **page})


async def lock_list(broker: Broker, request: Request) -> Response:
    return json_response(200, {"locks": await broker.kv.locks_list()})


async def consumers(broker: Broker, request: Request) -> Response:
    rows: list[dict[str, object]] = []
    after: str | None = None
    while len(rows) < MAX_SUPERVISION_ROWS:
        page = await broker.kv.browse(SUPERVISOR_NAMESPACE, "", after, MAX_PREFIX_LIMIT)
        rows.extend(page["rows"])
        if not page.get("truncated") or not page.get("nextAfter"):
            break
        after = page["nextAfter"]
    found = instances(rows, time.time())
    groups: dict[str, list[dict[str, object]]] = {}
    for instance in found:
        groups.setdefault(str(instance["group"]), []).append(instance)
    return json_response(200, {
        "groups": [{"group": group, "live": sum(1 for i in members if not i["stale"]
                                                 and i.get("state") != "stopped"),
                    "stale": sum(1 for i in members if i["stale"]), "instances": members}
                   for group, members in sorted(groups.items())]})
