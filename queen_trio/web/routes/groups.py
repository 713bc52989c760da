"""The consumer-group routes: listings and lag, delete, subscription start, seeks."""

from __future__ import annotations

from ...broker import Broker
from ...ops import groups
from ..http import Response, json_response
from ..request import Request


async def list_groups(broker: Broker, request: Request) -> Response:
    return json_response(200, await groups.list_groups(broker.db))


async def lagging(broker: Broker, request: Request) -> Response:
    return json_response(200, await groups.lagging(broker.db, request.query))


async def detail(broker: Broker, request: Request) -> Response:
    return json_response(200, await groups.group_detail(broker.db, request.params["group"]))


async def delete(broker: Broker, request: Request) -> Response:
    """The whole group, or (with :queue) its hold on that queue only."""
    return json_response(200, await groups.delete_group(
        broker.db, request.params["group"], request.query, queue=request.params.get("queue")))


async def subscription(broker: Broker, request: Request) -> Response:
    return json_response(200, await groups.update_subscription(
        broker.db, request.params["group"], request.json()))


async def seek(broker: Broker, request: Request) -> Response:
    """Every partition of the queue, or (with :partition) that one."""
    return json_response(200, await groups.seek(
        broker.db, broker.wakeups, request.params["group"], request.params["queue"],
        request.json(), partition=request.params.get("partition")))
