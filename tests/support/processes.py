"""Brokers as real processes: `python -m queen_trio serve`, on a free port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import trio


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def broker_process(env: dict[str, str] | None = None,
                         args: list[str] | None = None) -> AsyncIterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("DATABASE_URL", "PG_HOST", "PG_PORT", "PG_USER", "PG_DB")}
    import tempfile

    full_env["FILE_BUFFER_DIR"] = tempfile.mkdtemp(prefix="queen-spool-")
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "queen_trio", "serve", "--host", "127.0.0.1",
           "--port", str(port), *(args or [])]
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            with trio.fail_after(60):
                while True:
                    if proc.poll() is not None:
                        out = proc.stdout.read().decode() if proc.stdout else ""
                        raise RuntimeError(f"broker exited {proc.returncode}: {out}")
                    try:
                        if (await client.get(url + "/health")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.1)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with trio.move_on_after(30):
                while proc.poll() is None:
                    await trio.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
        proc.wait()
        if proc.stdout:
            proc.stdout.close()
