"""The push lane without PostgreSQL: packed groups, and an in-memory `queen.push_bundle`."""

from __future__ import annotations

import collections
import math
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager
from typing import Any

import trio

from queen_trio import ids
from queen_trio.errors import Overloaded
from queen_trio.push.bundle import PackedGroup, Segment, pack_group
from queen_trio.push.items import Group, PushItem
from queen_trio.push.lane import PushLane
from tests.support.gates import Gate


def push_item(transaction_id: str, *, queue: str = "q", partition: str = "p",
              payload: bytes = b"1", index: int = 0) -> PushItem:
    return PushItem(index=index, queue=queue, partition=partition,
                    transaction_id=transaction_id, payload=payload, message_id=ids.new_id())


def packed_group(*transaction_ids: str, queue: str = "q", partition: str = "p",
                 dedup: bool = True) -> PackedGroup:
    """One request's group: an item per transaction id, payload = the id's bytes."""
    items = [push_item(txid, queue=queue, partition=partition, payload=txid.encode(), index=i)
             for i, txid in enumerate(transaction_ids)]
    return pack_group(Group(queue, partition, items), dedup=dedup, encryption_assumed=False,
                      encrypt=None, producer_sub=None)


class PoisonedSegment(Exception):
    """What the fake raises for a bundle holding a poisoned transaction id (a bad statement,
    not a connection failure)."""


class FakePushBundle:
    """`queen.push_bundle`'s rows for a bundle, in memory: offsets per partition, 'queued' per
    segment, 'duplicate' for a transaction id the partition already stored (dedup segments).

    `calls` records every bundle attempted, as [(partition, [transaction ids])] per call.
    `poison` makes a bundle holding one of its ids raise; `unreachable` makes every call fail
    as a connection failure would, `overloaded` as a full pool would; `held()` keeps calls
    waiting until the block ends.
    """

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, list[str]]]] = []
        self.poison: set[str] = set()
        self.unreachable = False
        self.overloaded = False
        self.in_flight: collections.Counter[str] = collections.Counter()
        self.most_in_flight: collections.Counter[str] = collections.Counter()
        self._next_offset: collections.Counter[str] = collections.Counter()
        # (partition, transaction id) -> (offset, message id) of the stored original
        self._originals: dict[tuple[str, str], tuple[int, Any]] = {}
        # (partition, transaction id) of every stored message, in commit order.
        self.log: list[tuple[str, str]] = []
        self._gate = Gate()
        self._called = trio.Event()

    def held(self) -> AbstractContextManager[None]:
        return self._gate.held()

    async def wait_for_calls(self, count: int) -> None:
        while len(self.calls) < count:
            await self._called.wait()

    def committed(self, partition: str = "p") -> list[str]:
        """The transaction ids stored in a partition, in offset order."""
        return [txid for part, txid in self.log if part == partition]

    async def commit(self, segments: list[Segment]) -> list[dict[str, Any]]:
        self.calls.append([(s.partition, [i.transaction_id for i in s.writers])
                           for s in segments])
        self._called.set()
        self._called = trio.Event()
        for seg in segments:
            self.in_flight[seg.partition] += 1
            self.most_in_flight[seg.partition] = max(self.most_in_flight[seg.partition],
                                                     self.in_flight[seg.partition])
        try:
            await self._gate.pass_through()
            await trio.lowlevel.checkpoint()
            if self.unreachable:
                raise ConnectionRefusedError("connection refused (fake)")
            if self.overloaded:
                raise Overloaded("no connection free in the pool (fake)")
            if any(i.transaction_id in self.poison for s in segments for i in s.writers):
                raise PoisonedSegment("poisoned transaction id")
            return self._store(segments)
        finally:
            for seg in segments:
                self.in_flight[seg.partition] -= 1

    def _store(self, segments: list[Segment]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for number, seg in enumerate(segments, start=1):
            first = offset = self._next_offset[seg.partition]
            for item_no, item in enumerate(seg.writers, start=1):
                original = self._originals.get((seg.partition, item.transaction_id))
                if seg.dedup and original is not None:
                    rows.append(_row(number, seg, "duplicate", item_no=item_no,
                                     ref_offset=original[0], ref_message_id=original[1]))
                    continue
                self._originals.setdefault((seg.partition, item.transaction_id),
                                           (offset, item.message_id))
                self.log.append((seg.partition, item.transaction_id))
                offset += 1
            self._next_offset[seg.partition] = offset
            rows.append(_row(number, seg, "queued", ref_offset=first))
        return rows


def _row(segment_no: int, seg: Segment, outcome: str, *, item_no: int | None = None,
         ref_offset: int | None = None, ref_message_id: Any = None) -> dict[str, Any]:
    return {"segment_no": segment_no, "item_no": item_no, "outcome": outcome,
            "partition_id": f"id-{seg.partition}", "ref_offset": ref_offset,
            "ref_message_id": ref_message_id}


@asynccontextmanager
async def running_lane(store: FakePushBundle, *, shards: int = 1, tick_seconds: float = 60,
                       idle_seconds: float = 600,
                       deadline_seconds: float = math.inf) -> AsyncIterator[PushLane]:
    """A lane on the fake, running; leaving closes it and waits until it drained."""
    lane = PushLane(store.commit, shards=shards, tick_seconds=tick_seconds,
                    idle_seconds=idle_seconds, deadline_seconds=deadline_seconds)
    async with trio.open_nursery() as nursery:
        await nursery.start(lane.run)
        yield lane
        lane.close()
