"""The listening socket, bound before anything else starts.

A HOST that does not resolve or a port already taken refuses the start (ConfigError) before
the broker touches its database. hypercorn is handed the bound socket as `fd://N`; a
supervisor can bind once and hand the same socket to each of its workers.
"""

from __future__ import annotations

import socket

from ..errors import ConfigError
from ..settings import Settings

BACKLOG = 1024


def bind_listener(settings: Settings) -> socket.socket:
    """The listening socket every worker shares (HOST, PORT)."""
    return _bind(settings, settings.port,
                 f"{settings.source('port')}={settings.port}")


def bind_worker_ports(settings: Settings) -> list[socket.socket]:
    """With --worker-ports BASE, worker K's own socket on BASE + K - 1 (tests and benchmarks
    reach one worker through it); else none."""
    if settings.worker_ports is None:
        return []
    bound: list[socket.socket] = []
    try:
        for k in range(settings.workers):
            port = settings.worker_ports + k
            bound.append(_bind(settings, port, f"--worker-ports {settings.worker_ports}, "
                                               f"worker {k + 1}"))
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def _bind(settings: Settings, port: int, port_named: str, *,
          host_field: str = "host") -> socket.socket:
    """A listening socket on the host `host_field` names (HOST, or QUEEN_PEER_HOST)."""
    raw_host = getattr(settings, host_field)
    host = raw_host.strip("[]")
    named = f"{settings.source(host_field)}={raw_host!r}"
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"{named} does not resolve: {exc.strerror}") from None
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {raw_host}:{port} ({named}, {port_named}): "
            f"{exc.strerror}") from None
    return sock


def bind_peer(settings: Settings) -> tuple[socket.socket, str]:
    """This process's peer listener (QUEEN_PEER_HOST, QUEEN_PEER_PORT; worker K adds K - 1)
    and the address its peers reach it at (QUEEN_ADVERTISE_ADDRESS, else the peer host), as
    `host:port`. The other broker processes relay ephemeral requests to it."""
    port = settings.peer_port
    if port and settings.worker_index is not None:
        port += settings.worker_index - 1
    sock = _bind(settings, port, f"{settings.source('peer_port')}={settings.peer_port}",
                 host_field="peer_host")
    host = settings.peer_host.strip("[]")
    advertised = settings.advertise_address or host
    if advertised in ("", "0.0.0.0", "::"):  # noqa: S104 - a bind-all host is not an address
        advertised = socket.gethostname()
    if ":" in advertised and not advertised.startswith("["):
        advertised = f"[{advertised}]"
    return sock, f"{advertised}:{sock.getsockname()[1]}"
