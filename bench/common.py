"""Shared by the bench scripts: a PostgreSQL to run against, processes, wrk, RSS sampling."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def database():
    """DATABASE_URL if set, else a fresh embedded PostgreSQL for the run."""
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    from queen_trio.storage.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="queen-bench-"))
    server = EmbeddedPostgres(folder)
    url = server.start()
    try:
        yield url
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except Exception as exc:  # noqa: BLE001
            if getattr(exc, "code", None):
                return
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


@contextmanager
def process(cmd: list[str], env: dict[str, str] | None = None, ready_url: str | None = None):
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(cmd, env=full_env, cwd=ROOT)
    try:
        if ready_url:
            wait_http(ready_url)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def broker(database_url: str, extra_env: dict[str, str] | None = None):
    port = free_port()
    env = {"DATABASE_URL": database_url, "LOG_LEVEL": "warning",
           "FILE_BUFFER_DIR": tempfile.mkdtemp(prefix="queen-bench-spool-"), **(extra_env or {})}
    cmd = [sys.executable, "-m", "queen_trio", "serve", "--host", "127.0.0.1", "--port", str(port)]
    with process(cmd, env, f"http://127.0.0.1:{port}/health") as proc:
        yield f"http://127.0.0.1:{port}", proc


@contextmanager
def empty_app():
    port = free_port()
    with process([sys.executable, str(ROOT / "bench" / "empty_app.py"), str(port)],
                 ready_url=f"http://127.0.0.1:{port}/") as proc:
        yield f"http://127.0.0.1:{port}", proc


class RssSampler:
    """Peak resident set size of a process, sampled every 100 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
                kb = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
                self.peak_kb = max(self.peak_kb, kb)
            except (OSError, AttributeError):
                pass
            self._stop.wait(0.1)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    m = re.match(r"([\d.]+)(us|ms|s)", text)
    assert m, text
    return float(m.group(1)) * _UNITS[m.group(2)]


def wrk(url: str, script: Path, *, connections: int, seconds: int, threads: int = 2) -> dict:
    """Run wrk with a Lua script; requests/s, latency percentiles (ms) and errors."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--latency",
         "-s", str(script), url],
        check=True, capture_output=True, text=True,
    ).stdout
    result = {
        "requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50_ms": _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)),  # type: ignore[union-attr]
        "p99_ms": _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)),  # type: ignore[union-attr]
    }
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    result["non_2xx"] = int(non2xx.group(1)) if non2xx else 0
    result["socket_errors"] = errors.group(1) if errors else ""
    return result


def write_results(name: str, results: dict) -> Path:
    folder = ROOT / "bench" / "results"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path
