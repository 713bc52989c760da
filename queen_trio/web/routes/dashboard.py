"""The dashboard's routes: its page at `/`, `/dashboard` and `/dashboard/`, its files under
`/dashboard/`, its icon at `/favicon.ico` (web/dashboard.py holds the files). Public
(docs/decisions.md#auth), since the pages hold no data; they ask for a token when the API does."""

from __future__ import annotations

from ...broker import Broker
from ..dashboard import FAVICON, INDEX, assets
from ..http import Response, error_response
from ..request import Request


async def page(broker: Broker, request: Request) -> Response:
    return assets()[INDEX].response(request)


async def asset(broker: Broker, request: Request) -> Response:
    found = assets().get(request.params["asset"])
    if found is None:
        return error_response(404, f"No dashboard file {request.params['asset']}")
    return found.response(request)


async def favicon(broker: Broker, request: Request) -> Response:
    # Browsers ask for /favicon.ico whatever the page says.
    return assets()[FAVICON].response(request)
