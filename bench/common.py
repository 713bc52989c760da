"""Shared by the bench scripts: a PostgreSQL to run against, processes, wrk, RSS sampling."""

from __future__ import annotations

import http.client
import json
import os
import re
import resource
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


def _unwind_on_sigterm() -> None:
    """A bench stopped by SIGTERM (`kill`, a timeout) unwinds like one stopped by Ctrl-C: its
    brokers are stopped and its embedded PostgreSQL with them, instead of left running."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


@contextmanager
def database():
    """DATABASE_URL if set, else a fresh embedded PostgreSQL for the run."""
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    from queen_trio.storage.embedded import EmbeddedPostgres

    _unwind_on_sigterm()
    folder = Path(tempfile.mkdtemp(prefix="queen-bench-"))
    server = EmbeddedPostgres(folder)
    url = server.start()
    try:
        yield url
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def statements_database(*settings: str):
    """A fresh embedded PostgreSQL with pg_stat_statements loaded and created, counting the
    statements inside functions too (track = all); `settings` are more `ALTER SYSTEM SET`
    bodies (say "pg_stat_statements.track_planning = on"). Yields its URL."""
    import asyncio

    from queen_trio.storage.embedded import EmbeddedPostgres

    sys.path.insert(0, str(ROOT))  # as dashboard_load.py does, for the tests' helpers
    from tests.support.outage import execute_statements as run

    _unwind_on_sigterm()
    folder = Path(tempfile.mkdtemp(prefix="queen-bench-"))
    server = EmbeddedPostgres(folder)
    url = server.start()
    try:
        asyncio.run(run(url, "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'",
                        "ALTER SYSTEM SET pg_stat_statements.track = 'all'",
                        *(f"ALTER SYSTEM SET {setting}" for setting in settings)))
        server.stop()
        url = server.start()
        asyncio.run(run(url, "CREATE EXTENSION pg_stat_statements"))
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


def configure_queue(port: int, queue: str) -> None:
    """POST /api/v1/configure for `queue` on a fresh connection, closed afterwards."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request("POST", "/api/v1/configure", json.dumps({"queue": queue}),
                 {"content-type": "application/json"})
    conn.getresponse().read()
    conn.close()


@contextmanager
def process(cmd: list[str], env: dict[str, str] | None = None, ready_url: str | None = None,
            cwd: Path = ROOT):
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(cmd, env=full_env, cwd=cwd)
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


def free_ports(count: int) -> int:
    """The first of `count` consecutive loopback ports that are free now."""
    while True:
        base = free_port()
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
        return base


@contextmanager
def broker(database_url: str, extra_env: dict[str, str] | None = None, *, workers: int = 1,
           app: str | None = None, code: Path | None = None):
    """`queen-trio serve --workers N --worker-ports BASE` (with `app`: `--app app`, no
    database): yields (shared URL, process, one URL per worker), every worker serving.
    `code`: a checkout of another version of queen-trio to run instead (its directory comes
    first on the broker's import path; plain `serve`, which every version has). The spool
    directory it gets is removed when it stops."""
    spool = tempfile.mkdtemp(prefix="queen-bench-spool-")
    env = {"DATABASE_URL": database_url, "LOG_LEVEL": "warning", "FILE_BUFFER_DIR": spool,
           **(extra_env or {})}
    try:
        if code is not None:
            port = free_port()
            cmd = [sys.executable, "-m", "queen_trio", "serve", "--host", "127.0.0.1", "--port",
                   str(port)]
            url = f"http://127.0.0.1:{port}"
            with process(cmd, env, url + "/health", cwd=code) as proc:
                yield url, proc, [url]
            return
        port, base = free_port(), free_ports(workers)
        cmd = [sys.executable, "-m", "queen_trio", "serve", "--host", "127.0.0.1", "--port",
               str(port), "--workers", str(workers), "--worker-ports", str(base)]
        if app is not None:
            cmd += ["--app", app]
        own = [f"http://127.0.0.1:{base + k}" for k in range(workers)]
        health = "/" if app is not None else "/health"
        with process(cmd, env) as proc:
            for url in own:
                wait_http(url + health)
            yield f"http://127.0.0.1:{port}", proc, own
    finally:
        shutil.rmtree(spool, ignore_errors=True)


