"""The spool: pushes that survive a database outage and replay exactly once (DECISIONS: Spool).

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
from pathlib import Path
from typing import Any

import asyncpg
import attrs
import msgspec
import trio

from ..errors import ConfigError, DatabaseUnavailable
from ..logs import Throttle
from ..queues.queues import Queues
from ..storage import frames
from ..storage.database import Database, is_transient
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q
from .bundle import PackedGroup, Segment, commit_bundle
from .items import Group, PushItem
from .outcome import Outcome
from .spool_root import adopt, hold_directory

log = logging.getLogger("queen_trio.spool")

RECORD_HEADER = struct.Struct(">II")  # length, crc32 of the body
REPLAY_CHUNK = 500
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


_ENCODE = msgspec.msgpack.Encoder()
_DECODE = msgspec.msgpack.Decoder(SpoolRecord)


def encode_record(record: SpoolRecord) -> bytes:
    body = _ENCODE.encode(record)
    return RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body


def read_records(path: Path) -> Iterator[SpoolRecord]:
    """Every whole record of a file; a torn tail (a crash mid-write, never answered) ends it."""
    data = path.read_bytes()
    at = 0
    while at + RECORD_HEADER.size <= len(data):
        length, crc = RECORD_HEADER.unpack_from(data, at)
        body = data[at + RECORD_HEADER.size: at + RECORD_HEADER.size + length]
        if len(body) < length or zlib.crc32(body) != crc:
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
    def __init__(self, directory: Path, *, records_per_file: int = 10_000,
                 adopt_from: list[Path] | None = None, wait: float = 0.0) -> None:
        """`adopt_from`: directories whose files move here at open, if nobody holds them;
        `wait`: how long open() waits for the directory's lock."""
        self.directory = Path(directory)
        self._adopt_from = adopt_from or []
        self._wait = wait
        self.failed_dir = self.directory / "failed"
        self._records_per_file = records_per_file
        self._lock_file: Any = None
        self._write_lock = trio.Lock()
        self._active: Path | None = None
        self._active_count = 0
        self._sequence = 0
        # Spooled records not yet replayed, per (queue, partition).
        self._pending: Counter[tuple[str, str]] = Counter()
        self._failed = 0
        self._files = 0
        self._replayed = 0
        self._throttle = Throttle()
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
        return self._pending[(queue, partition)] > 0

    # -- writing -----------------------------------------------------------------------------

    async def append(self, records: list[SpoolRecord]) -> None:
        """Append and fsync; only then may `buffered` be answered."""
        if not records:
            return
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
        self.wake.set()

    async def seal(self) -> None:
        """New writes go to a new file (the replay takes the sealed ones)."""
        async with self._write_lock:
            self._active = None

    # -- replay ------------------------------------------------------------------------------

    async def replay(self, db: Database, queues: Queues, cipher: PayloadCipher) -> int:
        """Replay every sealed file; the number of records that landed. Stops at the first
        transient failure (the next call resumes)."""
        await self.seal()
        landed = 0
        for path in await trio.to_thread.run_sync(self.files):
            records = await trio.to_thread.run_sync(_read_all, path)
            by_partition: dict[tuple[str, str], list[SpoolRecord]] = {}
            for record in records:
                by_partition.setdefault((record.queue, record.partition), []).append(record)
            for key, group in by_partition.items():
                for start in range(0, len(group), REPLAY_CHUNK):
                    chunk = group[start:start + REPLAY_CHUNK]
                    try:
                        landed += await _replay_chunk(db, queues, cipher, chunk)
                    except Exception as exc:
                        if is_transient(exc):
                            # Not now: the whole file stays (the chunks that landed are
                            # skipped next time), so its partitions still count as holding
                            # records, and new pushes to them keep queueing behind.
                            log.info("spool replay paused", extra={"error": str(exc)})
                            async with self._write_lock:  # appends count under it too
                                self._pending = await trio.to_thread.run_sync(_count_pending,
                                                                              self.files)
                            self._replayed += landed
                            return landed
                        await self._fail(chunk, exc)
                    self._pending[key] -= len(chunk)
                    if self._pending[key] <= 0:
                        del self._pending[key]
            await trio.to_thread.run_sync(_remove, path)
            self._files -= 1
        if not self._files:
            self._pending.clear()  # whatever a recount raced with, nothing is left
        self._replayed += landed
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

    async def retry_failed(self) -> int:
        """Put every record of failed/ back in line for replay; the number requeued."""
        moved = 0
        async with self._write_lock:
            for path in sorted(await trio.to_thread.run_sync(
                    lambda: list(self.failed_dir.glob("spool-*.log")))):
                self._sequence += 1
                target = self.directory / f"spool-{self._sequence:012d}.log"
                records = await trio.to_thread.run_sync(_requeue, path, target)
                self._files += 1
                self._failed -= len(records)
                for r in records:
                    self._pending[(r.queue, r.partition)] += 1
                moved += len(records)
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


def _read_all(path: Path) -> list[SpoolRecord]:
    return list(read_records(path))


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
            # Replay bypasses maxSize (DECISIONS: Spool): what was accepted must land.
            await commit_bundle(conn, [segment], check_max_size=False)
            if segment.outcome is Outcome.STALE:
                raise DatabaseUnavailable("queue changed during replay; retrying")
            if segment.outcome is not Outcome.QUEUED:
                raise RuntimeError(f"replay of {group.queue}/{group.partition}: "
                                   f"{segment.outcome.value} {segment.error or ''}")
            return len(todo)

    return await db.call(run)
