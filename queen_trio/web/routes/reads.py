"""The offset-read routes (docs/offset-reads.md): POST /api/v1/fetch and POST
/api/v1/partitions/changed, both read-only."""

from __future__ import annotations

from ...broker import Broker
from ...reads.changed import changed as list_changed
from ...reads.changed import parse_changed
from ...reads.fetch import parse_fetch
from ..http import Response, json_response
from ..request import Request


async def fetch(broker: Broker, request: Request) -> Response:
    entries, budget = parse_fetch(request.body)
    return json_response(200, await broker.reader.fetch(entries, budget), items=len(entries))


async def changed(broker: Broker, request: Request) -> Response:
    entries = parse_changed(request.body)
    return json_response(200, await list_changed(broker.db, entries), items=len(entries))
