"""The exit statuses of every `queen-trio` command, one meaning each."""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterator


class Exit(enum.IntEnum):
    OK = 0
    REFUSED = 1  # the request was refused, or only part of it was done
    USAGE = 2  # a bad command line or configuration
    AUTH = 3  # no token, or the token is not good enough
    EMPTY = 4  # the answer is empty (a trace with no events)
    NOT_FOUND = 5
    UNREACHABLE = 6  # the broker cannot be reached, or answered 5xx
    INTERRUPTED = 130  # Ctrl-C (a second SIGTERM exits 143, as the shell would)


class WorkerFailed(Exception):
    """A supervisor's worker kept failing at boot; the supervisor exits with its status (the
    worker has said why on stderr)."""

    def __init__(self, worker: int, status: int) -> None:
        super().__init__(f"worker {worker} failed at boot (exit status {status})")
        self.worker = worker
        self.status = status


def report_boot_failure(exc: BaseException, prog: str = "queen-trio") -> int:
    """Name each cause of a failed start on stderr, one line each (no traceback wall); the
    exit status: USAGE for configuration errors only, REFUSED otherwise."""
    from .errors import ConfigError, SchemaError

    causes = list(_leaves(exc))
    for cause in causes:
        if isinstance(cause, WorkerFailed):
            continue  # the worker named its cause already
        kind = ("configuration error" if isinstance(cause, ConfigError)
                else "schema error" if isinstance(cause, SchemaError)
                else type(cause).__name__)
        print(f"{prog}: {kind}: {cause}", file=sys.stderr)
    failed = [c for c in causes if isinstance(c, WorkerFailed)]
    if failed:
        return failed[0].status
    return Exit.USAGE if all(isinstance(c, ConfigError) for c in causes) else Exit.REFUSED


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups: the causes worth naming."""
    inner = getattr(exc, "exceptions", None)
    if not inner:
        yield exc
        return
    for sub in inner:
        yield from _leaves(sub)
