"""The streams routes: /streams/v1/* (docs/streams.md)."""

from __future__ import annotations

from ...broker import Broker
from ...errors import NotFound
from ...streams.parse import parse_cycle, parse_registration, parse_state_query
from ..http import Response, json_response
from ..request import Request


async def register(broker: Broker, request: Request) -> Response:
    return json_response(200, await broker.streams.register(parse_registration(request.body)))


async def cycle(broker: Broker, request: Request) -> Response:
    parsed = parse_cycle(request.body)
    reply = await broker.streams.cycle(parsed, request.subject)
    return json_response(200, reply, items=len(parsed.push_items),
                         queue=reply.get("queueName"))


async def state_get(broker: Broker, request: Request) -> Response:
    rows = await broker.streams.state(parse_state_query(request.body))
    return json_response(200, {"success": True, "rows": rows})


async def list_queries(broker: Broker, request: Request) -> Response:
    return json_response(200, {"queries": await broker.streams.queries()})


async def query_detail(broker: Broker, request: Request) -> Response:
    name = request.params["name"]
    found = await broker.streams.queries(name)
    if not found:
        raise NotFound(f"no streams query named {name!r}")
    query = found[0]
    shards = await broker.streams.shards(query["queryId"], request.query.get("partition"))
    return json_response(200, {**query, "stateShards": shards})


async def delete_query(broker: Broker, request: Request) -> Response:
    name = request.params["name"]
    if not await broker.streams.delete(name):
        raise NotFound(f"no streams query named {name!r}")
    return json_response(200, {"success": True, "deleted": name})
