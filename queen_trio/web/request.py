"""What a handler is given: one request, read and authenticated, and who sent it."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from .. import wire
from .auth import Authenticator, Identity


@attrs.define(slots=True)
class Request:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    headers: dict[bytes, bytes]
    body: bytes
    route: str  # the path of the route that answers, as the table has it
    # Asked by the few handlers whose reply depends on the caller (whoami, the spool's
    # directories); the app has already checked the route's own level.
    auth: Authenticator
    # The authenticated subject (JWT `sub`), stamped as producerSub; None while auth is off.
    subject: str | None = None
    # Set when the client hangs up (watched on routes that ask for it: long polls).
    gone: trio.Event = attrs.Factory(trio.Event)

    def json(self) -> Any:
        """The body as strict JSON; an empty body is {} (routes whose fields are optional)."""
        return wire.decode_object(self.body)

    async def grants(self, level: str) -> bool:
        """Whether the caller's credentials reach `level` (every request's do while
        authentication is off)."""
        return await self.auth.grants(self.headers, level)

    async def identify(self) -> Identity:
        """Who the caller is; 401 without a valid token (web/auth.py)."""
        return await self.auth.identify(self.headers)