@contextmanager
def served_app(workers: int = 1):
    """The HTTP ceiling (bench/empty_app.py) under `queen-trio serve --app`, so one worker or
    several serve it exactly as they serve the broker."""
    with broker("", workers=workers, app="bench.empty_app:app") as served:
        yield served


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of `pid` and its descendants, living and reaped: each
    process's own, plus what its reaped children left in its cutime/cstime."""
    total = 0
    for member in process_tree(pid):
        fields = _stat_fields(member)
        if fields:  # fields[11:15] are utime, stime, cutime, cstime
            total += sum(int(f) for f in fields[11:15])
    return total / CLOCK_TICKS


def tree_rss_mb(pid: int) -> float:
    """Memory of a process tree: the sum of its processes' PSS (shared pages split between
    the processes that map them, so PostgreSQL's shared buffers count once), or of their RSS
    where smaps_rollup cannot be read."""
    total = 0
    for member in process_tree(pid):
        try:
            text = Path(f"/proc/{member}/smaps_rollup").read_text()
            found = re.search(r"^Pss:\s+(\d+)", text, re.M)
        except OSError:
            found = None
        if found is None:
            try:
                text = Path(f"/proc/{member}/status").read_text()
            except OSError:
                continue
            found = re.search(r"VmRSS:\s+(\d+)", text)
        total += int(found.group(1)) if found else 0
    return total / 1024


def postmaster_pid(database_url: str) -> int | None:
    """The local postmaster behind `database_url`: the parent of a backend (None when the
    server is on another host)."""
    import asyncio

    import asyncpg

    async def parent_of_backend() -> int | None:
        conn = await asyncpg.connect(database_url)
        try:  # read while the backend lives
            fields = _stat_fields(int(await conn.fetchval("SELECT pg_backend_pid()")))
        finally:
            await conn.close()
        return int(fields[1]) if fields else None

    return asyncio.run(parent_of_backend())


def track_functions(database_url: str) -> None:
    """Count calls and time inside PL/pgSQL functions (pg_stat_user_functions) in every later
    session of the database: call it before the broker connects (a session reads it at its
    start). A database the bench may not alter has no per-function figures."""
    import asyncio

    import asyncpg

    async def alter() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            name = await conn.fetchval("SELECT current_database()")
            await conn.execute(f'ALTER DATABASE "{name}" SET track_functions = \'pl\'')
        except asyncpg.PostgresError as exc:
            log(f"no per-function figures: {exc}")
        finally:
            await conn.close()

    asyncio.run(alter())


async def function_times(conn, names: tuple[str, ...]) -> dict[str, tuple[int, float]]:  # type: ignore[no-untyped-def]
    """Calls and total ms inside each of the queen functions `names` so far
    (pg_stat_user_functions; see track_functions). A function not called yet is missing."""
    rows = await conn.fetch("SELECT funcname, calls, total_time FROM pg_stat_user_functions "
                            "WHERE schemaname = 'queen' AND funcname = ANY($1::text[])",
                            list(names))
    return {r["funcname"]: (int(r["calls"]), float(r["total_time"])) for r in rows}


class TreeRss:
    """Peak memory (PSS, tree_rss_mb) of a process tree (every worker, or every PostgreSQL
    backend), sampled every 100 ms."""

    def __init__(self, *pids: int) -> None:
        self.pids = pids
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, sum(tree_rss_mb(p) for p in self.pids))
            self._stop.wait(0.1)

    def __enter__(self) -> TreeRss:
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


def wrk(url: str, script: Path, *, connections: int, seconds: float, threads: int = 2) -> dict:
    """Run wrk with a Lua script; requests (and per second), latency percentiles (ms), errors
    and wrk's own CPU seconds."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{round(seconds)}s", "--latency",
         "-s", str(script), url],
        check=True, capture_output=True, text=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {
        "requests": int(re.search(r"(\d+) requests in", out).group(1)),  # type: ignore[union-attr]
        "wrk_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
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
