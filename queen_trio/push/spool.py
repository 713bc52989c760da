"""The spool: pushes that survive a database outage and replay exactly once
(docs/decisions.md#spool).

While the database is unreachable, push groups are appended to a file under FILE_BUFFER_DIR
and fsynced before `buffered` is answered. Each record carries everything its frame needs:
queue, partition, message id, transaction id, producerSub, trace id, payload bytes, and whether
the payload is already encrypted (it is spooled plaintext when the queue's config is unknown,
and encrypted once at replay if the queue asks). While a partition has spooled records, new
pushes to it are spooled too, so its order holds across the outage.

The replay task drains the files oldest first through push_bundle, in per-partition order,
inside a transaction that first records each message id in queen.spool_replayed: a record
that already landed (a crash between commit and file deletion, or a second replay) is skipped,
whatever the queue's dedup window. It also looks for each record's message id in what is
stored: a record spooled because its commit's reply was lost (the connection dropped after
COMMIT) already landed, and is skipped. A file is deleted only once every record in it
committed. A failure that says "not now" (the connection, a lock or statement timeout, a
deadlock, a serialization failure, a busy pool) stops the round and is retried with backoff;
only a record that can never land goes to failed/ with the reason, and `retry_failed` puts
failed/ back in line on demand. Every disk access runs in a worker thread.

Several workers (spool_root.py): each appends to its own directory, and a partition with
records spooled anywhere under the root is marked held, so every worker spools its pushes
too. Records are stamped in order under the marker's lock; replaying a partition takes that
lock, gathers the partition's records from every directory and lands them in stamp order,
then removes the marker. A worker that meets, in its own files, a partition whose marker is
gone skips those records: another worker landed them.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import struct
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import attrs
import msgspec
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
from .spool_root import (
    FAILED,
    HELD,
    Marker,
    adopt,
    claim_root,
    directories,
    hold_directory,
    lock_marker,
    lock_markers,
    mark_held,
    marker_path,
    sequence_of,
    spool_files,
)

log = logging.getLogger("queen_trio.spool")

RECORD_HEADER = struct.Struct(">II")  # length, crc32 of the body
REPLAY_CHUNK = 500
# Marker paths a worker keeps computed (one per partition pushed to).
MARKER_PATHS_KEPT = 100_000
# Replay rounds that met a transient failure wait longer each time, up to this.
MAX_RETRY_SECONDS = 30.0


class SpoolRecord(msgspec.Struct, array_like=True):
    queue: str
    partition: str
    message_id: bytes
    transaction_id: str
    producer_sub: str | None
    trace_id: bytes | None
    payload: bytes
    encrypted: bool
    # Its place among the partition's spooled records, in every directory (0: written before
    # stamps, ordered by its file alone).
    stamp: int = 0


_ENCODE = msgspec.msgpack.Encoder()
_DECODE = msgspec.msgpack.Decoder(SpoolRecord)


def encode_record(record: SpoolRecord) -> bytes:
    body = _ENCODE.encode(record)
    return RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body


def read_records(path: Path, *, quiet: bool = False) -> Iterator[SpoolRecord]:
    """Every whole record of a file; a torn tail (a crash mid-write, never answered) ends it.
    `quiet`: the file may be another worker's, being appended to right now."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if not quiet:
            raise
        return  # its owner replayed it and removed it meanwhile
    at = 0
    while at + RECORD_HEADER.size <= len(data):
        length, crc = RECORD_HEADER.unpack_from(data, at)
        body = data[at + RECORD_HEADER.size: at + RECORD_HEADER.size + length]
        if len(body) < length or zlib.crc32(body) != crc:
            if not quiet:
                log.warning("spool file ends in a torn record", extra={"file": str(path)})
            return
        yield _DECODE.decode(body)
        at += RECORD_HEADER.size + length


@attrs.frozen
class SpoolStatistics:
    pending: int  # records not replayed yet
    failed: int   # records in failed/
    files: int    # spool files not replayed yet
    replayed: int  # records that landed through replay, since start


