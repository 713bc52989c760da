"""The dashboard's files: the browser UI in `queen_trio/web/static/` (its routes are
web/routes/dashboard.py).

The files ship in the wheel (package data) and are read once, when the first app is built. Every
answer carries the same Content-Security-Policy: scripts, styles, images and API calls come
from this broker only, and no inline script or style runs (the pages have none). The pages
call the public HTTP API, like any other client (docs/dashboard.md).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from importlib import resources
from typing import TYPE_CHECKING

import attrs

from .http import Response
from .request import Request

if TYPE_CHECKING:  # importlib.resources.abc is 3.11+
    from importlib.abc import Traversable

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


def _files(folder: Traversable, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    for entry in folder.iterdir():
        if entry.is_dir():
            yield from _files(entry, f"{prefix}{entry.name}/")
        else:
            yield f"{prefix}{entry.name}", entry.read_bytes()


@functools.cache
def assets() -> dict[str, Asset]:
    """Every file of the dashboard by its path under static/, read from the package once
    (`create_app` asks first, so a broken install fails at the start)."""
    found = {}
    for path, body in _files(resources.files("queen_trio.web") / "static"):
        suffix = path[path.rfind("."):] if "." in path.rsplit("/", 1)[-1] else ""
        if suffix not in CONTENT_TYPES:
            continue  # editor leftovers and the like are not served
        digest = hashlib.sha256(body).hexdigest()[:20]
        found[path] = Asset(body, CONTENT_TYPES[suffix], f'"{digest}"'.encode())
    return found
