"""The spool's routes: GET /api/v1/status/buffers and POST /api/v1/status/buffers/retry."""

from __future__ import annotations

from ...broker import Broker
from ...push import spool_status
from ..auth import ADMIN
from ..http import Response, json_response
from ..request import Request


async def buffers(broker: Broker, request: Request) -> Response:
    # Where the broker keeps its files is for admins only.
    return json_response(200, await spool_status.buffers(
        broker.spool, broker.db, worker_id=broker.identity.worker_id,
        with_directories=await request.grants(ADMIN)))


async def retry_failed(broker: Broker, request: Request) -> Response:
    return json_response(200, await spool_status.retry_failed(broker.spool))
