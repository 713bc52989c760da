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
whatever the queue's dedup window. A file is deleted only once every record in it committed;
a record that can never land goes to failed/ with the reason.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import uuid
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import attrs
import msgspec
import trio

from ..errors import ConfigError, DatabaseUnavailable
from ..queues.queues import Queues
from ..storage import frames
from ..storage.database import Database, is_connection_failure
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q
from .bundle import PackedGroup, Segment, commit_bundle
from .items import Group, PushItem
from .outcome import Outcome

log = logging.getLogger("queen_trio.spool")

RECORD_HEADER = struct.Struct(">II")  # length, crc32 of the body
REPLAY_CHUNK = 500


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
    def __init__(self, directory: Path, *, records_per_file: int = 10_000) -> None:
        self.directory = Path(directory)
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
        self.wake = trio.Event()

    # -- ownership and boot ------------------------------------------------------------------

    def open(self) -> None:
        """Take the directory (one broker at a time) and count what a previous run left."""
        self.failed_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.directory / ".lock", "a+")  # noqa: SIM115
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            self._lock_file = None
            raise ConfigError(f"spool directory {self.directory} belongs to another running "
                              "broker (FILE_BUFFER_DIR must be one per broker)") from None
        existing = self.files()
        for path in existing:
            self._sequence = max(self._sequence, int(path.stem.split("-")[1]))
        self._files = len(existing)
        self._recount()
        self._failed = sum(1 for p in self.failed_dir.glob("*.log") for _ in read_records(p))
        if self._pending:
            log.warning("spool holds records from an earlier run; they will replay",
                        extra={"pending": sum(self._pending.values())})

    def _recount(self) -> None:
        self._pending = Counter((r.queue, r.partition) for path in self.files()
                                for r in read_records(path))

    def close(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()

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
            await trio.to_thread.run_sync(_append_fsync, self._active, data)
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
        connection failure (the next call resumes)."""
        await self.seal()
        landed = 0
        for path in self.files():
            records = list(read_records(path))
            by_partition: dict[tuple[str, str], list[SpoolRecord]] = {}
            for record in records:
                by_partition.setdefault((record.queue, record.partition), []).append(record)
            for key, group in by_partition.items():
                for start in range(0, len(group), REPLAY_CHUNK):
                    chunk = group[start:start + REPLAY_CHUNK]
                    try:
                        landed += await _replay_chunk(db, queues, cipher, chunk)
                    except Exception as exc:
                        if is_connection_failure(exc):
                            # The whole file stays (the chunks that landed are skipped next
                            # time), so its partitions still count as holding records: new
                            # pushes to them keep queueing behind.
                            self._recount()
                            return landed
                        self._fail(chunk, exc)
                    self._pending[key] -= len(chunk)
                    if self._pending[key] <= 0:
                        del self._pending[key]
            path.unlink()
            self._files -= 1
            await trio.to_thread.run_sync(_fsync_directory, self.directory)
        if not self._files:
            self._pending.clear()  # whatever a recount raced with, nothing is left
        self._replayed += landed
        return landed

    def _fail(self, chunk: list[SpoolRecord], exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        log.error("spooled records can never land; moved to failed/",
                  extra={"queue": chunk[0].queue, "partition": chunk[0].partition,
                         "count": len(chunk), "reason": reason})
        self._sequence += 1
        path = self.failed_dir / f"spool-{self._sequence:012d}.log"
        _append_fsync(path, b"".join(encode_record(r) for r in chunk))
        path.with_suffix(".reason").write_text(reason + "\n")
        self._failed += len(chunk)

    async def run_replay(self, db: Database, queues: Queues, cipher: PayloadCipher,
                         *, retry_seconds: float = 1.0,
                         task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if self._pending and await db.ping():
                try:
                    landed = await self.replay(db, queues, cipher)
                except Exception as exc:  # logged; the next round retries
                    log.warning("spool replay failed", extra={"error": str(exc)})
                else:
                    if landed:
                        pending = sum(self._pending.values())
                        log.warning("spool replayed",
                                    extra={"records": landed, "pending": pending})
            if not self._pending:
                self.wake = trio.Event()
                await self.wake.wait()
            else:
                await trio.sleep(retry_seconds)


def _append_fsync(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
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
            fresh = {r["message_id"].bytes for r in await Q.mark_replayed.fetch(
                conn, message_ids=[uuid.UUID(bytes=r.message_id) for r in chunk])}
            todo = [r for r in chunk if r.message_id in fresh]
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
