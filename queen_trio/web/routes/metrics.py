"""The metrics routes: GET /metrics (JSON) and GET /metrics/prometheus."""

from __future__ import annotations

from ...broker import Broker
from ...ops import metrics
from ..http import Response, json_response
from ..request import Request


async def as_json(broker: Broker, request: Request) -> Response:
    figures = broker.figures()
    requests_rate, messages_rate = broker.sampler.rates(figures)
    return json_response(200, metrics.metrics_json(
        figures, requests_rate=requests_rate, messages_rate=messages_rate,
        stats_age=broker.stats_age()))


async def prometheus(broker: Broker, request: Request) -> Response:
    text = await metrics.prometheus(broker.db, broker.figures(),
                                    fresh_seconds=broker.sampler.fresh_seconds)
    return Response(200, text, [(b"content-type", metrics.PROMETHEUS_CONTENT_TYPE),
                                (b"cache-control", b"no-cache")])
