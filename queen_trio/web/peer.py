"""The peer listener's guard: on the socket other broker processes relay to, only the
ephemeral routes and `/health` are served (docs/ephemeral.md#the-owner); every other path
is a 404 there, whatever the token."""

from __future__ import annotations

from hypercorn.typing import (
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Scope,
)

from .app import App

ALLOWED_PREFIXES = ("/api/v1/ephemeral/", "/health")
REFUSAL = b'{"error":"the peer listener serves only the ephemeral routes and /health"}'


class PeerGuard:
    """The app, with requests that arrive on `peer_port` held to ALLOWED_PREFIXES."""

    def __init__(self, app: App, peer_port: int) -> None:
        self.app = app
        self.peer_port = peer_port

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable,
                       send: ASGISendCallable) -> None:
        if (scope["type"] == "http" and scope["server"] is not None
                and scope["server"][1] == self.peer_port
                and not scope["path"].startswith(ALLOWED_PREFIXES)):
            self.app.on_request_read(scope)
            start: HTTPResponseStartEvent = {
                "type": "http.response.start", "status": 404, "trailers": False, "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(REFUSAL)).encode())]}
            await send(start)
            body: HTTPResponseBodyEvent = {"type": "http.response.body", "body": REFUSAL,
                                           "more_body": False}
            await send(body)
            return
        await self.app(scope, receive, send)
