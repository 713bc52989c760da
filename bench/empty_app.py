"""The HTTP ceiling: an ASGI app that reads the body and answers 201 `[]`, under hypercorn's
trio worker with the broker's own hypercorn settings. Usage: python bench/empty_app.py PORT"""

from __future__ import annotations

import sys

import trio
from hypercorn.trio import serve

from queen_trio.settings import Settings
from queen_trio.web.server import hypercorn_config

HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"2")]


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 201, "headers": HEADERS})
    await send({"type": "http.response.body", "body": b"[]"})


if __name__ == "__main__":
    settings = Settings(host="127.0.0.1", port=int(sys.argv[1]))
    trio.run(serve, app, hypercorn_config(settings))
