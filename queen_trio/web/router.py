"""Routes and their matching: the `Route` record the route table (web/routes/table.py) is made
of, and the `Router` that finds a request's route, trying the table's rows in order."""

from __future__ import annotations

import enum
import re
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import unquote

import attrs

from .. import wire
from ..broker import Broker
from .http import HTTPError, Response
from .request import Request

# A route's handler: the broker's services and the request in, the reply out.
Handler = Callable[[Broker, Request], Awaitable[Response]]


class Waits(enum.Enum):
    """Which of a route's requests can wait (a long poll). While such a request waits, a
    watcher task sees the client hang up, sets the request's `gone` and cancels the handler
    (what it claimed is given back). Every other request starts no task and opens no
    nursery."""

    NEVER = "never"
    # Those that ask to, with `wait=true` in the query (pops). One that does not wait is one
    # claim and needs no watcher: its request's `gone` (the connection's hang-up) still tells
    # it to give back what it claims after the client left.
    WHEN_ASKED = "when asked"

    def watched(self, request: Request) -> bool:
        """Whether `request` gets a watcher task."""
        return self is Waits.WHEN_ASKED and wire.query_bool(request.query, "wait", False)


def compile_path(path: str) -> re.Pattern[str]:
    """The pattern of a route's path: `:name` is one segment, `*name` the rest of the path
    (slashes included), anything else itself."""
    parts = []
    for segment in path.strip("/").split("/"):
        if segment.startswith(":"):
            parts.append(f"(?P<{segment[1:]}>[^/]+)")
        elif segment.startswith("*"):
            parts.append(f"(?P<{segment[1:]}>.+)")
        else:
            parts.append(re.escape(segment))
    # A trailing slash is part of the route ("/dashboard/" is not "/dashboard").
    slash = "/" if path.endswith("/") and path != "/" else ""
    return re.compile("^/" + "/".join(parts) + slash + "$")


@attrs.frozen
class Route:
    """One row of the route table."""

    method: str
    path: str  # "/api/v1/pop/queue/:queue"
    access: str  # the level a caller needs (web/auth.py)
    handler: Handler
    waits: Waits = Waits.NEVER
    pattern: re.Pattern[str] = attrs.field(init=False, repr=False, eq=False)

    @pattern.default
    def _pattern(self) -> re.Pattern[str]:
        return compile_path(self.path)


# How many (method, path) pairs a router remembers.
FOUND_PATHS = 4096


class Router:
    """Finds a request's route: the first of the routes, in order, whose method and path
    match."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = tuple(routes)
        # What resolve found for the paths asked lately: a request is one dict lookup rather
        # than a scan of every route's pattern. Bounded: emptied when full, so paths nobody
        # asks again cost nothing for long.
        self._found: dict[tuple[str, str], tuple[Route, dict[str, str]]] = {}

    def resolve(self, method: str, raw_path: str) -> tuple[Route, dict[str, str]]:
        """`find`, remembered for the paths asked lately."""
        key = (method, raw_path)
        found = self._found.get(key)
        if found is None:
            found = self.find(method, raw_path)
            if len(self._found) >= FOUND_PATHS:
                self._found.clear()
            self._found[key] = found
        return found[0], dict(found[1])

    def find(self, method: str, raw_path: str) -> tuple[Route, dict[str, str]]:
        """The route and its path parameters; HTTPError 405 when only another method's route
        matches the path, 404 when none does. HEAD is answered by the GET route (the app
        sends no body), except where a GET waits: a pop claims, and a HEAD never does."""
        if method == "HEAD":
            try:
                route, params = self.find("GET", raw_path)
            except HTTPError as exc:
                raise HTTPError(exc.status, str(exc).replace("GET", "HEAD", 1)) from None
            if route.waits is not Waits.NEVER:
                raise HTTPError(405, f"Method HEAD not allowed on {raw_path}: a HEAD never "
                                     "claims messages")
            return route, params
        allowed = False
        for route in self.routes:
            match = route.pattern.match(raw_path)
            if match is None:
                continue
            if route.method != method:
                allowed = True
                continue
            # Path parameters arrive percent-encoded; decode each one on its own, so an
            # encoded "/" stays inside its parameter.
            return route, {k: unquote(v) for k, v in match.groupdict().items()}
        if allowed:
            raise HTTPError(405, f"Method {method} not allowed on {raw_path}")
        raise HTTPError(404, f"Route not found: {method} {raw_path}")
