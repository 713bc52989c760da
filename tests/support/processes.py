"""Brokers as real processes: `python -m queen_trio serve`, on a free port, as one process
(`workers=1`) or as a supervisor and its workers (`workers=2`: tests that talk HTTP to a
broker process run both ways through the `workers` fixture)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import httpx
import trio

# The variables that would point a broker at another database than the test means.
DATABASE_VARIABLES = ("DATABASE_URL", "PG_HOST", "PG_PORT", "PG_USER", "PG_PASSWORD", "PG_DB")


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# A port the kernel hands out for outgoing connections can be taken by any client's connect()
# between the moment a test picks it and the moment its broker binds it (a 2-worker broker
# once failed "Address already in use" that way). Ports below that range are only ever taken
# by a bind, so the tests pick theirs there, at random, and check them.
_PICKER = random.Random()


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports, free now and outside the kernel's range for
    outgoing connections."""
    low, _ = _ephemeral_range()
    floor = 10000 if low > 10000 + count else 1024
    while True:
        base = _PICKER.randrange(floor, low - count)
        if all(_bindable(port) for port in range(base, base + count)):
            return base


def free_port() -> int:
    return free_ports(1)


def broker_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment without database variables, with a private spool, plus `env`."""
    full = {k: v for k, v in os.environ.items() if k not in DATABASE_VARIABLES}
    full["FILE_BUFFER_DIR"] = tempfile.mkdtemp(prefix="queen-spool-")
    full.update(env or {})
    return full


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "queen_trio", "serve", *args]


WORKER_COMMAND = "queen_trio.web.worker"


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def is_alive(pid: int) -> bool:
    """Running (a zombie that its parent has not reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@attrs.define
class RunningBroker:
    url: str
    proc: subprocess.Popen
    output_path: Path  # stdout and stderr, interleaved
    workers: int = 1
    # With workers: worker K's own URL (--worker-ports), K - 1 in the list.
    worker_urls: list[str] = attrs.Factory(list)
    final_output: str | None = None  # kept once the process is gone and its file removed

    def worker_pids(self) -> list[int]:
        """The supervisor's live worker processes (none for a single process)."""
        found = []
        for pid in _children_by_parent().get(self.proc.pid, []):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if WORKER_COMMAND.encode() in command and is_alive(pid):
                found.append(pid)
        return found

    def output(self) -> str:
        if self.final_output is not None:
            return self.final_output
        return self.output_path.read_text(errors="replace")

    def keep_output(self) -> None:
        self.final_output = self.output()
        self.output_path.unlink(missing_ok=True)

    async def wait_for_output(self, text: str, *, within: float = 60) -> None:
        with trio.fail_after(within):
            while text not in self.output():
                if self.proc.poll() is not None:
                    raise AssertionError(f"broker exited {self.proc.returncode} before "
                                         f"{text!r}:\n{self.output()}")
                await trio.sleep(0.02)

    async def wait_exit(self, *, within: float = 60) -> int:
        with trio.fail_after(within):
            while self.proc.poll() is None:
                await trio.sleep(0.02)
        return self.proc.returncode


class _PortTaken(RuntimeError):
    """The broker exited at start because another process took a port picked for it."""


def _start_broker(env: dict[str, str] | None, args: list[str] | None, *, workers: int,
                  host: str | None, port: int) -> RunningBroker:
    fd, output_name = tempfile.mkstemp(prefix="queen-broker-", suffix=".log")
    extra = []
    worker_urls = []
    if workers > 1:  # each worker reachable on its own too
        base = free_ports(workers)
        extra = ["--worker-ports", str(base)]
        worker_urls = [f"http://127.0.0.1:{base + k}" for k in range(workers)]
    cmd = serve_command(*(["--host", host] if host is not None else []), "--port", str(port),
                        "--workers", str(workers), *extra, *(args or []))
    try:
        proc = subprocess.Popen(cmd, env=broker_env(env), stdout=fd, stderr=subprocess.STDOUT)
    finally:
        os.close(fd)
    return RunningBroker(f"http://127.0.0.1:{port}", proc, Path(output_name), workers,
                         worker_urls)


async def _until_serving(broker: RunningBroker, health: int) -> None:
    """Every worker answers /health with `health`; RuntimeError if the broker exits first
    (_PortTaken when a port it was given was taken in between)."""
    async with httpx.AsyncClient() as client:
        with trio.fail_after(60):
            for url in broker.worker_urls or [broker.url]:
                while True:
                    if broker.proc.poll() is not None:
                        output = broker.output()
                        error = _PortTaken if "Address already in use" in output else RuntimeError
                        raise error(f"broker exited {broker.proc.returncode}: {output}")
                    try:
                        if (await client.get(url + "/health")).status_code == health:
                            break
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.1)


def _stop_now(broker: RunningBroker) -> None:
    if broker.proc.poll() is None:
        broker.proc.kill()
    broker.proc.wait()
    broker.keep_output()


@asynccontextmanager
async def running_broker(env: dict[str, str] | None = None, args: list[str] | None = None, *,
                         workers: int = 1, host: str | None = "127.0.0.1",
                         health: int = 200,
                         port: int | None = None) -> AsyncIterator[RunningBroker]:
    """A broker process, every worker serving and answering /health with `health` (503: a
    broker whose database is unreachable); stopped with SIGTERM (then SIGKILL) on the way
    out. `host=None` gives it no `--host`: it listens where its default says."""
    for attempt in range(3):
        # The ports are picked free, but a test running in parallel may take one before the
        # broker binds it: then the broker starts again on others.
        broker = _start_broker(env, args, workers=workers, host=host,
                               port=port or free_port())
        try:
            await _until_serving(broker, health)
            break
        except _PortTaken:
            _stop_now(broker)
            if attempt == 2:
                raise
        except BaseException:
            _stop_now(broker)
            raise
    proc = broker.proc
    try:
        yield broker
    finally:
        # Shielded: a test cancelled at its deadline must still stop its broker, or the
        # process outlives it and its Popen's ResourceWarning fails whichever test is
        # running when it is collected.
        with trio.CancelScope(shield=True):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                with trio.move_on_after(20):
                    while proc.poll() is None:
                        await trio.sleep(0.05)
                if proc.poll() is None:
                    proc.kill()
            proc.wait()
        broker.keep_output()


@asynccontextmanager
async def broker_process(env: dict[str, str] | None = None, args: list[str] | None = None, *,
                         workers: int = 1,
                         port: int | None = None) -> AsyncIterator[tuple[str, subprocess.Popen]]:
    """`port`: this one (a broker started again where its clients are), else a free one."""
    async with running_broker(env, args, workers=workers, port=port) as broker:
        yield broker.url, broker.proc


async def refused_start(env: dict[str, str] | None = None, args: list[str] | None = None, *,
                        workers: int = 1) -> subprocess.CompletedProcess:
    """`serve` expected to refuse: its exit status and output (stdout and stderr apart). A
    broker that starts after all is killed after 60 s (and the test then fails on its status)."""
    with trio.move_on_after(60):
        return await trio.run_process(serve_command("--workers", str(workers), *(args or [])),
                                      env=broker_env(env),
                                      capture_stdout=True, capture_stderr=True, check=False)
    raise AssertionError("the broker started instead of refusing")


def process_tree(pid: int) -> list[int]:
    """`pid` and all of its descendants (from /proc), parents first."""
    children = _children_by_parent()
    tree, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree
