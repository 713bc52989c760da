"""Segments and the `queen.push_bundle` adapter, shared by the lane, the spool and transactions.

    PushItem --pack_group--> PackedGroup --Segment.fuse--> Segment --commit_bundle--> rows

A packed group carries one frame per item that writes (first wins within the request); a
segment fuses the packed groups of one partition (first wins again, across requests); a bundle
of segments is one `queen.push_bundle` call, whose rows settle every item.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
import attrs
import trio

from .. import ids
from ..storage import frames
from ..storage.sql import Q, Row
from .items import Group, PushItem, first_wins
from .outcome import Outcome

_PENDING, _QUEUED = Outcome.PENDING, Outcome.QUEUED


@attrs.define(slots=True, eq=False)
class PackedGroup:
    """A group ready for the lane: frames packed, payloads encrypted if the queue asks."""

    group: Group
    # What the broker assumed about the queue when packing; push_bundle checks both.
    encryption_assumed: bool
    dedup: bool
    # The items that carry a frame (within-request duplicates carry none), in order.
    writers: list[PushItem]
    frames: list[bytes]
    # Set once the group's fate is known.
    done: trio.Event = attrs.Factory(trio.Event)
    outcome: Outcome = Outcome.PENDING

    @property
    def assumptions(self) -> tuple[bool, bool]:
        return (self.encryption_assumed, self.dedup)

    @property
    def nbytes(self) -> int:
        return sum(len(f) for f in self.frames)

    def finish(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.done.set()


def pack_group(group: Group, *, dedup: bool, encryption_assumed: bool,
               encrypt: Callable[[bytes], bytes] | None, producer_sub: str | None) -> PackedGroup:
    """Resolve within-request duplicates (first wins) and pack one frame per winner."""
    sub = producer_sub.encode() if producer_sub else b""
    writers = first_wins(group.items, dedup=dedup)
    packed = [frames.pack(
        item.message_id.bytes, item.transaction_id.encode(),
        encrypt(item.payload) if encrypt is not None else item.payload,
        producer_sub=sub, trace_id=item.trace_id, encrypted=encrypt is not None,
    ) for item in writers]
    return PackedGroup(group, encryption_assumed, dedup, writers, packed)


@attrs.define(eq=False)
class Segment:
    """One or more packed groups of one partition, fused, committed as one segment row."""

    queue: str
    partition: str
    encryption_assumed: bool
    dedup: bool
    groups: list[PackedGroup]
    writers: list[PushItem] = attrs.Factory(list)
    frames: list[bytes] = attrs.Factory(list)
    done: trio.Event = attrs.Factory(trio.Event)
    outcome: Outcome = Outcome.PENDING
    error: str | None = None
    partition_id: str | None = None  # known once queued

    @classmethod
    def fuse(cls, groups: list[PackedGroup]) -> Segment:
        """Groups packed under the same assumptions; a transaction id that two of them carry
        is written once, by the earlier request."""
        first = groups[0]
        seg = cls(first.group.queue, first.group.partition, first.encryption_assumed,
                  first.dedup, groups)
        if len(groups) == 1:
            items, frames_ = list(first.writers), list(first.frames)
        else:
            items = [item for packed in groups for item in packed.writers]
            frames_ = [frame for packed in groups for frame in packed.frames]
        seg.writers = first_wins(items, dedup=seg.dedup)
        if len(seg.writers) == len(items):
            seg.frames = frames_
        else:
            kept = {id(item) for item in seg.writers}
            seg.frames = [f for item, f in zip(items, frames_, strict=True) if id(item) in kept]
        return seg

    def finish(self, outcome: Outcome, error: str | None = None) -> None:
        """Settle the segment; every writer not settled by a row shares its outcome."""
        self.outcome, self.error = outcome, error
        if outcome is _QUEUED:
            for item in self.writers:
                if item.outcome is _PENDING:
                    item.outcome = _QUEUED
        else:
            for item in self.writers:
                item.settle(outcome, error)
        self.done.set()


def bundle_arguments(segments: list[Segment], *, check_max_size: bool) -> dict[str, Any]:
    ends: list[int] = []
    txids: list[str] = []
    for seg in segments:
        ends.extend(itertools.accumulate(len(f) for f in seg.frames))
        txids.extend(item.transaction_id for item in seg.writers)
    return {
        "queues": [s.queue for s in segments],
        "partitions": [s.partition for s in segments],
        "encrypted": [s.encryption_assumed for s in segments],
        "dedup": [s.dedup for s in segments],
        "counts": [len(s.writers) for s in segments],
        "frames": [b"".join(s.frames) for s in segments],
        "frame_ends": ends,
        "transaction_ids": txids,
        "check_max_size": check_max_size,
    }


_SEGMENT_OUTCOMES = {"queued": Outcome.QUEUED, "stale": Outcome.STALE, "full": Outcome.FULL}


def apply_bundle_rows(segments: list[Segment], rows: Sequence[Row]) -> None:
    """Settle every segment (and its items) from push_bundle's rows (functions/push_bundle.sql:
    one per segment, and one per duplicate item)."""
    outcomes: dict[int, Outcome] = {}
    for row in rows:
        segment_no: int = row["segment_no"]
        said: str = row["outcome"]
        seg = segments[segment_no - 1]
        if said == "duplicate":
            item_no: int = row["item_no"]
            item = seg.writers[item_no - 1]
            original: uuid.UUID | None = row["ref_message_id"]
            item.original_id = ids.ZERO_UUID if original is None else str(original)
            item.settle(Outcome.DUPLICATE)
        else:
            partition_id: uuid.UUID = row["partition_id"]
            outcomes[segment_no] = _SEGMENT_OUTCOMES[said]
            seg.partition_id = str(partition_id)
    for number, seg in enumerate(segments, start=1):
        outcome = outcomes.get(number)
        if outcome is None:  # never: push_bundle answers every segment
            seg.finish(Outcome.FAILED, "push_bundle returned no outcome for the segment")
        else:
            seg.finish(outcome, "queue full" if outcome is Outcome.FULL else None)


async def run_bundle(conn: asyncpg.Connection, segments: list[Segment], *,
                     check_max_size: bool = True) -> list[asyncpg.Record]:
    """One `queen.push_bundle` call for the segments: its rows. The caller owns the
    transaction (none: the call is its own) and settles the segments with the rows."""
    return await Q.push_bundle.fetch(conn, **bundle_arguments(segments,
                                                             check_max_size=check_max_size))


async def commit_bundle(conn: asyncpg.Connection, segments: list[Segment], *,
                        check_max_size: bool = True) -> None:
    """`run_bundle`, then settle the segments, inside the caller's transaction."""
    apply_bundle_rows(segments, await run_bundle(conn, segments,
                                                 check_max_size=check_max_size))
