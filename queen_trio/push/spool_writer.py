"""Writing a spool directory: records appended to its current file and fsynced before
`buffered` is answered, a new file every `records_per_file` records, files sealed for replay,
and the sequence that numbers the files of the directory and of its failed/.

A write that fails (a short write, a full disk) is cut back to what the file held and raises:
nothing of it counts, and the next append starts a new file. Every disk access runs in a
worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from .spool_codec import SpoolRecord, encode_records
from .spool_ledger import SpoolLedger
from .spool_root import file_name, fsync_directory, sequence_of, spool_files


class SpoolWriter:
    def __init__(self, directory: Path, ledger: SpoolLedger, *,
                 records_per_file: int = 10_000) -> None:
        self.directory = directory
        self._ledger = ledger
        self._records_per_file = records_per_file
        # One writer at a time: the current file, its count and the sequence change together,
        # and the ledger counts an append with its write, so whoever holds the lock (a recount,
        # a requeue, a discard) sees an append whole or not at all; a seal lists the files
        # under it, so a file an append opens later is never among the sealed.
        self._lock = trio.Lock()
        self._current: Path | None = None
        self._current_count = 0
        self._sequence = 0

    def resume_after(self, files: Iterable[Path]) -> None:
        """Number new files after these (what an earlier run left, here and in failed/)."""
        for path in files:
            self._sequence = max(self._sequence, sequence_of(path))

    async def append(self, records: list[SpoolRecord]) -> None:
        """Append the records to the current file and fsync; raises (nothing written) if the
        write fails."""
        data = encode_records(records)
        async with self._lock:
            if self._current is None or self._current_count >= self._records_per_file:
                self._current = self._next(self.directory)
                self._current_count = 0
                self._ledger.file_started()
            try:
                await trio.to_thread.run_sync(append_fsync, self._current, data)
            except BaseException:
                # Nothing of it counts (the file is cut back); later records start afresh.
                self._current = None
                raise
            self._current_count += len(records)
            self._ledger.appended(records)

    async def seal(self) -> list[Path]:
        """New writes go to a new file; the files sealed, which no append reopens."""
        async with self._lock:
            self._current = None
            return await trio.to_thread.run_sync(spool_files, self.directory)

    async def new_file(self, folder: Path) -> Path:
        """A path for a new file in `folder` (failed/), numbered in the shared sequence."""
        async with self._lock:
            return self._next(folder)

    async def take_back(self, path: Path, records: list[SpoolRecord], *,
                        own_failed: bool) -> None:
        """Move a failed/ file (holding `records`) back into line as the newest spool file,
        its reason dropped, its records pending again."""
        async with self._lock:
            target = self._next(self.directory)
            await trio.to_thread.run_sync(_move_back, path, target)
            self._ledger.requeued(records, own_failed=own_failed)

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """No append runs inside."""
        async with self._lock:
            yield

    def start_afresh(self) -> None:
        """The next append opens a new file (inside `exclusive`: after a discard)."""
        self._current = None
        self._current_count = 0

    def _next(self, folder: Path) -> Path:
        self._sequence += 1
        return folder / file_name(self._sequence)


def append_fsync(path: Path, data: bytes) -> None:
    """Append all of `data` and fsync, or raise with the file cut back to what it held: a
    short write is finished or undone, never left as a torn record that `buffered` covers."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(errno.EIO, f"spool write to {path} wrote nothing")
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)
    fsync_directory(path.parent)


def _move_back(path: Path, target: Path) -> None:
    os.replace(path, target)
    path.with_suffix(".reason").unlink(missing_ok=True)
    fsync_directory(target.parent)
    fsync_directory(path.parent)