class Spool:
    def __init__(self, directory: Path, *, root: Path | None = None,
                 records_per_file: int = 10_000, adopt_from: list[Path] | None = None,
                 wait: float = 0.0) -> None:
        """`root`: the spool root when `directory` is a worker's (None: they are one);
        `adopt_from`: directories whose files move here at open, if nobody holds them;
        `wait`: how long open() waits for the directory's lock."""
        self.directory = Path(directory)
        self.root = Path(root) if root is not None else self.directory
        # A single broker owns its root: what is held is what it spooled itself. Workers
        # share theirs, so they look at the markers too (their paths cached: a push asks).
        self._shared = self.root != self.directory
        self._marker_paths: dict[tuple[str, str], str] = {}
        self._adopt_from = adopt_from or []
        self._wait = wait
        self.failed_dir = self.directory / "failed"
        self._records_per_file = records_per_file
        self._lock_file: Any = None
        self._write_lock = trio.Lock()
        # Held by a replay, so `discard` never deletes a file from under one.
        self._replay_lock = trio.Lock()
        self._active: Path | None = None
        self._active_count = 0
        self._sequence = 0
        # Spooled records not yet replayed, per (queue, partition).
        self._pending: Counter[tuple[str, str]] = Counter()
        self._failed = 0
        self._files = 0
        self._replayed = 0
        self._throttle = Throttle()
        # Message ids this process moved to failed/: never gathered again this run.
        self._failed_ids: set[bytes] = set()
        self.wake = trio.Event()

    # -- ownership and boot ------------------------------------------------------------------

    async def open(self) -> None:
        """Take the directory (one broker at a time) and count what a previous run left."""
        await trio.to_thread.run_sync(self._open)
        if self._pending:
            log.warning("spool holds records from an earlier run; they will replay",
                        extra={"pending": sum(self._pending.values())})

    def _open(self) -> None:
        self.failed_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = hold_directory(self.directory, wait=self._wait)
        adopt(self._adopt_from, self.directory)
        existing = self.files()
        for path in existing:
            self._sequence = max(self._sequence, int(path.stem.split("-")[1]))
        for path in self.failed_dir.glob("spool-*.log"):
            self._sequence = max(self._sequence, int(path.stem.split("-")[1]))
        self._files = len(existing)
        self._recount()
        self._failed = sum(1 for p in self.failed_dir.glob("*.log") for _ in read_records(p))
        if self.root == self.directory:
            # A single broker owns the whole root: mark what it holds (a supervisor does it
            # for its workers, claim_spool_root).
            mark_held(self.root, set(self._pending))

    def _recount(self) -> None:
        self._pending = _count_pending(self.files)

    async def close(self) -> None:
        if self._lock_file is not None:
            await trio.to_thread.run_sync(self._lock_file.close)
            self._lock_file = None

    def files(self) -> list[Path]:
        return sorted(self.directory.glob("spool-*.log"))

    def statistics(self) -> SpoolStatistics:
        """Counted in memory as records come and go: no disk access."""
        return SpoolStatistics(pending=sum(self._pending.values()), failed=self._failed,
                               files=self._files, replayed=self._replayed)

    def holds(self, queue: str, partition: str) -> bool:
        """Whether pushes to the partition must queue behind spooled records, here or in any
        worker's directory."""
        key = (queue, partition)
        if self._pending[key] > 0:
            return True
        if not self._shared:
            return False
        path = self._marker_paths.get(key)
        if path is None:
            if len(self._marker_paths) >= MARKER_PATHS_KEPT:
                self._marker_paths.clear()
            path = self._marker_paths[key] = str(marker_path(self.root, queue, partition))
        # A stat (a cached negative lookup once nothing is held): no file opened.
        return os.path.exists(path)

    # -- writing -----------------------------------------------------------------------------

    async def append(self, records: list[SpoolRecord]) -> None:
        """Append and fsync; only then may `buffered` be answered."""
        if not records:
            return
        # The partitions' markers first (the order every lock here is taken in), then the
        # file: no other process stamps or replays these partitions until the fsync is done.
        markers = await trio.to_thread.run_sync(_stamp, self.root, records)
        try:
            await self._write(records)
        finally:
            await trio.to_thread.run_sync(_release, markers)
        self.wake.set()

    async def _write(self, records: list[SpoolRecord]) -> None:
        data = b"".join(encode_record(r) for r in records)
        async with self._write_lock:
            if self._active is None or self._active_count >= self._records_per_file:
                self._sequence += 1
                self._active = self.directory / f"spool-{self._sequence:012d}.log"
                self._active_count = 0
                self._files += 1
            try:
                await trio.to_thread.run_sync(_append_fsync, self._active, data)
            except BaseException:
                # Nothing of it counts (the file is cut back); later records start afresh.
                self._active = None
                raise
            self._active_count += len(records)
            for r in records:
                self._pending[(r.queue, r.partition)] += 1

    async def seal(self) -> list[Path]:
        """New writes go to a new file; the files sealed, which no append reopens. Listed
        under the write lock: a file an append opens after this is not one of them (a replay
        that took it would remove it under records appended after its read)."""
        async with self._write_lock:
            self._active = None
            return await trio.to_thread.run_sync(self.files)

    async def discard(self) -> None:
        """Delete every spooled record, failed or not, and the partitions' held markers, and
        forget their counts (a test broker's reset, alone on its spool root: nothing of an
        earlier test may land, or hold a partition, later)."""
        async with self._replay_lock, self._write_lock:
            await trio.to_thread.run_sync(self._delete_files)
            self._active = None
            self._active_count = 0
            self._pending.clear()
            self._files = 0
            self._failed = 0
            self._failed_ids.clear()

    def _delete_files(self) -> None:
        markers = self.root / HELD
        for path in [*self.files(), *self.failed_dir.glob("spool-*"),
                     *(markers.iterdir() if markers.is_dir() else ())]:
            path.unlink(missing_ok=True)

    # -- replay ------------------------------------------------------------------------------

    async def replay(self, db: Database, queues: Queues, cipher: PayloadCipher) -> int:
        """Replay every sealed file; the number of records that landed. Stops at the first
        transient failure (the next call resumes)."""
        async with self._replay_lock:
            return await self._replay_sealed(db, queues, cipher)

    async def _replay_sealed(self, db: Database, queues: Queues, cipher: PayloadCipher) -> int:
        sealed = await self.seal()
        landed = 0
        cache: dict[Path, tuple[tuple[int, int], list[SpoolRecord]]] = {}
        for path in sealed:
            records = await trio.to_thread.run_sync(_read_all, path)
            mine = Counter((r.queue, r.partition) for r in records)  # in order of appearance
            for key in mine:
                marker = await trio.to_thread.run_sync(
                    partial(lock_marker, marker_path(self.root, *key), create=False))
                if marker is not None:  # else another worker landed the partition's records
                    try:
                        landed += await self._replay_partition(db, queues, cipher, key, cache)
                    except _Paused as paused:
                        await trio.to_thread.run_sync(_release, [marker])
                        log.info("spool replay paused", extra={"error": str(paused.cause)})
                        async with self._write_lock:  # appends count under it too
                            self._pending = await trio.to_thread.run_sync(_count_pending,
                                                                          self.files)
                        self._replayed += landed + paused.landed
                        return landed + paused.landed
                    except BaseException:
                        await trio.to_thread.run_sync(_release, [marker])
                        raise
                    # Every record of the partition, in every directory, has landed.
                    await trio.to_thread.run_sync(partial(marker.release, remove=True))
                self._pending[key] -= mine[key]
                if self._pending[key] <= 0:
                    del self._pending[key]
            await trio.to_thread.run_sync(_remove, path)
            self._files -= 1
        if not self._files:
            self._pending.clear()  # whatever a recount raced with, nothing is left
        self._replayed += landed
        return landed

    async def _replay_partition(self, db: Database, queues: Queues, cipher: PayloadCipher,
                                key: tuple[str, str],
                                cache: dict[Path, tuple[tuple[int, int], list[SpoolRecord]]]
                                ) -> int:
        """Under the partition's marker: its records from every directory, in stamp order."""
        gathered = await trio.to_thread.run_sync(_gather, self.root, key, cache)
        todo = [r for r in gathered if r.message_id not in self._failed_ids]
        landed = 0
        for start in range(0, len(todo), REPLAY_CHUNK):
            chunk = todo[start:start + REPLAY_CHUNK]
            try:
                landed += await _replay_chunk(db, queues, cipher, chunk)
            except Exception as exc:
                if is_transient(exc):
                    # Not now: the files stay (the chunks that landed are skipped next time),
                    # so the partition stays held, and new pushes to it keep queueing behind.
                    raise _Paused(exc, landed) from exc
                await self._fail(chunk, exc)
        return landed

    async def _fail(self, chunk: list[SpoolRecord], exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        log.error("spooled records can never land; moved to failed/",
                  extra={"queue": chunk[0].queue, "partition": chunk[0].partition,
                         "count": len(chunk), "reason": reason})
        async with self._write_lock:  # the file sequence is shared with appends
            self._sequence += 1
            path = self.failed_dir / f"spool-{self._sequence:012d}.log"
        await trio.to_thread.run_sync(_write_failed, path, chunk, reason)
        self._failed += len(chunk)
        self._failed_ids.update(r.message_id for r in chunk)

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
                async with self._write_lock:
                    self._sequence += 1
                    target = self.directory / f"spool-{self._sequence:012d}.log"
                    await trio.to_thread.run_sync(_requeue, path, target)
                    self._files += 1
                    if path.parent == self.failed_dir:
                        self._failed -= len(records)
                    for r in records:
                        self._pending[(r.queue, r.partition)] += 1
                        self._failed_ids.discard(r.message_id)
                    moved += len(records)
            finally:
                await trio.to_thread.run_sync(_release, markers)
        if moved:
            log.warning("failed spool records put back for replay", extra={"records": moved})
            self.wake.set()
        return moved

    async def run_replay(self, db: Database, queues: Queues, cipher: PayloadCipher,
                         *, retry_seconds: float = 1.0,
                         task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        wait = retry_seconds
        while True:
            landed = 0
            if self._pending and await db.ping():
                try:
                    landed = await self.replay(db, queues, cipher)
                except Exception as exc:  # logged (once a minute); the next round retries
                    held = self._throttle.admit()
                    if held is not None:
                        log.warning("spool replay failed", exc_info=True,
                                    extra={"error": str(exc), "failures_held_back": held})
                else:
                    if landed:
                        pending = sum(self._pending.values())
                        log.warning("spool replayed",
                                    extra={"records": landed, "pending": pending})
            if not self._pending:
                wait = retry_seconds
                self.wake = trio.Event()
                await self.wake.wait()
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


def _append_fsync(path: Path, data: bytes) -> None:
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
    _fsync_directory(path.parent)


class _Paused(Exception):
    """A transient failure stopped a partition's replay, after `landed` records."""

    def __init__(self, cause: BaseException, landed: int) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.landed = landed


def _read_all(path: Path) -> list[SpoolRecord]:
    return list(read_records(path))


def _stamp(root: Path, records: list[SpoolRecord]) -> list[Marker]:
    """Lock the records' partitions' markers and stamp the records, in order."""
    paths = [marker_path(root, r.queue, r.partition) for r in records]
    markers = lock_markers(paths)
    by_path = {m.path: m for m in markers}
    stamps = {path: iter(by_path[path].next_stamps(n)) for path, n in Counter(paths).items()}
    for record, path in zip(records, paths, strict=True):
        record.stamp = next(stamps[path])
    return markers


def _release(markers: list[Marker]) -> None:
    for marker in markers:
        marker.release()


def _gather(root: Path, key: tuple[str, str],
            cache: dict[Path, tuple[tuple[int, int], list[SpoolRecord]]]) -> list[SpoolRecord]:
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


def _failed_files(root: Path, own: Path) -> list[Path]:
    """failed/ files of every directory under the root, this process's own first."""
    others = [d for d in directories(root) if d != own]
    return [path for d in (own, *others) for path in spool_files(d / FAILED)]


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
        pending=sum(1 for path in files for _ in read_records(path, quiet=True)),
        failed=sum(1 for path in spool_files(directory / FAILED)
                   for _ in read_records(path, quiet=True)),
        files=len(files))


@contextmanager
def claim_spool_root(root: Path, *, workers: int) -> Iterator[None]:
    """A supervisor's hold on the spool root for its workers (spool_root.claim_root), and the
    held markers of every partition spooled in any directory, made before a worker starts."""
    with claim_root(root, workers=workers):
        keys = {(r.queue, r.partition) for d in directories(root) for path in spool_files(d)
                for r in read_records(path)}
        mark_held(root, keys)
        yield


def _count_pending(files: Callable[[], list[Path]]) -> Counter[tuple[str, str]]:
    """Records not replayed yet, per (queue, partition), read from the spool files."""
    return Counter((r.queue, r.partition) for path in files() for r in read_records(path))


def _write_failed(path: Path, chunk: list[SpoolRecord], reason: str) -> None:
    _append_fsync(path, b"".join(encode_record(r) for r in chunk))
    path.with_suffix(".reason").write_text(reason + "\n")


def _requeue(path: Path, target: Path) -> list[SpoolRecord]:
    """Move a failed/ file back into the spool (its reason goes); its records."""
    records = list(read_records(path))
    os.replace(path, target)
    path.with_suffix(".reason").unlink(missing_ok=True)
    _fsync_directory(target.parent)
    _fsync_directory(path.parent)
    return records


def _remove(path: Path) -> None:
    path.unlink()
    _fsync_directory(path.parent)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def _replay_chunk(db: Database, queues: Queues, cipher: PayloadCipher,
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
