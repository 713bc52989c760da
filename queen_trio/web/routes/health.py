"""GET /health: whether this broker's database answers, and which broker this is."""

from __future__ import annotations

from ... import __version__
from ...broker import Broker
from ..http import Response, json_response
from ..request import Request


async def health(broker: Broker, request: Request) -> Response:
    healthy = await broker.db.ping()
    return json_response(200 if healthy else 503, {
        "status": "healthy" if healthy else "unhealthy",
        "database": "connected" if healthy else "disconnected",
        "server": "queen-trio",
        "version": __version__,
        "worker_id": broker.identity.worker_id,
    })
