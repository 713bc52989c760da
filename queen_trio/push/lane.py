"""The push lane: one flush task per active partition, one committer per shard.

    handler --PackedGroup--> PartitionFlusher (memory channel) --Segment--> ShardCommitter
                                                                    (one transaction per bundle)

A flusher keeps at most one flush in flight for its partition: idle, it dispatches a group on
arrival; while a flush is in flight, newly arrived groups wait in its channel and are fused into
the next segment. A shard committer keeps one bundle in flight and bundles every segment that is
ready when it dispatches. Nothing waits on a timer: the backstop tick only re-checks. A busy
shard holds its database connection from one bundle to the next (storage/holding.py), and
gives it back once idle.

Every task lives in the lane's nurseries. A request that is cancelled never cancels a flush: its
group is already in a flusher's channel, and the database call runs shielded.
"""

from __future__ import annotations

import logging
import math
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from ..errors import DatabaseUnavailable
from ..storage.database import is_connection_failure, is_overload
from ..storage.holding import Hold, HoldFactory, no_hold, receive_or_let_go
from ..storage.sql import Row
from .bundle import PackedGroup, Segment, apply_bundle_rows
from .outcome import Outcome

log = logging.getLogger("queen_trio.lane")

# Commits a bundle of segments (push.bundle.run_bundle on a connection) and returns the rows
# that settle them; raises when the call failed as a whole. The lane settles the segments
# itself, on the Trio side, so their waiters wake only once the lane's books are kept.
CommitBundle = Callable[[list[Segment]], Awaitable[Sequence[Row]]]


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


@attrs.frozen
class LaneStatistics:
    active_flushers: int
    pending_bytes: int  # frame bytes accepted and not settled yet (QUEEN_MAX_PENDING_BYTES)
    # The rest are counted since the start, in a Counter keyed by these names.
    segments: int
    bundles: int
    fused_groups: int
    bundle_splits: int
    failed_segments: int


