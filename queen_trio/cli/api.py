"""The broker's HTTP API, as the command line calls it: JSON in, JSON out, failures as
`CliError`s with the exit status of docs/cli.md.

httpx is imported on the first request, not before: `serve`, `--help` and shell completion
never pay for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .. import __version__
from ..exits import Exit
from .connection import Connection
from .failures import CliError, status_for_http

if TYPE_CHECKING:
    import httpx


def segment(value: str) -> str:
    """One path segment, percent-encoded (a `/` in a name stays inside it)."""
    return quote(value, safe="")


class Api:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._client: httpx.Client | None = None

    @property
    def server(self) -> str:
        return self.connection.server

    def client(self) -> httpx.Client:
        if self._client is None:
            import httpx

            headers = {"User-Agent": f"queen-trio-cli/{__version__}"}
            if self.connection.token:
                headers["Authorization"] = f"Bearer {self.connection.token}"
            # A plain-HTTP broker needs no TLS context, and building one (loading the CA
            # bundle) costs a quarter of a second at every start.
            plain = self.connection.server.startswith("http://")
            self._client = httpx.Client(base_url=self.connection.server, headers=headers,
                                        timeout=self.connection.timeout,
                                        verify=not plain)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def send(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             body: Any = None, wait: float = 0.0) -> httpx.Response:
        """The raw reply, whatever its status; an unreachable broker is a `CliError` (6).
        `wait`: seconds the broker may hold the request (a long poll) on top of the timeout."""
        import httpx

        timeout = self.connection.timeout + wait
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if content is not None else None
        try:
            return self.client().request(method, path, params=_query(params), content=content,
                                         headers=headers, timeout=timeout)
        except httpx.TimeoutException:
            raise CliError(f"{self.server} did not answer {method} {path} within "
                           f"{timeout:g} s", Exit.UNREACHABLE) from None
        except httpx.TransportError as exc:
            reason = str(exc) or type(exc).__name__
            raise CliError(f"cannot reach {self.server}: {reason}", Exit.UNREACHABLE) from None

    def call(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             body: Any = None, wait: float = 0.0) -> Any:
        """The reply's JSON (None for a 204); an error status is a `CliError`."""
        response = self.send(method, path, params=params, body=body, wait=wait)
        check(response)
        if response.status_code == 204 or not response.content:
            return None
        if not response.headers.get("content-type", "").startswith("application/json"):
            return response.text
        return response.json()

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params)

    def post(self, path: str, body: Any = None, **params: Any) -> Any:
        return self.call("POST", path, body=body, params=params)

    def delete(self, path: str, **params: Any) -> Any:
        return self.call("DELETE", path, params=params)


def check(response: httpx.Response) -> None:
    """A `CliError` for an error status, naming the broker's reason."""
    if response.status_code < 400:
        return
    request = response.request
    raise CliError(f"{error_text(response)} ({response.status_code} from {request.method} "
                   f"{request.url.path})", status_for_http(response.status_code))


def error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
        reason = body.get("error")
        # The KV and lock routes' envelope: a code, a stable reason id, and prose.
        more = [body[k] for k in ("reason", "detail")
                if isinstance(body.get(k), str) and body[k] and body[k] != reason]
    except (ValueError, AttributeError):
        reason, more = None, []
    if not isinstance(reason, str) or not reason:
        reason = response.reason_phrase or "error"
    if more:
        reason = f"{reason}: {': '.join(more)}"
    return " ".join(reason.split())


def _query(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Query parameters without the unset ones; booleans as the broker spells them."""
    if not params:
        return None
    query = {}
    for key, value in params.items():
        if value is None:
            continue
        query[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return query
