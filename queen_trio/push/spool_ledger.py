"""The spool's ledger: what one spool directory holds, counted in one place.

Records pending per partition (spooled, not replayed yet), records in failed/, spool files,
and records that landed through replay since start. The counts are read from the files once,
at open, and kept in memory as records come and go, so `statistics()` and `holds()` touch no
disk. The writer counts each append with its write, the replayer each file and partition it
drains; a replay that pauses mid-file counts the pending records again from the files.

`directory_usage` reads the same figures from another worker's files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import attrs

from .spool_codec import SpoolRecord, read_records
from .spool_root import FAILED, spool_files

Partition = tuple[str, str]  # (queue, partition)


@attrs.frozen
class SpoolStatistics:
    pending: int  # records not replayed yet
    failed: int   # records in failed/
    files: int    # spool files not replayed yet
    replayed: int  # records that landed through replay, since start


class SpoolLedger:
    def __init__(self) -> None:
        self._pending: Counter[Partition] = Counter()
        self._failed = 0
        self._files = 0
        self._replayed = 0
        # Message ids this process moved to failed/: never gathered again this run.
        self._failed_ids: set[bytes] = set()

    # -- reading -------------------------------------------------------------------------

    def statistics(self) -> SpoolStatistics:
        return SpoolStatistics(pending=self.pending_total(), failed=self._failed,
                               files=self._files, replayed=self._replayed)

    def holds(self, partition: Partition) -> bool:
        """Whether this directory holds records of the partition not replayed yet."""
        return self._pending[partition] > 0

    def has_pending(self) -> bool:
        return bool(self._pending)

    def pending_total(self) -> int:
        return sum(self._pending.values())

    def partitions(self) -> set[Partition]:
        """The partitions with records pending."""
        return set(self._pending)

    def is_failed(self, message_id: bytes) -> bool:
        """Whether this process moved the record to failed/ (and nothing put it back)."""
        return message_id in self._failed_ids

    # -- what happened -------------------------------------------------------------------

    def opened(self, pending: Counter[Partition], *, files: int, failed: int) -> None:
        """What an earlier run left, as read from the files at open."""
        self._pending = pending
        self._files = files
        self._failed = failed

    def recounted(self, pending: Counter[Partition]) -> None:
        """The pending records as read from the files again (a replay paused mid-file)."""
        self._pending = pending

    def file_started(self) -> None:
        self._files += 1

    def appended(self, records: Iterable[SpoolRecord]) -> None:
        for r in records:
            self._pending[(r.queue, r.partition)] += 1

    def partition_drained(self, partition: Partition, count: int) -> None:
        """`count` records of the partition in a replayed file are settled (landed, failed,
        or landed by another worker)."""
        self._pending[partition] -= count
        if self._pending[partition] <= 0:
            del self._pending[partition]

    def file_removed(self) -> None:
        self._files -= 1

    def settle_when_empty(self) -> None:
        """No file left: nothing is pending, whatever a recount raced with."""
        if not self._files:
            self._pending.clear()

    def landed(self, count: int) -> None:
        self._replayed += count

    def moved_to_failed(self, records: list[SpoolRecord]) -> None:
        self._failed += len(records)
        self._failed_ids.update(r.message_id for r in records)

    def requeued(self, records: list[SpoolRecord], *, own_failed: bool) -> None:
        """A failed/ file moved back into line as a new spool file; `own_failed`: it was in
        this directory's failed/ (else another worker's, counted there)."""
        self._files += 1
        if own_failed:
            self._failed -= len(records)
        for r in records:
            self._pending[(r.queue, r.partition)] += 1
            self._failed_ids.discard(r.message_id)

    def cleared(self) -> None:
        """Every file was deleted (a test broker's reset): nothing is held, nothing failed."""
        self._pending.clear()
        self._files = 0
        self._failed = 0
        self._failed_ids.clear()


def count_pending(files: Iterable[Path]) -> Counter[Partition]:
    """Records per (queue, partition), read from spool files."""
    return Counter((r.queue, r.partition) for path in files for r in read_records(path))


def count_records(files: Iterable[Path], *, quiet: bool = False) -> int:
    return sum(1 for path in files for _ in read_records(path, quiet=quiet))


@attrs.frozen
class DirectoryUsage:
    directory: Path
    pending: int
    failed: int
    files: int


def directory_usage(directory: Path) -> DirectoryUsage:
    """What a spool directory holds, read from its files (another worker's, say)."""
    files = spool_files(directory)
    return DirectoryUsage(
        directory=directory,
        pending=count_records(files, quiet=True),
        failed=count_records(spool_files(directory / FAILED), quiet=True),
        files=len(files))
