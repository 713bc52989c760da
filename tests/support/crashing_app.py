"""An ASGI app for --app that fails at import once the file QUEEN_TEST_CRASH_FILE exists: a
worker that boots once, then keeps crashing at boot."""

from __future__ import annotations

import os
from pathlib import Path

if Path(os.environ["QUEEN_TEST_CRASH_FILE"]).exists():
    raise RuntimeError("told to crash at boot")


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})