class ShardCommitter:
    """Bundles the ready segments of its shard into one transaction; one bundle in flight."""

    def __init__(self, commit: CommitBundle, counters: Counter[str], tick_seconds: float,
                 on_commit: Callable[[str], None] = lambda queue: None,
                 deadline_seconds: float = math.inf, hold: HoldFactory = no_hold) -> None:
        self._commit_bundle = commit
        self._hold = hold
        self._deadline = deadline_seconds
        self._counters = counters
        self._on_commit = on_commit
        self._tick = tick_seconds
        self._send, self._receive = trio.open_memory_channel[Segment](math.inf)

    def submit_nowait(self, segment: Segment) -> None:
        self._send.send_nowait(segment)

    def close(self) -> None:
        self._send.close()

    async def run(self) -> None:
        ticking = False
        async with self._receive, self._hold() as hold:
            while True:
                bundle = _drain(self._receive)
                if not bundle:
                    waited = await self._next_segments(ticking, hold)
                    if waited is None:
                        return
                    ticking = bool(waited)
                    if not waited:
                        continue
                    bundle = waited + _drain(self._receive)
                # A started flush is never cancelled: it lands or fails whole, within its
                # deadline. Past it the outcome is unknown: the spool takes the segments, and
                # its replay finds what did land (push/spool.py).
                with trio.move_on_after(self._deadline, shield=True) as scope:
                    await self._commit(bundle)
                if scope.cancelled_caught:
                    for seg in bundle:
                        if not seg.done.is_set():
                            seg.finish(Outcome.UNAVAILABLE, str(DatabaseUnavailable(
                                "the commit took longer than its deadline")))

    async def _next_segments(self, ticking: bool, hold: Hold) -> list[Segment] | None:
        """The next segment; none when the backstop tick found none; None once closed.

        The backstop tick is a periodic re-check after activity, never a reason to wait for
        more. An idle shard (a tick found nothing) blocks, and lets its connection go first
        if nothing came for HOLD_IDLE_SECONDS."""
        try:
            if not ticking:
                return [await receive_or_let_go(self._receive.receive, hold)]
            with trio.move_on_after(self._tick):
                return [await self._receive.receive()]
            return []
        except trio.EndOfChannel:
            return None

    async def _commit(self, bundle: list[Segment]) -> None:
        try:
            await self._commit_once(bundle)
            return
        except Exception as exc:
            if is_overload(exc):
                # Nothing was written: the client comes back (never spooled).
                for seg in bundle:
                    seg.finish(Outcome.OVERLOADED, str(exc))
                return
            if is_connection_failure(exc):
                for seg in bundle:
                    seg.finish(Outcome.UNAVAILABLE, str(DatabaseUnavailable(exc)))
                return
            if len(bundle) == 1:
                log.warning("push segment failed", extra={
                    "queue": bundle[0].queue, "partition": bundle[0].partition,
                    "error": str(exc)})
                self._counters["failed_segments"] += 1
                bundle[0].finish(Outcome.FAILED, f"{type(exc).__name__}: {exc}")
                return
        # Split the bundle back into its segments so that only the bad one fails.
        self._counters["bundle_splits"] += 1
        for seg in bundle:
            await self._commit([seg])

    async def _commit_once(self, bundle: list[Segment]) -> None:
        rows = await self._commit_bundle(bundle)
        self._counters["bundles"] += 1
        self._counters["segments"] += len(bundle)
        apply_bundle_rows(bundle, rows)
        for queue in {seg.queue for seg in bundle if seg.outcome is Outcome.QUEUED}:
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
            if runs and runs[-1][0].assumptions == packed.assumptions:
                runs[-1].append(packed)
            else:
                runs.append([packed])
        for run in runs:
            if len(run) > 1:
                self._lane._counters["fused_groups"] += len(run)
            segment = Segment.fuse(run)
            await self._send_segment(segment)
            if segment.outcome is Outcome.FAILED and len(run) > 1:
                # A fused segment failed: retry its groups alone so only the bad one fails.
                for packed in run:
                    alone = Segment.fuse([packed])
                    await self._send_segment(alone)
                    self._lane._settle(packed, alone.outcome)
                continue
            for packed in run:
                self._lane._settle(packed, segment.outcome)

    async def _send_segment(self, segment: Segment) -> None:
        if not segment.writers:
            # Every item was a duplicate of an earlier one in the same segment.
            segment.finish(Outcome.QUEUED)
            return
        self._shard.submit_nowait(segment)
        await segment.done.wait()


class PushLane:
    def __init__(self, commit: CommitBundle, *, shards: int, tick_seconds: float,
                 idle_seconds: float,
                 on_commit: Callable[[str], None] = lambda queue: None,
                 deadline_seconds: float = math.inf, hold: HoldFactory = no_hold) -> None:
        """`hold`: how a shard keeps its database connection between bundles
        (`Database.holding`)."""
        self._counters: Counter[str] = Counter()
        self._shards = [ShardCommitter(commit, self._counters, tick_seconds, on_commit,
                                       deadline_seconds, hold)
                        for _ in range(shards)]
        self.idle_seconds = idle_seconds
        self._flushers: dict[tuple[str, str], PartitionFlusher] = {}
        # Frame bytes handed to the lane and not settled yet: what a push waits behind.
        self.pending_bytes = 0
        self._nursery: trio.Nursery | None = None
        self._closing = trio.Event()
        self._closed = trio.Event()

    def statistics(self) -> LaneStatistics:
        c = self._counters
        return LaneStatistics(
            active_flushers=len(self._flushers), pending_bytes=self.pending_bytes,
            segments=c["segments"], bundles=c["bundles"],
            fused_groups=c["fused_groups"], bundle_splits=c["bundle_splits"],
            failed_segments=c["failed_segments"],
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

    def submit_nowait(self, packed: PackedGroup) -> None:
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
        self.pending_bytes += packed.nbytes

    def _settle(self, packed: PackedGroup, outcome: Outcome) -> None:
        self.pending_bytes -= packed.nbytes
        packed.finish(outcome)

    def _retire(self, flusher: PartitionFlusher) -> None:
        if self._flushers.get(flusher.key) is flusher:
            del self._flushers[flusher.key]
        flusher.send.close()
