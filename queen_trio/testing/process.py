"""`TestBroker`: a test broker for synchronous code, run by a process of its own.

Why a process and not a thread with its own Trio loop: the broker talks to PostgreSQL through
trio-asyncio, and importing trio-asyncio installs a global event-loop policy, after which
`asyncio.run` and `unittest.IsolatedAsyncioTestCase` in the test process run on trio-asyncio's
loop. In a process of its own the broker changes nothing in the test process, which imports
only this module, the settings and the standard library (tests/integration/
test_pytest_plugin.py proves it under pytest-asyncio and unittest).

`BrokerHost` is that process: one PostgreSQL (the embedded cluster copied from the template
cache, or a given server) and as many brokers as asked for, each on a database of its own.
The pytest plugin keeps one host per session (per xdist worker) and one broker per distinct
settings. The host process stops its brokers and its cluster, and removes its data
directory, when its stdin closes: when the host is closed, and when the test process dies.
"""

from __future__ import annotations

import datetime
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from ..settings import Settings
from .options import normalise, settings_from_json

START_TIMEOUT = 120.0  # a first session on a fresh machine builds the template
REQUEST_TIMEOUT = 60.0
CLOSE_TIMEOUT = 30.0


class TestBrokerError(RuntimeError):
    """The test broker's process refused a request, or is gone."""

    __test__ = False


