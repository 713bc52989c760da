"""Structured logs on stderr: one JSON object per line, or readable text on a terminal.

The level defaults to info, where only lifecycle lines appear (start, stop, outages, passes that
changed something). The access log (`queen_trio.access`, one line per request) is switched on
by its own setting and logs whatever the level is.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any

import msgspec

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
ACCESS_LOGGER = "queen_trio.access"


def _timestamp(record: logging.LogRecord) -> str:
    return (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z")


def _extra(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_extra(record),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return msgspec.json.encode(entry, enc_hook=str).decode()


class TextFormatter(logging.Formatter):
    """`12:00:00.123 info  queen_trio.server: queen-trio listening bind=http://0.0.0.0:6632`."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{key}={_text(value)}" for key, value in _extra(record).items())
        line = (f"{_timestamp(record)[11:-1]} {record.levelname.lower():<7} {record.name}: "
                f"{record.getMessage()}{' ' + fields if fields else ''}")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text(value: Any) -> str:
    if isinstance(value, str) and value and " " not in value and '"' not in value:
        return value
    return msgspec.json.encode(value, enc_hook=str).decode()


class _WorkerField(logging.Filter):
    """Every line of a worker process says which worker it came from."""

    def __init__(self, worker: int) -> None:
        super().__init__()
        self.worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        record.worker = self.worker
        return True


def configure_logging(level: str, log_format: str | None = None, *,
                      access_log: bool = False, worker: int | None = None) -> None:
    """`log_format` None: text when stderr is a terminal, JSON otherwise. `worker`: the
    worker number each line carries."""
    if log_format is None:
        log_format = "text" if sys.stderr.isatty() else "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter() if log_format == "text" else JsonFormatter())
    if worker is not None:
        handler.addFilter(_WorkerField(worker))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # hypercorn's own start-up line repeats ours; its warnings and errors still show.
    logging.getLogger("hypercorn.error").setLevel(max(logging.WARNING, root.level))
    access = logging.getLogger(ACCESS_LOGGER)
    access.setLevel(logging.INFO if access_log else logging.CRITICAL + 1)


class Throttle:
    """Lets one record through per `every` seconds, for a failure that repeats (a periodic
    pass that keeps failing): the first says why, with its traceback; the next says how many
    were held back meanwhile."""

    def __init__(self, every: float = 60.0) -> None:
        self._every = every
        self._last = -math.inf
        self._held = 0

    def admit(self) -> int | None:
        """None to stay quiet; else the number of records held back since the last one."""
        now = time.monotonic()
        if now - self._last < self._every:
            self._held += 1
            return None
        self._last, held, self._held = now, self._held, 0
        return held
