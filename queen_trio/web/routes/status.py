"""The status routes: the summary, queues, one queue, the status analytics, and a stats
refresh (GET /api/v1/status*, POST /api/v1/stats/refresh)."""

from __future__ import annotations

from ...broker import Broker
from ...ops import resources, status
from ..http import Response, json_response
from ..request import Request

# The status page lists fewer queues at once than the resources route.
QUEUES_PER_PAGE = 100


async def summary(broker: Broker, request: Request) -> Response:
    return json_response(200, await status.status(
        broker.db, request.query, identity=broker.identity, stats_age=broker.stats_age()))


async def queues(broker: Broker, request: Request) -> Response:
    return json_response(200, await resources.list_queues(broker.db, request.query,
                                                          default_limit=QUEUES_PER_PAGE))


async def queue(broker: Broker, request: Request) -> Response:
    return json_response(200, await status.queue_status(broker.db, request.params["queue"]))


async def analytics(broker: Broker, request: Request) -> Response:
    return json_response(200, await status.analytics(broker.db, request.query))


async def refresh(broker: Broker, request: Request) -> Response:
    return json_response(200, await broker.refresh_stats())
