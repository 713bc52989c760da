"""Replay: draining sealed spool files through the push path (docs/decisions.md#replay).

Files go oldest first. For each partition of a file the replayer takes the partition's held
marker, gathers its records from every directory under the root, lands them in stamp order
in chunks, and removes the marker; a marker that is gone means another worker landed them.
A file is deleted once every partition in it is through.

Each chunk lands in one transaction that first records each message id in
queen.spool_replayed and looks for each id in what is stored, so a record that landed already
(a crash between commit and file deletion, a second replay, a commit whose reply was lost) is
skipped, whatever the queue's dedup window. A failure that says "not now" (`is_transient`)
pauses the round: the files and the marker stay, and the next round resumes. Any other
failure moves the chunk to failed/ with the reason, so one bad record never blocks the rest;
`retry_failed` puts failed/ back in line on demand. Every disk access runs in a worker thread.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import asyncpg
import attrs
import trio

from ..errors import DatabaseUnavailable
from ..logs import Throttle
from ..queues.queues import Queues
from ..storage import frames
from ..storage.database import Database, is_transient
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q
from .bundle import PackedGroup, Segment, commit_bundle
from .items import Group, PushItem
from .outcome import Outcome
from .spool_codec import SpoolRecord, encode_records, read_records
from .spool_ledger import Partition, SpoolLedger, count_pending
from .spool_root import (
    FAILED,
    Marker,
    directories,
    fsync_directory,
    lock_marker,
    lock_markers,
    marker_path,
    release_markers,
    sequence_of,
    spool_files,
)
from .spool_writer import SpoolWriter, append_fsync

log = logging.getLogger("queen_trio.spool")

REPLAY_CHUNK = 500
# Replay rounds that met a transient failure wait longer each time, up to this.
MAX_RETRY_SECONDS = 30.0

# Lands one partition's chunk of records, in order; the number that landed (those that had
# landed already are skipped). `land_chunk` below, bound to a database.
Land = Callable[[list[SpoolRecord]], Awaitable[int]]
# Files read while gathering, by path: ((size, mtime), records).
FileCache = dict[Path, tuple[tuple[int, int], list[SpoolRecord]]]


@attrs.frozen
class Replayed:
    """How far a replay got: `landed` records, and the transient failure that paused it
    (None: it went through, every record landed or moved to failed/)."""

    landed: int
    paused: Exception | None = None


class SpoolReplayer:
    def __init__(self, directory: Path, writer: SpoolWriter, ledger: SpoolLedger, *,
                 root: Path | None = None) -> None:
        self.directory = directory
        self.root = root if root is not None else directory
        self.failed_dir = directory / FAILED
        self._writer = writer
        self._ledger = ledger
        # One replay at a time: two would count the same file's records out twice, and a
        # discard must never delete a file from under one.
        self._lock = trio.Lock()
        self._throttle = Throttle()
        self._wake = trio.Event()

    def wake(self) -> None:
        """Records arrived: a sleeping `run` looks at once."""
        self._wake.set()

    @asynccontextmanager
    async def idle(self) -> AsyncIterator[None]:
        """No replay runs inside."""
        async with self._lock:
            yield

    # -- a round -------------------------------------------------------------------------

    async def replay(self, land: Land) -> int:
        """Replay every sealed file; the number of records that landed. Stops at the first
        transient failure (the next call resumes)."""
        async with self._lock:
            sealed = await self._writer.seal()
            landed = 0
            cache: FileCache = {}
            for path in sealed:
                done = await self._replay_file(path, land, cache)
                landed += done.landed
                if done.paused is not None:
                    log.info("spool replay paused", extra={"error": str(done.paused)})
                    await self._recount()
                    self._ledger.landed(landed)
                    return landed
                await trio.to_thread.run_sync(_remove, path)
                self._ledger.file_removed()
            self._ledger.settle_when_empty()
            self._ledger.landed(landed)
            return landed

    async def _replay_file(self, path: Path, land: Land, cache: FileCache) -> Replayed:
        records = await trio.to_thread.run_sync(_read_all, path)
        mine = Counter((r.queue, r.partition) for r in records)  # in order of appearance
        landed = 0
        for key, count in mine.items():
            marker = await trio.to_thread.run_sync(
                partial(lock_marker, marker_path(self.root, *key), create=False))
            if marker is not None:  # else another worker landed the partition's records
                done = await self._replay_held(marker, key, land, cache)
                landed += done.landed
                if done.paused is not None:
                    return Replayed(landed, done.paused)
            self._ledger.partition_drained(key, count)
        return Replayed(landed)

    async def _replay_held(self, marker: Marker, key: Partition, land: Land,
                           cache: FileCache) -> Replayed:
        """The partition's replay under its marker, which goes once every record of the
        partition, in every directory, has landed (or stays, when the replay paused)."""
        try:
            done = await self._replay_partition(key, land, cache)
        except BaseException:
            await trio.to_thread.run_sync(release_markers, [marker])
            raise
        if done.paused is not None:
            await trio.to_thread.run_sync(release_markers, [marker])
        else:
            await trio.to_thread.run_sync(partial(marker.release, remove=True))
        return done

    async def _replay_partition(self, key: Partition, land: Land,
                                cache: FileCache) -> Replayed:
        """Under the partition's marker: its records from every directory, in stamp order."""
        gathered = await trio.to_thread.run_sync(gather, self.root, key, cache)
        todo = [r for r in gathered if not self._ledger.is_failed(r.message_id)]
        landed = 0
        for start in range(0, len(todo), REPLAY_CHUNK):
            chunk = todo[start:start + REPLAY_CHUNK]
            try:
                landed += await land(chunk)
            except Exception as exc:
                if is_transient(exc):
                    # Not now: the files stay (the chunks that landed are skipped next time),
                    # so the partition stays held, and new pushes to it keep queueing behind.
                    return Replayed(landed, paused=exc)
                await self._fail(chunk, exc)
        return Replayed(landed)

    async def _recount(self) -> None:
        """A paused file stays, with partitions already counted out: count it again."""
        async with self._writer.exclusive():  # appends count under it too
            self._ledger.recounted(await trio.to_thread.run_sync(
                lambda: count_pending(spool_files(self.directory))))

    # -- failed/ -------------------------------------------------------------------------

    async def _fail(self, chunk: list[SpoolRecord], exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        log.error("spooled records can never land; moved to failed/",
                  extra={"queue": chunk[0].queue, "partition": chunk[0].partition,
                         "count": len(chunk), "reason": reason})
        path = await self._writer.new_file(self.failed_dir)
        await trio.to_thread.run_sync(_write_failed, path, chunk, reason)
        self._ledger.moved_to_failed(chunk)

    async def retry_failed(self) -> int:
        """Put every record of failed/ (this directory's and every other worker's) back in
        line for replay here; the number requeued."""
        moved = 0
        for path in await trio.to_thread.run_sync(_failed_files, self.root, self.directory):
            records = await trio.to_thread.run_sync(_read_all, path)
            # Held while it moves: a replay of these partitions waits, then sees it.
            markers = await trio.to_thread.run_sync(
                lock_markers, [marker_path(self.root, r.queue, r.partition) for r in records])
            try:
                await self._writer.take_back(path, records,
                                             own_failed=path.parent == self.failed_dir)
                moved += len(records)
            finally:
                await trio.to_thread.run_sync(release_markers, markers)
        if moved:
            log.warning("failed spool records put back for replay", extra={"records": moved})
            self.wake()
        return moved

    # -- the background task -------------------------------------------------------------

    async def run(self, ping: Callable[[], Awaitable[bool]], land: Land, *,
                  retry_seconds: float = 1.0,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Replay whenever records are pending and the database answers: at once while a
        round makes progress, backing off while it does not, asleep while nothing is left."""
        task_status.started()
        wait = retry_seconds
        while True:
            landed = 0
            if self._ledger.has_pending() and await ping():
                landed = await self._round(land)
            if not self._ledger.has_pending():
                wait = retry_seconds
                self._wake = trio.Event()
                await self._wake.wait()
            elif landed:
                # Progress: records keep arriving behind the replayed ones (their partitions
                # still spool), so go again at once, until the spool is empty.
                wait = retry_seconds
                await trio.lowlevel.checkpoint()
            else:
                # Still behind: wait longer each round, so a database that is busy (locks,
                # timeouts) or still away is not hammered.
                await trio.sleep(wait)
                wait = min(wait * 2, MAX_RETRY_SECONDS)

    async def _round(self, land: Land) -> int:
        try:
            landed = await self.replay(land)
        except Exception as exc:  # logged (once a minute); the next round retries
            held = self._throttle.admit()
            if held is not None:
                log.warning("spool replay failed", exc_info=True,
                            extra={"error": str(exc), "failures_held_back": held})
            return 0
        if landed:
            log.warning("spool replayed",
                        extra={"records": landed, "pending": self._ledger.pending_total()})
        return landed


async def land_chunk(db: Database, queues: Queues, cipher: PayloadCipher,
                     chunk: list[SpoolRecord]) -> int:
    """One partition's records, in order, in one transaction; skips what already landed."""
    facts = await queues.refresh(chunk[0].queue)

    async def run(conn: asyncpg.Connection) -> int:
        async with conn.transaction():
            ids = [uuid.UUID(bytes=r.message_id) for r in chunk]
            fresh = {r["message_id"].bytes
                     for r in await Q.mark_replayed.fetch(conn, message_ids=ids)}
            # A commit whose reply was lost stored these already, whatever the dedup window.
            landed = {r["message_id"].bytes for r in await Q.spool_landed.fetch(
                conn, queue=chunk[0].queue, partition=chunk[0].partition,
                transaction_ids=[r.transaction_id for r in chunk], message_ids=ids)}
            todo = [r for r in chunk if r.message_id in fresh and r.message_id not in landed]
            if not todo:
                return 0
            items: list[PushItem] = []
            packed_frames: list[bytes] = []
            for record in todo:
                payload, encrypted = record.payload, record.encrypted
                if not encrypted and facts.encryption_enabled and cipher.enabled:
                    payload, encrypted = cipher.encrypt(payload), True  # once, never twice
                item = PushItem(index=len(items), queue=record.queue, partition=record.partition,
                                transaction_id=record.transaction_id, payload=record.payload,
                                message_id=uuid.UUID(bytes=record.message_id))
                items.append(item)
                packed_frames.append(frames.pack(
                    record.message_id, record.transaction_id.encode(), payload,
                    producer_sub=(record.producer_sub or "").encode(),
                    trace_id=record.trace_id, encrypted=encrypted))
            group = Group(chunk[0].queue, chunk[0].partition, items)
            packed = PackedGroup(group, facts.encryption_enabled, facts.dedup, items,
                                 packed_frames)
            segment = Segment.fuse([packed])
            # Replay bypasses maxSize (docs/decisions.md#replay): what was accepted must land.
            await commit_bundle(conn, [segment], check_max_size=False)
            if segment.outcome is Outcome.STALE:
                raise DatabaseUnavailable("queue changed during replay; retrying")
            if segment.outcome is not Outcome.QUEUED:
                raise RuntimeError(f"replay of {group.queue}/{group.partition}: "
                                   f"{segment.outcome.value} {segment.error or ''}")
            return len(todo)

    return await db.call(run)


def gather(root: Path, key: Partition, cache: FileCache) -> list[SpoolRecord]:
    """Every record of the partition `key` in every directory under the root, in stamp order
    (then by directory, file and place). The caller holds the partition's marker, so no
    record of it is being written; files unchanged since the last look come from `cache`."""
    found: list[tuple[int, int, int, int, SpoolRecord]] = []
    for d, directory in enumerate(directories(root)):
        for path in spool_files(directory):
            try:
                info = path.stat()
            except FileNotFoundError:
                continue  # replayed and removed by its owner
            version = (info.st_size, info.st_mtime_ns)
            cached = cache.get(path)
            if cached is None or cached[0] != version:
                cached = cache[path] = (version, list(read_records(path, quiet=True)))
            for n, record in enumerate(cached[1]):
                if (record.queue, record.partition) == key:
                    found.append((record.stamp, d, sequence_of(path), n, record))
    found.sort(key=lambda entry: entry[:4])
    return [entry[4] for entry in found]


def _read_all(path: Path) -> list[SpoolRecord]:
    return list(read_records(path))


def _failed_files(root: Path, own: Path) -> list[Path]:
    """failed/ files of every directory under the root, this process's own first."""
    others = [d for d in directories(root) if d != own]
    return [path for d in (own, *others) for path in spool_files(d / FAILED)]


def _write_failed(path: Path, chunk: list[SpoolRecord], reason: str) -> None:
    append_fsync(path, encode_records(chunk))
    path.with_suffix(".reason").write_text(reason + "\n")


def _remove(path: Path) -> None:
    path.unlink()
    fsync_directory(path.parent)
