"""The peer listener's guard: on the socket other broker processes relay to, only the
ephemeral routes and `/health` are served (docs/ephemeral.md#the-owner); every other path
is a 404 there, whatever the token."""

from __future__ import annotations

from typing import Any

from .app import App

ALLOWED_PREFIXES = ("/api/v1/ephemeral/", "/health")
REFUSAL = b'{"error":"the peer listener serves only the ephemeral routes and /health"}'


class PeerGuard:
    """The app, with requests that arrive on `peer_port` held to ALLOWED_PREFIXES."""

    def __init__(self, app: App, peer_port: int) -> None:
        self.app = app
        self.peer_port = peer_port

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        server = scope.get("server")
        if (scope["type"] == "http" and server is not None and server[1] == self.peer_port
                and not str(scope.get("path", "")).startswith(ALLOWED_PREFIXES)):
            self.app.on_request_read(scope)
            await send({"type": "http.response.start", "status": 404, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(REFUSAL)).encode())]})
            await send({"type": "http.response.body", "body": REFUSAL})
            return
        await self.app(scope, receive, send)
