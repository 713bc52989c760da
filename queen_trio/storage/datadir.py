"""One broker per data directory: `<data-dir>/broker.lock`, held for the broker's lifetime.

The lock is an flock on the file, so it dies with its process (a SIGKILL frees it at once);
the file holds the holder's pid for the refusal message. It is taken before the embedded
cluster is started or adopted: a running cluster found under the lock was left by a broker
that is gone. A supervisor takes it once for all its workers.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError

LOCK_FILE = "broker.lock"


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode(errors="replace").strip()
    return text if text.isdigit() else "unknown"


def held(path: Path) -> bool:
    """Whether a live broker holds the data directory's lock (taken and let go at once when
    none does; read-only, so any user who can read the directory may ask)."""
    try:
        fd = os.open(Path(path) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing lets go of a lock just taken
    return False


@contextmanager
def claim_data_dir(path: Path, fix: str = "") -> Iterator[Path]:
    """Hold the data directory's lock while inside; ConfigError if a live broker holds it,
    ending with `fix` (what the second broker should be given instead)."""
    path = Path(path).absolute()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise ConfigError(f"a broker is already running on this data directory (pid {holder}): "
                          f"{path}{'; ' + fix if fix else ''}") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.ftruncate(fd, 0)
        os.close(fd)
