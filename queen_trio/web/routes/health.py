"""GET /health: whether this broker's database answers (and if not, why), which broker this
is, and whether it encrypts the queues that ask for it."""

from __future__ import annotations

from ... import __version__
from ...broker import Broker
from ..http import Response, json_response
from ..request import Request


async def health(broker: Broker, request: Request) -> Response:
    reason = await broker.db.unhealthy()
    healthy = reason is None
    return json_response(200 if healthy else 503, {
        "status": "healthy" if healthy else "unhealthy",
        "database": "connected" if healthy else "disconnected",
        "server": "queen-trio",
        "version": __version__,
        "worker_id": broker.identity.worker_id,
        # Why the status is unhealthy (the host, the port and the error); null when healthy.
        "reason": reason,
        "encryption": broker.cipher.status.to_wire(),
    })
