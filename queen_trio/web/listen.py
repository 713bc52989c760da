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
    host = settings.host.strip("[]")
    named = f"{settings.source('host')}={settings.host!r}"
    try:
        found = socket.getaddrinfo(host or None, settings.port, type=socket.SOCK_STREAM,
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
            f"cannot listen on {settings.host}:{settings.port} ({named}, "
            f"{settings.source('port')}={settings.port}): {exc.strerror}") from None
    return sock
