"""The access log: one line per request on `queen_trio.access` when LOG_REQUESTS is on.

Each line carries the method, the route template (not the raw path, so lines group by route),
the status, the duration, how many items the request pushed, acked or popped, and the queue
when there is one.
"""

from __future__ import annotations

import logging

from ..logs import ACCESS_LOGGER
from .http import Response

access_log = logging.getLogger(ACCESS_LOGGER)


def log_request(method: str, response: Response, seconds: float) -> None:
    route = response.route or "(no route)"
    access_log.info(f"{method} {route} {response.status}", extra={
        "method": method, "route": route, "status": response.status,
        "duration_ms": round(seconds * 1000, 3), "items": response.items,
        "queue": response.queue})