class BrokerHost:
    """A process that runs test brokers on one PostgreSQL. `database_url`: a server that
    exists (its role needs CREATEDB); else the embedded one. `keep_data`: leave the data
    directory and databases behind."""

    __test__ = False

    def __init__(self, *, database_url: str | None = None, keep_data: bool = False,
                 log_level: str = "warning") -> None:
        self.database_url = database_url
        self.keep_data = keep_data
        self.log_level = log_level
        self.data_root: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        self.embedded = database_url is None

    # -- life --------------------------------------------------------------------------------

    def start(self) -> BrokerHost:
        if self._process is not None:
            return self
        self.data_root = Path(tempfile.mkdtemp(prefix="queen-trio-test-"))
        # Its own session: a Ctrl-C in the terminal reaches pytest, which closes the host.
        self._process = subprocess.Popen(
            [sys.executable, "-m", "queen_trio.testing.child", str(self.data_root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, start_new_session=True)
        try:
            info = self.request({"op": "start", "database_url": self.database_url,
                                 "keep_data": self.keep_data, "log_level": self.log_level},
                                timeout=START_TIMEOUT)
        except BaseException:
            self.close()
            raise
        self.embedded = bool(info["embedded"])
        return self

    def close(self) -> None:
        """Stop every broker and the cluster, and remove the data directory (unless
        keep_data). Waits for the process; kills it if it does not end in time."""
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
        if self.data_root is not None:
            _stop_orphan_cluster(self.data_root / "cluster" / "pgdata")
            if not self.keep_data:
                shutil.rmtree(self.data_root, ignore_errors=True)

    def __enter__(self) -> BrokerHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    # -- brokers -----------------------------------------------------------------------------

    def open_broker(self, **settings: Any) -> TestBroker:
        """A new broker on a fresh database of this host; `close()` it, or close the host."""
        return TestBroker._hosted(self, normalise(settings))

    # -- the wire ----------------------------------------------------------------------------

    def request(self, message: dict[str, Any], *, timeout: float = REQUEST_TIMEOUT) -> Any:
        process = self._process
        if process is None:
            raise TestBrokerError("the test broker host is not running")
        assert process.stdin is not None and process.stdout is not None
        with self._lock:
            try:
                process.stdin.write(json.dumps(message).encode() + b"\n")
            except OSError:
                raise self._gone(process) from None
            line = self._read_line(process, timeout)
        answer = json.loads(line)
        if "error" in answer:
            raise TestBrokerError(f"{message['op']}: {answer['error']}")
        return answer["ok"]

    def _read_line(self, process: subprocess.Popen[bytes], timeout: float) -> bytes:
        assert process.stdout is not None
        fd = process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TestBrokerError(f"the test broker process did not answer in {timeout} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise self._gone(process)
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    @staticmethod
    def _gone(process: subprocess.Popen[bytes]) -> TestBrokerError:
        try:
            code = process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return TestBrokerError(f"the test broker process is gone (exit status {code}); its "
                               "errors are on stderr")


def _stop_orphan_cluster(pgdata: Path) -> None:
    """A cluster left running by a host process that was killed: stop it (immediate)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGQUIT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


class TestBroker:
    """A real broker for synchronous tests (plain pytest, asyncio tests, unittest):

        with TestBroker(encryption=True) as broker:
            httpx.post(f"{broker.url}/api/v1/push", json={"items": [...]})
            broker.reset()

    `settings`: any `queen_trio.Settings` field, or `encryption=True` (a fresh key).
    `database_url`: run on that server (a database of its own is made there and dropped
    after); else on an embedded cluster. It binds 127.0.0.1 on an ephemeral port; closing it
    leaves nothing running and no data directory behind (unless `keep_data`).
    """

    __test__ = False

    def __init__(self, *, database_url: str | None = None, keep_data: bool = False,
                 **settings: Any) -> None:
        self._overrides = normalise(settings)
        self._host: BrokerHost | None = None
        self._owns_host = True
        self._database_url = database_url
        self._keep_data = keep_data
        self._id: int | None = None
        self._url: str | None = None
        self._settings: Settings | None = None

    @classmethod
    def _hosted(cls, host: BrokerHost, overrides: dict[str, Any]) -> TestBroker:
        broker = cls()
        broker._overrides, broker._host, broker._owns_host = overrides, host, False
        return broker._open()

    def start(self) -> TestBroker:
        if self._id is not None:
            return self
        if self._host is None:
            self._host = BrokerHost(database_url=self._database_url,
                                    keep_data=self._keep_data).start()
        try:
            return self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> TestBroker:
        assert self._host is not None
        opened = self._host.request({"op": "open", "settings": self._overrides})
        self._id, self._url = opened["id"], opened["url"]
        self._settings = settings_from_json(opened["settings"])
        return self

    def close(self) -> None:
        host, self._host = self._host, None
        if host is None:
            return
        try:
            if self._id is not None and not self._owns_host:
                host.request({"op": "close", "id": self._id})
        finally:
            self._id = self._url = None
            if self._owns_host:
                host.close()

    def __enter__(self) -> TestBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- what a test uses --------------------------------------------------------------------

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`, the broker's base URL."""
        if self._url is None:
            raise TestBrokerError("the test broker is not started: use it in a with block")
        return self._url

    @property
    def settings(self) -> Settings:
        """The broker's settings (its port, database URL and encryption key included)."""
        if self._settings is None:
            raise TestBrokerError("the test broker is not started: use it in a with block")
        return self._settings

    @property
    def host(self) -> BrokerHost | None:
        return self._host

    def reset(self) -> None:
        """Empty every queue, group and trace, without a restart; the broker forgets every
        cache that remembers them. Call it while no request of the test is in flight."""
        self._request("reset")

    def now(self) -> datetime.datetime:
        """The database's clock (what `recorded_since` compares with)."""
        return datetime.datetime.fromisoformat(self._request("now"))

    def recorded_since(self, since: datetime.datetime, *, limit: int = 200) -> dict[str, Any]:
        """Every trace name recorded from `since` on, with its timeline, and every message
        pushed (at most `limit`), with its trace events: what `--queen-traces` shows."""
        return self._request("recorded_since", since=since.isoformat(),  # type: ignore[no-any-return]
                             limit=limit)

    def _request(self, op: str, **fields: Any) -> Any:
        if self._host is None or self._id is None:
            raise TestBrokerError("the test broker is not started: use it in a with block")
        return self._host.request({"op": op, "id": self._id, **fields})
