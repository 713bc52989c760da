"""The dashboard: the browser UI in `queen_trio/web/static/`, served at `/` and `/dashboard/`.

The files ship in the wheel (package data) and are read once, when the app is built. Every
answer carries the same Content-Security-Policy: scripts, styles, images and API calls come
from this broker only, and no inline script or style runs (the pages have none). The pages
call the public HTTP API, like any other client (docs/dashboard.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from importlib import resources
from typing import Any

import attrs

from .app import Router
from .auth import PUBLIC
from .http import Request, Response, error_response

CONTENT_SECURITY_POLICY = (b"default-src 'self'; base-uri 'none'; form-action 'none'; "
                           b"frame-ancestors 'none'; object-src 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    # Revalidate every time (a 304 costs nothing): an upgraded broker never serves old pages.
    (b"cache-control", b"no-cache"),
]
CONTENT_TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".svg": b"image/svg+xml",
    ".md": b"text/plain; charset=utf-8",
    "": b"text/plain; charset=utf-8",  # LICENSE
}
INDEX = "index.html"
FAVICON = "favicon.svg"


@attrs.frozen
class Asset:
    body: bytes
    content_type: bytes
    etag: bytes

    def response(self, request: Request) -> Response:
        headers = [(b"content-type", self.content_type), (b"etag", self.etag),
                   *SECURITY_HEADERS]
        if request.headers.get(b"if-none-match") == self.etag:
            return Response(304, b"", headers)
        return Response(200, self.body, headers)


def _files(folder: Any, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    for entry in folder.iterdir():
        if entry.is_dir():
            yield from _files(entry, f"{prefix}{entry.name}/")
        else:
            yield f"{prefix}{entry.name}", entry.read_bytes()


def load_assets() -> dict[str, Asset]:
    """Every file of the dashboard by its path under static/, read from the package."""
    assets = {}
    for path, body in _files(resources.files("queen_trio.web") / "static"):
        suffix = path[path.rfind("."):] if "." in path.rsplit("/", 1)[-1] else ""
        if suffix not in CONTENT_TYPES:
            continue  # editor leftovers and the like are not served
        digest = hashlib.sha256(body).hexdigest()[:20]
        assets[path] = Asset(body, CONTENT_TYPES[suffix], f'"{digest}"'.encode())
    return assets


def add_dashboard_routes(router: Router) -> None:
    """The page at `/`, `/dashboard` and `/dashboard/`, its files under `/dashboard/` (and the
    icon at `/favicon.ico`): public (docs/decisions.md#auth), since the pages hold no data;
    they ask for a token when the API does."""
    assets = load_assets()
    index = assets[INDEX]

    async def page(request: Request) -> Response:
        return index.response(request)

    async def asset(request: Request) -> Response:
        found = assets.get(request.params["asset"])
        if found is None:
            return error_response(404, f"No dashboard file {request.params['asset']}")
        return found.response(request)

    async def favicon(request: Request) -> Response:
        return icon.response(request)

    icon = assets[FAVICON]
    for template in ("/", "/dashboard", "/dashboard/"):
        router.add("GET", template, page, access=PUBLIC)
    # Browsers ask for /favicon.ico whatever the page says.
    router.add("GET", "/favicon.ico", favicon, access=PUBLIC)
    router.add("GET", "/dashboard/*asset", asset, access=PUBLIC)
