"""The dashboard's time series: GET /api/v1/analytics/*."""

from __future__ import annotations

from ...broker import Broker
from ...ops import analytics
from ..http import Response, json_response
from ..request import Request


async def system_metrics(broker: Broker, request: Request) -> Response:
    return json_response(200, await analytics.system_metrics(broker.db, request.query))


async def worker_metrics(broker: Broker, request: Request) -> Response:
    return json_response(200, await analytics.worker_metrics(broker.db, request.query))


async def queue_lag(broker: Broker, request: Request) -> Response:
    return json_response(200, await analytics.queue_lag(broker.db, request.query))


async def queue_ops(broker: Broker, request: Request) -> Response:
    return json_response(200, await analytics.queue_ops(broker.db, request.query))


async def parked_replicas(broker: Broker, request: Request) -> Response:
    return json_response(200, await analytics.parked_replicas(
        broker.db, request.query, local=broker.figures(),
        fresh_seconds=broker.sampler.fresh_seconds))


async def retention(broker: Broker, request: Request) -> Response:
    return json_response(200, await analytics.retention(broker.db, request.query))


async def postgres_stats(broker: Broker, request: Request) -> Response:
    return json_response(200, await analytics.postgres_stats(broker.db))
