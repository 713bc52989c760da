"""GET /api/v1/auth/whoami: who the caller's token is, and the level its roles give."""

from __future__ import annotations

from ...broker import Broker
from ..http import Response, json_response
from ..request import Request


async def whoami(broker: Broker, request: Request) -> Response:
    # A public route: any valid token may ask, so the token is checked here.
    who = await request.identify()
    return json_response(200, {"sub": who.sub, "role": who.role, "level": who.level})
