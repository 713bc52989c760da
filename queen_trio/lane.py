"""The push lane: one flush task per active partition, one committer per shard.

    handler --PackedGroup--> PartitionFlusher (memory channel) --Segment--> ShardCommitter
                                                                    (one transaction per bundle)

A flusher keeps at most one flush in flight for its partition: idle, it dispatches a group on
arrival; while a flush is in flight, newly arrived groups wait in its channel and are fused into
the next segment. A shard committer keeps one bundle in flight and bundles every segment that is
ready when it dispatches. Nothing waits on a timer: the backstop tick only re-checks.

Every task lives in the lane's nurseries. A request that is cancelled never cancels a flush: its
group is already in a flusher's channel, and the database call runs shielded.
"""

from __future__ import annotations

import itertools
import logging
import math
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import asyncpg
import attrs
import trio

from . import frames, ids
from .database import Database, DatabaseUnavailable, is_connection_failure
from .push import PackedGroup, PushItem

log = logging.getLogger("queen_trio.lane")

PUSH_BUNDLE_SQL = "SELECT * FROM queen.push_bundle($1, $2, $3, $4, $5, $6, $7, $8)"


def _drain(receive: trio.MemoryReceiveChannel[Any]) -> list[Any]:
    """Everything already waiting in a channel, without blocking."""
    ready = []
    while True:
        try:
            ready.append(receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            return ready


class LaneClosed(Exception):
    """The broker is shutting down and takes no new pushes."""


@attrs.define(eq=False)
class Segment:
    """One or more groups of one partition, fused, committed as one segment row."""

    queue: str
    partition: str
    encrypted_assumed: bool
    dedup: bool
    groups: list[PackedGroup]
    writers: list[PushItem] = attrs.Factory(list)
    frames: list[bytes] = attrs.Factory(list)
    done: trio.Event = attrs.Factory(trio.Event)
    outcome: str = "pending"  # queued | stale | full | failed | unavailable
    error: str | None = None
    partition_id: str | None = None  # known once queued

    @classmethod
    def fuse(cls, groups: list[PackedGroup]) -> Segment:
        first = groups[0]
        seg = cls(first.group.queue, first.group.partition, first.encrypted_assumed,
                  first.dedup, groups)
        seen: dict[str, PushItem] = {}
        for packed in groups:
            for item, frame in zip(packed.writers, packed.frames, strict=True):
                item.winner, item.status, item.error, item.original_id = None, "pending", None, None
                if seg.dedup:
                    earlier = seen.get(item.transaction_id)
                    if earlier is not None:
                        # Two requests fused into one segment: the first one wins.
                        item.winner = earlier
                        continue
                    seen[item.transaction_id] = item
                seg.writers.append(item)
                seg.frames.append(frame)
        return seg

    def finish(self, outcome: str, error: str | None = None) -> None:
        self.outcome, self.error = outcome, error
        if outcome != "queued":
            for item in self.writers:
                item.status, item.error = outcome, error
        self.done.set()


def bundle_arguments(segments: list[Segment]) -> tuple[Any, ...]:
    ends: list[int] = []
    txids: list[str] = []
    for seg in segments:
        ends.extend(itertools.accumulate(len(f) for f in seg.frames))
        txids.extend(item.transaction_id for item in seg.writers)
    return (
        [s.queue for s in segments],
        [s.partition for s in segments],
        [s.encrypted_assumed for s in segments],
        [s.dedup for s in segments],
        [len(s.writers) for s in segments],
        [b"".join(s.frames) for s in segments],
        ends,
        txids,
    )


def apply_bundle_rows(segments: list[Segment], rows: Iterable[asyncpg.Record]) -> None:
    outcomes: dict[int, str] = {}
    for row in rows:
        seg = segments[row["segment_no"] - 1]
        if row["outcome"] == "duplicate":
            item = seg.writers[row["item_no"] - 1]
            item.status = "duplicate"
            stored = row["ref_frames"]
            if stored is None:
                item.original_id = ids.ZERO_UUID
            else:
                index = row["ref_offset"] - row["ref_first_offset"]
                item.original_id = str(frames.frame_at(stored, index).message_id)
        else:
            outcomes[row["segment_no"]] = row["outcome"]
            seg.partition_id = str(row["partition_id"])
    for number, seg in enumerate(segments, start=1):
        outcome = outcomes.get(number, "failed")
        if outcome == "queued":
            for item in seg.writers:
                if item.status == "pending":
                    item.status = "queued"
            seg.finish("queued")
        elif outcome == "stale":
            seg.finish("stale")
        elif outcome == "full":
            seg.finish("full", "queue full")
        else:
            seg.finish("failed", "push_bundle returned no outcome for the segment")


@attrs.define
class LaneStatistics:
    active_flushers: int
    segments: int
    bundles: int
    fused_groups: int
    bundle_splits: int
    failed_segments: int


@attrs.define
class _Counters:
    segments: int = 0
    bundles: int = 0
    fused_groups: int = 0
    bundle_splits: int = 0
    failed_segments: int = 0


class ShardCommitter:
    """Bundles the ready segments of its shard into one transaction; one bundle in flight."""

    def __init__(self, db: Database, counters: _Counters, tick_seconds: float,
                 on_commit: Callable[[str], None] = lambda queue: None) -> None:
        self._db = db
        self._counters = counters
        self._on_commit = on_commit
        self._tick = tick_seconds
        self._send, self._receive = trio.open_memory_channel[Segment](math.inf)

    def submit(self, segment: Segment) -> None:
        self._send.send_nowait(segment)

    def close(self) -> None:
        self._send.close()

    async def run(self) -> None:
        ticking = False
        async with self._receive:
            while True:
                bundle = _drain(self._receive)
                if not bundle:
                    # The backstop tick: a periodic re-check after activity, never a reason
                    # to wait for more. An idle shard (a tick found nothing) just blocks.
                    with trio.move_on_after(self._tick if ticking else math.inf):
                        try:
                            bundle = [await self._receive.receive()]
                        except trio.EndOfChannel:
                            return
                    ticking = bool(bundle)
                    if not bundle:
                        continue
                    bundle.extend(_drain(self._receive))
                # A started flush is never cancelled: it lands or fails whole.
                with trio.CancelScope(shield=True):
                    await self._commit(bundle)

    async def _commit(self, bundle: list[Segment]) -> None:
        try:
            await self._commit_once(bundle)
            return
        except Exception as exc:
            if is_connection_failure(exc):
                for seg in bundle:
                    seg.finish("unavailable", str(DatabaseUnavailable(exc)))
                return
            if len(bundle) == 1:
                log.warning("push segment failed", extra={
                    "queue": bundle[0].queue, "partition": bundle[0].partition,
                    "error": str(exc)})
                self._counters.failed_segments += 1
                bundle[0].finish("failed", f"{type(exc).__name__}: {exc}")
                return
        # Split the bundle back into its segments so that only the bad one fails.
        self._counters.bundle_splits += 1
        for seg in bundle:
            await self._commit([seg])

    async def _commit_once(self, bundle: list[Segment]) -> None:
        args = bundle_arguments(bundle)
        rows = await self._db.fetch(PUSH_BUNDLE_SQL, *args)
        self._counters.bundles += 1
        self._counters.segments += len(bundle)
        apply_bundle_rows(bundle, rows)
        for queue in {seg.queue for seg in bundle if seg.outcome == "queued"}:
            self._on_commit(queue)


class PartitionFlusher:
    """The flush task of one (queue, partition): at most one flush in flight."""

    def __init__(self, lane: PushLane, key: tuple[str, str], shard: ShardCommitter) -> None:
        self.key = key
        self._lane = lane
        self._shard = shard
        self.send, self._receive = trio.open_memory_channel[PackedGroup](math.inf)

    async def run(self) -> None:
        try:
            await self._serve()
        finally:
            # Synchronous, so no group can be handed to a flusher that is going away.
            self._lane._retire(self)
            self._receive.close()

    async def _serve(self) -> None:
        while True:
            # Whatever arrived during the last flush goes out now, fused.
            pending = _drain(self._receive)
            if not pending:
                with trio.move_on_after(self._lane.idle_seconds):
                    try:
                        pending = [await self._receive.receive()]
                    except trio.EndOfChannel:
                        return
                if not pending:
                    if self._receive.statistics().current_buffer_used:
                        continue
                    # Idle: retire (in `run`) without a checkpoint, so no group slips in unseen.
                    return
                pending.extend(_drain(self._receive))
            await self._flush(pending)

    async def _flush(self, pending: list[PackedGroup]) -> None:
        # Fuse consecutive groups packed under the same assumptions about the queue.
        runs: list[list[PackedGroup]] = []
        for packed in pending:
            if runs and (runs[-1][0].encrypted_assumed, runs[-1][0].dedup) == (
                    packed.encrypted_assumed, packed.dedup):
                runs[-1].append(packed)
            else:
                runs.append([packed])
        for run in runs:
            if len(run) > 1:
                self._lane._counters.fused_groups += len(run)
            segment = Segment.fuse(run)
            await self._send_segment(segment)
            if segment.outcome == "failed" and len(run) > 1:
                # A fused segment failed: retry its groups alone so only the bad one fails.
                for packed in run:
                    alone = Segment.fuse([packed])
                    await self._send_segment(alone)
                    packed.outcome = alone.outcome
                    packed.done.set()
                continue
            for packed in run:
                packed.outcome = segment.outcome
                packed.done.set()

    async def _send_segment(self, segment: Segment) -> None:
        if not segment.writers:
            # Every item was a duplicate of an earlier one in the same segment.
            segment.finish("queued")
            return
        self._shard.submit(segment)
        await segment.done.wait()


class PushLane:
    def __init__(self, db: Database, *, shards: int, tick_seconds: float,
                 idle_seconds: float,
                 on_commit: Callable[[str], None] = lambda queue: None) -> None:
        self._counters = _Counters()
        self._shards = [ShardCommitter(db, self._counters, tick_seconds, on_commit)
                        for _ in range(shards)]
        self.idle_seconds = idle_seconds
        self._flushers: dict[tuple[str, str], PartitionFlusher] = {}
        self._nursery: trio.Nursery | None = None
        self._closing = trio.Event()
        self._closed = trio.Event()

    def statistics(self) -> LaneStatistics:
        c = self._counters
        return LaneStatistics(
            active_flushers=len(self._flushers), segments=c.segments, bundles=c.bundles,
            fused_groups=c.fused_groups, bundle_splits=c.bundle_splits,
            failed_segments=c.failed_segments,
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as shard_nursery:
            for shard in self._shards:
                shard_nursery.start_soon(shard.run)
            try:
                async with trio.open_nursery() as flusher_nursery:
                    self._nursery = flusher_nursery
                    task_status.started()
                    await self._closing.wait()
                    # Drain: every group already accepted is flushed before the lane ends.
                    for flusher in list(self._flushers.values()):
                        flusher.send.close()
            finally:
                self._nursery = None
                self._closed.set()
                for shard in self._shards:
                    shard.close()

    def close(self) -> None:
        """Stop taking pushes; `run` returns once every accepted group is flushed."""
        self._closing.set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def submit(self, packed: PackedGroup) -> None:
        """Hand a group to its partition's flusher; wait on `packed.done` for the outcome."""
        if self._closing.is_set() or self._nursery is None:
            raise LaneClosed("the broker is shutting down")
        key = packed.group.key
        flusher = self._flushers.get(key)
        if flusher is None:
            shard = self._shards[zlib.crc32(f"{key[0]}\x00{key[1]}".encode()) % len(self._shards)]
            flusher = self._flushers[key] = PartitionFlusher(self, key, shard)
            self._nursery.start_soon(flusher.run)
        flusher.send.send_nowait(packed)

    def _retire(self, flusher: PartitionFlusher) -> None:
        if self._flushers.get(flusher.key) is flusher:
            del self._flushers[flusher.key]
        flusher.send.close()
