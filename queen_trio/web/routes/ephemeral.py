"""The ephemeral queues' routes, `/api/v1/ephemeral/*` (docs/ephemeral.md).

Each request is served by the process that owns the rings; any other process relays it
there as it came (the caller's credentials included, so the owner authorises the original
caller) with its member's header, and passes the owner's answer back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlencode

from ... import wire
from ...broker import Broker
from ...ephemeral.engine import BudgetExceeded, QueueFull
from ...ephemeral.service import PEER_HEADER, Forbidden, Unavailable
from ...errors import BadRequest, QueenError
from ..http import Response, error_response, json_response
from ..request import Request

Serve = Callable[[], Awaitable[Response]]


async def _answer(broker: Broker, request: Request, serve: Serve, *,
                  wait_seconds: float = 0.0) -> Response:
    eph = broker.ephemeral
    try:
        peer = request.headers.get(PEER_HEADER)
        if peer is not None:
            await eph.check_peer(peer)
            if not eph.owner:  # relayed to a process that no longer owns: never relayed twice
                raise Unavailable("this process does not own the ephemeral queues any more",
                                  "owner_moved")
            return await serve()
        if not eph.owner:
            path = request.path
            if request.query:
                path += "?" + urlencode(request.query)
            relayed = await eph.relay(request.method, quote(path, safe="/?=&%"),
                                      request.headers, request.body, wait_seconds=wait_seconds)
            if relayed.status:
                response = Response(relayed.status, relayed.body)
                if relayed.retry_after:
                    response.headers.append((b"retry-after", relayed.retry_after))
                return response
        return await serve()
    except QueueFull as exc:
        response = error_response(429, str(exc), exc.fields)
        response.headers.append((b"retry-after", b"1"))
        return response
    except (BudgetExceeded, Unavailable) as exc:
        response = error_response(503, str(exc), {"code": "ephemeral_unavailable",
                                                  **exc.fields})
        response.headers.append((b"retry-after", b"1"))
        return response
    except Forbidden as exc:
        return error_response(403, str(exc), exc.fields)
    except BadRequest as exc:
        return error_response(400, str(exc), {"code": "ephemeral_bad_request", **exc.fields})


async def configure(broker: Broker, request: Request) -> Response:
    async def serve() -> Response:
        reply = await broker.ephemeral.configure(_json(request))
        return json_response(201, reply, queue=reply["queue"])
    return await _answer(broker, request, serve)


async def reset(broker: Broker, request: Request) -> Response:
    async def serve() -> Response:
        return json_response(200, await broker.ephemeral.reset(_json(request)))
    return await _answer(broker, request, serve)


async def delete(broker: Broker, request: Request) -> Response:
    async def serve() -> Response:
        return json_response(200, await broker.ephemeral.delete(request.params["queue"]))
    return await _answer(broker, request, serve)


async def push(broker: Broker, request: Request) -> Response:
    async def serve() -> Response:
        reply = broker.ephemeral.push(_json(request))
        return json_response(201, reply, items=reply["pushed"])
    return await _answer(broker, request, serve)


async def pop(broker: Broker, request: Request) -> Response:
    async def serve() -> Response:
        queue, group, taken = await broker.ephemeral.pop(request.query)
        body = (b'{"queue":' + wire_str(queue) + b',"messages":['
                + b",".join(d.to_wire() for d in taken) + b"]}")
        response = Response(200, body, items=len(taken), queue=queue)
        if taken and not wire.query_bool(request.query, "autoAck", False):
            async def undelivered() -> None:
                broker.ephemeral.engine.give_back(taken, group)
            response.undelivered = undelivered
        return response

    wait_seconds = 0.0
    if request.query.get("wait") in ("true", "1"):
        timeout = request.query.get("timeout", "30000")
        wait_seconds = int(timeout) / 1000 if timeout.isdigit() and len(timeout) < 10 else 30.0
    return await _answer(broker, request, serve, wait_seconds=wait_seconds)


async def ack(broker: Broker, request: Request) -> Response:
    async def serve() -> Response:
        return json_response(200, broker.ephemeral.ack(_json(request)))
    return await _answer(broker, request, serve)


async def queues(broker: Broker, request: Request) -> Response:
    async def serve() -> Response:
        return json_response(200, broker.ephemeral.queues())
    return await _answer(broker, request, serve)


async def depth(broker: Broker, request: Request) -> Response:
    async def serve() -> Response:
        name = request.params["queue"]
        reply = broker.ephemeral.depth(name, request.query.get("group"))
        if reply is None:
            return error_response(404, f"ephemeral queue {name} does not exist",
                                  {"code": "ephemeral_queue_not_found"})
        return json_response(200, reply, queue=name)
    return await _answer(broker, request, serve)


def _json(request: Request) -> object:
    try:
        return request.json()
    except QueenError as exc:
        exc.fields.setdefault("code", "ephemeral_bad_request")
        raise


def wire_str(value: str) -> bytes:
    from ...ephemeral.service import wire_bytes

    return wire_bytes(value)
