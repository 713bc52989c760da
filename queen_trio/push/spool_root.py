"""The spool's directories: who holds which, and adoption of what nobody holds.

Under the spool root (FILE_BUFFER_DIR, default <data-dir>/spool) a single broker keeps its
files in the root itself; a supervisor's worker K keeps its own in `worker-K`. Each directory
is held through an flock on its `.lock` for as long as its broker runs, and the root's lock is
held by the single broker or by the supervisor: one broker (or one set of workers) per root.

Files in a directory that no live process holds are adopted before anyone serves: moved into
the adopter's directory, so they replay there. A supervisor adopts the root's own files (left
by a single broker) and those of workers beyond its count; a single broker adopts every
`worker-K` directory. A worker that died is restarted on its own directory and replays it.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import attrs

from ..errors import ConfigError

log = logging.getLogger("queen_trio.spool")

LOCK_FILE = ".lock"
FAILED = "failed"
WORKER_PREFIX = "worker-"
# A dead supervisor's workers exit within 2 s: wait that long for their directories.
ORPHAN_WAIT_SECONDS = 3.0


def worker_directory(root: Path, index: int) -> Path:
    return root / f"{WORKER_PREFIX}{index}"


def worker_directories(root: Path) -> list[Path]:
    """Every worker-K directory under the root, by K."""
    found = [p for p in root.glob(f"{WORKER_PREFIX}*")
             if p.is_dir() and p.name[len(WORKER_PREFIX):].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len(WORKER_PREFIX):]))


def directories(root: Path) -> list[Path]:
    """The root and every worker directory: all the places spooled records may be."""
    return [root, *worker_directories(root)]


def spool_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("spool-*.log"))


def sequence_of(path: Path) -> int:
    return int(path.stem.split("-")[1])


def lock_directory(directory: Path, *, wait: float = 0.0) -> IO[str] | None:
    """The directory's lock, held until the returned file is closed; None if a live process
    holds it (after waiting up to `wait` seconds)."""
    directory.mkdir(parents=True, exist_ok=True)
    lock = open(directory / LOCK_FILE, "a+")  # noqa: SIM115 -- held for the broker's life
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.monotonic() >= deadline:
                lock.close()
                return None
            time.sleep(0.05)


def hold_directory(directory: Path, *, wait: float = 0.0) -> IO[str]:
    lock = lock_directory(directory, wait=wait)
    if lock is None:
        raise ConfigError(f"spool directory {directory} belongs to another running broker "
                          "(FILE_BUFFER_DIR must be one per broker)")
    return lock


def adopt(sources: list[Path], into: Path) -> int:
    """Move the spool files of `sources` (held by nobody) into `into`, after its own; the
    number of files moved. Each source is locked while it is emptied."""
    moved = 0
    for source in sources:
        if source == into or not source.is_dir():
            continue
        lock = lock_directory(source, wait=ORPHAN_WAIT_SECONDS)
        if lock is None:
            log.warning("spool directory still held by a live process; not adopted",
                        extra={"directory": str(source)})
            continue
        try:
            moved += _move_files(source, into)
        finally:
            lock.close()
    return moved


def _move_files(source: Path, into: Path) -> int:
    """Every spool file of `source` (and of its failed/) into `into`, numbered after what
    `into` holds; the caller holds both directories."""
    (into / FAILED).mkdir(parents=True, exist_ok=True)
    sequence = max((sequence_of(p) for d in (into, into / FAILED) for p in spool_files(d)),
                   default=0)
    moved = 0
    for sub in ("", FAILED):
        for path in spool_files(source / sub):
            sequence += 1
            target = into / sub / f"spool-{sequence:012d}.log"
            os.replace(path, target)
            reason = path.with_suffix(".reason")
            if reason.exists():
                os.replace(reason, target.with_suffix(".reason"))
            moved += 1
    if moved:
        for folder in (source, source / FAILED, into, into / FAILED):
            _fsync_directory(folder)
        log.warning("adopted spool files that no live broker held; they will replay",
                    extra={"files": moved, "from": str(source), "into": str(into)})
    return moved


def _fsync_directory(path: Path) -> None:
    if not path.is_dir():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def claim_root(root: Path, *, workers: int) -> Iterator[None]:
    """A supervisor's hold on the root for its `workers`: the root's lock, and the files of
    a single broker (the root's own) and of workers beyond `workers` adopted by worker 1."""
    lock = hold_directory(root)
    try:
        first = worker_directory(root, 1)
        first.mkdir(exist_ok=True)
        _move_files(root, first)  # the root's lock is ours already
        adopt([d for d in worker_directories(root)
               if int(d.name[len(WORKER_PREFIX):]) > workers], first)
        yield
    finally:
        lock.close()


# -- held markers: which partitions have spooled records, in any directory -----------------
#
# A partition with spooled records anywhere under the root has a marker, `held/<digest>`.
# While it exists every process spools that partition's pushes too, behind what is already
# spooled, so a producer whose next request lands on another worker keeps its order. The
# marker's flock serialises, across processes, appending records of its partition and
# replaying them: the appender stamps its records in order (the stamp is kept in the marker),
# and the replayer, holding the lock, gathers the partition's records from every directory,
# lands them in stamp order and then removes the marker. A marker that is gone therefore
# means: every record of that partition in any file has landed.

HELD = "held"
_STAMP = struct.Struct(">Q")


def marker_path(root: Path, queue: str, partition: str) -> Path:
    digest = hashlib.blake2b(f"{queue}\0{partition}".encode(), digest_size=16).hexdigest()
    return root / HELD / digest


@attrs.define
class Marker:
    """A held marker, locked (exclusively) until `release`."""

    path: Path
    fd: int

    def next_stamps(self, count: int) -> list[int]:
        """`count` stamps, each above any this partition had (nanoseconds, so a marker made
        again later still stamps after the records it once covered)."""
        data = os.pread(self.fd, _STAMP.size, 0)
        last = _STAMP.unpack(data)[0] if len(data) == _STAMP.size else 0
        first = max(time.time_ns(), last + 1)
        os.pwrite(self.fd, _STAMP.pack(first + count - 1), 0)
        return list(range(first, first + count))

    def release(self, *, remove: bool = False) -> None:
        if self.fd < 0:
            return
        try:
            if remove:  # under the lock: no appender is between its stamp and its fsync
                self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)
            self.fd = -1


def lock_marker(path: Path, *, create: bool) -> Marker | None:
    """The marker at `path`, locked (waits for its holder); None when it does not exist and
    `create` is False."""
    if create:
        path.parent.mkdir(exist_ok=True)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
        except FileNotFoundError:
            return None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            linked = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            linked = False
        if linked:
            return Marker(path, fd)
        os.close(fd)  # removed while we waited: what it covered has landed
        if not create:
            return None


def lock_markers(paths: list[Path]) -> list[Marker]:
    """Several markers, created if need be, locked in one order (no deadlock between two
    processes that both append to the same partitions)."""
    held: list[Marker] = []
    try:
        for path in sorted(set(paths)):
            marker = lock_marker(path, create=True)
            assert marker is not None
            held.append(marker)
    except BaseException:
        for marker in held:
            marker.release()
        raise
    return held


def mark_held(root: Path, keys: set[tuple[str, str]], stamp: int = 0) -> None:
    """Markers for partitions found in spool files at a boot (a power loss may have lost a
    marker, never a record): made before anyone serves."""
    for queue, partition in keys:
        marker = lock_marker(marker_path(root, queue, partition), create=True)
        assert marker is not None
        os.pwrite(marker.fd, _STAMP.pack(stamp), 0)
        marker.release()
