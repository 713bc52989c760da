"""The real `queen-trio` executable, run as a subprocess the way a shell would."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import sys
import tempfile
import termios
from pathlib import Path
from typing import Any

import attrs
import trio

# The console script pip installed next to this interpreter.
EXECUTABLE = str(Path(sys.executable).with_name("queen-trio"))
# Variables that would point a command at another broker, config or width than the test's.
# (COLUMNS is also set below the interpreter by readline: an explicit environment drops it.)
LEAKING = ("QUEEN_SERVER", "QUEEN_TOKEN", "QUEEN_CONTEXT", "QUEEN_CONFIG", "COLUMNS",
           "NO_COLOR", "XDG_CONFIG_HOME")


def cli_env(**extra: str) -> dict[str, str]:
    """The test's environment without connection or width variables, with a config file of
    its own (nothing of the user's ~/.config is read), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in LEAKING}
    env["QUEEN_CONFIG"] = str(Path(tempfile.mkdtemp(prefix="queen-cli-")) / "config.yaml")
    env.update(extra)
    return env


@attrs.frozen
class Done:
    status: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


async def run_cli(*args: str, stdin: str | bytes | None = None,
                  env: dict[str, str] | None = None) -> Done:
    """`queen-trio ARGS...`, its exit status and output; stdin is empty unless given."""
    data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    with trio.fail_after(120):
        done = await trio.run_process([EXECUTABLE, *args], stdin=data, capture_stdout=True,
                                      capture_stderr=True, check=False,
                                      env=env if env is not None else cli_env())
    return Done(done.returncode, done.stdout.decode(), done.stderr.decode())


async def gather(*calls: Any) -> list[Any]:
    """Await the coroutines side by side (each CLI start costs a few tenths of a second);
    their results in order."""
    results: list[Any] = [None] * len(calls)

    async def one(i: int, call: Any) -> None:
        results[i] = await call

    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            nursery.start_soon(one, i, call)
    return results


async def until(predicate: Any, *, within: float = 60) -> None:
    """Wait until `await predicate()` is true."""
    with trio.fail_after(within):
        while not await predicate():
            await trio.sleep(0.05)


def interruptible() -> None:
    """A child's `preexec_fn`: Ctrl-C raises KeyboardInterrupt in it, as at a terminal, even
    when the tests run in a background job (a non-interactive shell starts those with SIGINT
    ignored, the child inherits that, and Python then installs no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def in_terminal(*args: str, typed: bytes = b"", env: dict | None = None,
                      columns: int = 120) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr on a pseudo-terminal; its status and screen."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = await trio.lowlevel.open_process([EXECUTABLE, *args], stdin=slave, stdout=slave,
                                            stderr=slave, env=env or cli_env())
    os.close(slave)
    if typed:
        os.write(master, typed)

    def read_all() -> bytes:
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal is closed
                return b"".join(chunks)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)

    try:
        with trio.fail_after(60):
            screen = await trio.to_thread.run_sync(read_all)
            status = await proc.wait()
    finally:
        os.close(master)
    return status, screen.decode(errors="replace").replace("\r\n", "\n")
