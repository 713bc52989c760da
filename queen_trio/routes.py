"""Route table: which handler answers which (method, path)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import __version__
from .http import App, Request, Response, Router, error_response, json_response
from .push import parse_push_body
from .queues import QueueFacts, configure, parse_configure

if TYPE_CHECKING:
    from .broker import Broker

# Routes of the reference contract that this broker does not serve yet: they answer 501 with
# an error body (docs/api.md lists them), never a silent 404 or a fake success.
NOT_BUILT = [
    ("GET", "/api/v1/pop/queue/:queue"),
    ("GET", "/api/v1/pop/queue/:queue/partition/:partition"),
    ("GET", "/api/v1/pop"),
    ("POST", "/api/v1/ack"),
    ("POST", "/api/v1/ack/batch"),
    ("POST", "/api/v1/transaction"),
    ("POST", "/api/v1/lease/:leaseId/extend"),
    ("GET", "/api/v1/dlq"),
    ("DELETE", "/api/v1/resources/queues/:queue"),
    ("POST", "/api/v1/traces"),
    ("GET", "/api/v1/traces/:partitionId/:transactionId"),
    ("GET", "/api/v1/traces/by-name/:traceName"),
    ("GET", "/api/v1/traces/names"),
    ("GET", "/api/v1/status/buffers"),
]


def create_app(broker: Broker) -> App:
    router = Router()

    async def push(request: Request) -> Response:
        items = parse_push_body(request.body)
        status, results = await broker.publisher.push(items, request.subject)
        response = json_response(status, results)
        return response

    async def configure_queue(request: Request) -> Response:
        parsed = parse_configure(request.json())
        reply = await configure(broker.db, parsed)
        options = reply["options"]
        broker.directory.remember(parsed.queue, QueueFacts(
            options["encryptionEnabled"], options["dedupWindowSeconds"]))
        return json_response(200, reply)

    async def health(request: Request) -> Response:
        healthy = await broker.db.ping()
        return json_response(200 if healthy else 503, {
            "status": "healthy" if healthy else "unhealthy",
            "database": "connected" if healthy else "disconnected",
            "server": "queen-trio",
            "version": __version__,
        })

    router.add("POST", "/api/v1/push", push)
    router.add("POST", "/api/v1/configure", configure_queue)
    router.add("GET", "/health", health)
    for method, template in NOT_BUILT:
        router.add(method, template, _not_built(method, template))
    return App(broker, router)


def _not_built(method: str, template: str):  # type: ignore[no-untyped-def]
    async def handler(request: Request) -> Response:
        return error_response(501, f"{method} {template} is not implemented by this broker yet")

    return handler
