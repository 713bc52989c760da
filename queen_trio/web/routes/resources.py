"""The resource routes: the overview, queues and their depth, partitions, namespaces, tasks
(GET /api/v1/resources/*)."""

from __future__ import annotations

from ...broker import Broker
from ...ops import resources
from ..http import Response, json_response
from ..request import Request


async def overview(broker: Broker, request: Request) -> Response:
    return json_response(200, await resources.overview(broker.db,
                                                       stats_age=broker.stats_age()))


async def queues(broker: Broker, request: Request) -> Response:
    return json_response(200, await resources.list_queues(broker.db, request.query))


async def queue(broker: Broker, request: Request) -> Response:
    return json_response(200, await resources.queue_detail(broker.db, request.params["queue"]))


async def depth(broker: Broker, request: Request) -> Response:
    return json_response(200, await resources.depth(broker.db, request.params["queue"],
                                                    request.query.get("group")))


async def partitions(broker: Broker, request: Request) -> Response:
    return json_response(200, await resources.partitions(broker.db, request.query))


async def namespaces(broker: Broker, request: Request) -> Response:
    return json_response(200, await resources.namespaces(broker.db, "namespace"))


async def tasks(broker: Broker, request: Request) -> Response:
    return json_response(200, await resources.namespaces(broker.db, "task"))
