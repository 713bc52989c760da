"""The spool: pushes that survive a database outage and replay exactly once
(docs/decisions.md#spool).

While the database is unreachable, push groups are appended to a file under FILE_BUFFER_DIR
and fsynced before `buffered` is answered. Each record carries everything its frame needs:
queue, partition, message id, transaction id, producerSub, trace id, payload bytes, and whether
the payload is already encrypted (it is spooled plaintext when the queue's config is unknown,
and encrypted once at replay if the queue asks). While a partition has spooled records, new
pushes to it are spooled too, so its order holds across the outage.

`Spool` is the face the broker uses; its parts are the file format (spool_codec.py), the
writer that appends and seals files (spool_writer.py), the ledger that counts what is pending
and failed (spool_ledger.py), the replayer that drains sealed files through the push path and
keeps failed/ (spool_replay.py), and the directories, their locks and the partitions' held
markers (spool_root.py).

Several workers: each appends to its own directory, and a partition with records spooled
anywhere under the root is marked held, so every worker spools its pushes too. Records are
stamped in order under the marker's lock; replaying a partition takes that lock, gathers the
partition's records from every directory and lands them in stamp order, then removes the
marker. A worker that meets, in its own files, a partition whose marker is gone skips those
records: another worker landed them.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import IO

import trio

from ..queues.queues import Queues
from ..storage.database import Database
from ..storage.encryption import PayloadCipher
from .spool_codec import SpoolRecord, encode_record, read_records
from .spool_ledger import (
    DirectoryUsage,
    SpoolLedger,
    SpoolStatistics,
    count_pending,
    count_records,
    directory_usage,
)
from .spool_replay import SpoolReplayer, land_chunk
from .spool_root import (
    FAILED,
    HELD,
    HeldLookup,
    adopt,
    claim_spool_root,
    hold_directory,
    mark_held,
    release_markers,
    spool_files,
    stamp_records,
)
from .spool_writer import SpoolWriter

# The spool's names that callers import from here (the parts hold them).
__all__ = ["DirectoryUsage", "Spool", "SpoolRecord", "SpoolStatistics", "claim_spool_root",
           "directory_usage", "encode_record", "read_records"]

log = logging.getLogger("queen_trio.spool")


class Spool:
    def __init__(self, directory: Path, *, root: Path | None = None,
                 records_per_file: int = 10_000, adopt_from: list[Path] | None = None,
                 wait: float = 0.0) -> None:
        """`root`: the spool root when `directory` is a worker's (None: they are one);
        `adopt_from`: directories whose files move here at open, if nobody holds them;
        `wait`: how long open() waits for the directory's lock."""
        self.directory = Path(directory)
        self.root = Path(root) if root is not None else self.directory
        self.failed_dir = self.directory / FAILED
        self._adopt_from = adopt_from or []
        self._wait = wait
        self._lock_file: IO[str] | None = None
        # A single broker owns its root: what is held is what it spooled itself. Workers
        # share theirs, so they look at the markers too.
        self._held_elsewhere = HeldLookup(self.root) if self.root != self.directory else None
        self._ledger = SpoolLedger()
        self._writer = SpoolWriter(self.directory, self._ledger,
                                   records_per_file=records_per_file)
        self._replayer = SpoolReplayer(self.directory, self._writer, self._ledger,
                                       root=self.root)

    # -- ownership and boot ------------------------------------------------------------------

    async def open(self) -> None:
        """Take the directory (one broker at a time) and count what a previous run left."""
        await trio.to_thread.run_sync(self._open)
        if self._ledger.has_pending():
            log.warning("spool holds records from an earlier run; they will replay",
                        extra={"pending": self._ledger.pending_total()})

    def _open(self) -> None:
        self.failed_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = hold_directory(self.directory, wait=self._wait)
        adopt(self._adopt_from, self.directory)
        existing = self.files()
        self._writer.resume_after([*existing, *spool_files(self.failed_dir)])
        self._ledger.opened(count_pending(existing), files=len(existing),
                            failed=count_records(self.failed_dir.glob("*.log")))
        if self.root == self.directory:
            # A single broker owns the whole root: mark what it holds (a supervisor does it
            # for its workers, claim_spool_root).
            mark_held(self.root, self._ledger.partitions())

    async def close(self) -> None:
        if self._lock_file is not None:
            await trio.to_thread.run_sync(self._lock_file.close)
            self._lock_file = None

    def files(self) -> list[Path]:
        return spool_files(self.directory)

    def statistics(self) -> SpoolStatistics:
        """Counted in memory as records come and go: no disk access."""
        return self._ledger.statistics()

    def holds(self, queue: str, partition: str) -> bool:
        """Whether pushes to the partition must queue behind spooled records, here or in any
        worker's directory."""
        if self._ledger.holds((queue, partition)):
            return True
        return self._held_elsewhere is not None and self._held_elsewhere(queue, partition)

    # -- writing -----------------------------------------------------------------------------

    async def append(self, records: list[SpoolRecord]) -> None:
        """Append and fsync; only then may `buffered` be answered."""
        if not records:
            return
        # The partitions' markers first (the order every lock here is taken in), then the
        # file: no other process stamps or replays these partitions until the fsync is done.
        markers = await trio.to_thread.run_sync(stamp_records, self.root, records)
        try:
            await self._writer.append(records)
        finally:
            await trio.to_thread.run_sync(release_markers, markers)
        self._replayer.wake()

    async def seal(self) -> list[Path]:
        """New writes go to a new file; the files sealed, which no append reopens. Listed
        under the writer's lock: a file an append opens after this is not one of them (a
        replay that took it would remove it under records appended after its read)."""
        return await self._writer.seal()

    async def discard(self) -> None:
        """Delete every spooled record, failed or not, and the partitions' held markers, and
        forget their counts (a test broker's reset, alone on its spool root: nothing of an
        earlier test may land, or hold a partition, later)."""
        async with self._replayer.idle(), self._writer.exclusive():
            await trio.to_thread.run_sync(self._delete_files)
            self._writer.start_afresh()
            self._ledger.cleared()

    def _delete_files(self) -> None:
        markers = self.root / HELD
        for path in [*self.files(), *self.failed_dir.glob("spool-*"),
                     *(markers.iterdir() if markers.is_dir() else ())]:
            path.unlink(missing_ok=True)

    # -- replay ------------------------------------------------------------------------------

    async def replay(self, db: Database, queues: Queues, cipher: PayloadCipher) -> int:
        """Replay every sealed file; the number of records that landed. Stops at the first
        transient failure (the next call resumes)."""
        return await self._replayer.replay(partial(land_chunk, db, queues, cipher))

    async def retry_failed(self) -> int:
        """Put every record of failed/ (this directory's and every other worker's) back in
        line for replay here; the number requeued."""
        return await self._replayer.retry_failed()

    async def run_replay(self, db: Database, queues: Queues, cipher: PayloadCipher,
                         *, retry_seconds: float = 1.0,
                         task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._replayer.run(db.ping, partial(land_chunk, db, queues, cipher),
                                 retry_seconds=retry_seconds, task_status=task_status)
