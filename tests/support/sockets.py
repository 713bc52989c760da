"""Raw HTTP over a real socket: a client that sends a request and hangs up, or trickles."""

from __future__ import annotations

from urllib.parse import urlsplit

import trio


async def open_request(base_url: str, path: str, *, method: str = "GET",
                       body: bytes = b"") -> trio.SocketStream:
    """Send one HTTP/1.1 request on a fresh connection; the caller reads or closes it."""
    parts = urlsplit(base_url)
    stream = await trio.open_tcp_stream(parts.hostname or "127.0.0.1", parts.port or 80)
    head = (f"{method} {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    await stream.send_all(head + body)
    return stream


async def read_response(stream: trio.SocketStream) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := await stream.receive_some(65536):
        chunks.append(chunk)
    return b"".join(chunks)
