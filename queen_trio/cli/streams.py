"""The ends of a pipeline: NDJSON lines in from stdin, one flushed line out per message, and
the signals that stop a streaming command (docs/cli.md, "Pipelines").

A streaming command learns that its reader went away in two ways: a write fails (EPIPE), or,
while it waits on the broker with nothing to print, a watchdog thread sees the pipe's error
state and interrupts the main thread with SIGPIPE. Either way `StdoutClosed` is raised in the
main thread, so the command can give back what it did not print.
"""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .failures import StdoutClosed, Terminated


class Idle:
    """No line arrived within the timeout."""


IDLE = Idle()


def emit(value: Any) -> None:
    """One JSON line on stdout, flushed now."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n"
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise StdoutClosed() from None


class Lines:
    """Lines from a file descriptor, numbered from 1, with a timeout for idle input."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.buffer = b""
        self.number = 0
        self.eof = False

    def next(self, timeout: float | None) -> tuple[int, bytes] | Idle | None:
        """(number, line without its newline), IDLE after `timeout` seconds of silence, or
        None at the end of the input."""
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line, self.buffer = self.buffer[:newline], self.buffer[newline + 1:]
                self.number += 1
                return self.number, line.rstrip(b"\r")
            if self.eof:
                if self.buffer:
                    line, self.buffer = self.buffer, b""
                    self.number += 1
                    return self.number, line
                return None
            if timeout is not None:
                ready, _, _ = select.select([self.fd], [], [], timeout)
                if not ready:
                    return IDLE
            chunk = os.read(self.fd, 1 << 16)
            if chunk:
                self.buffer += chunk
            else:
                self.eof = True


def _stdout_is_a_pipe() -> bool:
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def streaming() -> Iterator[None]:
    """While a streaming command runs: SIGTERM and SIGHUP raise `Terminated`, and a closed
    stdout raises `StdoutClosed` even while the command waits on the broker."""
    fired = threading.Event()
    main = threading.main_thread().ident

    def on_sigpipe(signum: int, frame: Any) -> None:
        if fired.is_set():  # the watchdog's: our reader is gone (said once)
            fired.clear()
            raise StdoutClosed()
        # Otherwise a write to a closed socket: the write itself fails with EPIPE.

    def on_terminate(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    previous = {s: signal.signal(s, h) for s, h in (
        (signal.SIGPIPE, on_sigpipe), (signal.SIGTERM, on_terminate),
        (signal.SIGHUP, on_terminate))}
    wake_r, wake_w = os.pipe()
    watchdog = None
    if _stdout_is_a_pipe():
        def watch() -> None:
            poller = select.poll()
            poller.register(sys.stdout.fileno(), select.POLLERR)
            poller.register(wake_r, select.POLLIN)
            for fd, _event in poller.poll():
                if fd != wake_r:
                    fired.set()
                    signal.pthread_kill(main, signal.SIGPIPE)  # type: ignore[arg-type]
                return

        watchdog = threading.Thread(target=watch, name="stdout-watchdog", daemon=True)
        watchdog.start()
    try:
        yield
    finally:
        os.write(wake_w, b"x")
        if watchdog is not None:
            watchdog.join()
        os.close(wake_r)
        os.close(wake_w)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def quiet_stdout() -> None:
    """After the reader went away: nothing more reaches stdout, and the interpreter's final
    flush does not complain about the broken pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
