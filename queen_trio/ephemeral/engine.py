"""The ephemeral engine: rings in RAM, no database on the hot path (docs/ephemeral.md).

One ring per (queue, partition): a deque of messages numbered by `seq`. Each group (and
queue mode) has a cursor over the ring, the seqs it leases, and the seqs waiting to be
redelivered. A message leaves the ring once every group has passed it and nobody leases it,
or when a bound, its TTL or a group's retry limit drops it (counted by reason).

A message id is `<ring incarnation>.<seq>.<partition, base64url>`: the incarnation is a
random number drawn when the ring is made (at first use, after a reset, after a restart or
an ownership move), so an id of an earlier ring acks as `stale`, never as another message.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import builtins
import collections
import functools
import math
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

import attrs
import msgspec
import trio

from .. import wire
from ..errors import QueenError
from .options import Options

DEFAULT_PARTITION = "Default"
DROP_REASONS = ("bounds", "ttl", "retry")
# Each message's overhead counted against the process's budget, besides its payload.
CELL_BYTES = 96

Clock = Callable[[], float]


class QueueFull(QueenError):
    """A push the queue's bounds refuse (policy reject): 429 with Retry-After."""


class BudgetExceeded(QueenError):
    """A push past the process's RAM budget: 503."""


# A message in a ring: (seq, payload, enqueued), a plain tuple of atoms. CPython stops
# tracking such a tuple at the first collection that sees it, so a full collection does not
# walk the messages the rings hold (a slotted object per message made the owner's full
# collections 15-80 ms with ~100k held; docs/performance.md).
Message = tuple[int, bytes, float]
SEQ: Final = 0
PAYLOAD: Final = 1
ENQUEUED: Final = 2


@attrs.define(slots=True)
class Group:
    cursor: int  # the next seq never delivered to this group
    leased: dict[int, tuple[float, int]] = attrs.Factory(dict)  # seq -> (deadline, attempts)
    redeliver: list[int] = attrs.Factory(list)  # sorted seqs
    attempts: dict[int, int] = attrs.Factory(dict)  # deliveries so far, of seqs to redeliver
    skipped: int = 0

    def pending(self, ring: Ring) -> int:
        return max(ring.next_seq - max(self.cursor, ring.base), 0) + len(self.redeliver)


@attrs.define(slots=False, eq=False)
class Ring:
    partition: str
    incarnation: int = attrs.Factory(lambda: secrets.randbits(63))
    messages: collections.deque[Message] = attrs.Factory(collections.deque)
    base: int = 0  # seq of messages[0]
    next_seq: int = 0
    bytes: int = 0
    groups: dict[str, Group] = attrs.Factory(dict)
    changed: trio.Event = attrs.Factory(trio.Event)

    def at(self, seq: int) -> Message | None:
        index = seq - self.base
        if 0 <= index < len(self.messages):
            return self.messages[index]
        return None

    def wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    @functools.cached_property
    def _id_parts(self) -> tuple[str, str]:
        name = base64.urlsafe_b64encode(self.partition.encode()).decode().rstrip("=")
        return f"{self.incarnation:x}.", f".{name}"

    @functools.cached_property
    def partition_json(self) -> builtins.bytes:
        return wire_json(self.partition)

    def message_id(self, seq: int, attempt: int = 1) -> str:
        head, tail = self._id_parts
        return f"{head}{seq}.{attempt}{tail}"


@attrs.define(slots=True, eq=False)
class Queue:
    name: str
    options: Options
    declared: bool
    rings: dict[str, Ring] = attrs.Factory(dict)
    drops: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(DROP_REASONS, 0))
    pushed: int = 0
    popped: int = 0
    changed: trio.Event = attrs.Factory(trio.Event)
    # Every group that has popped this queue: a ring keeps a message until each has passed it.
    group_names: set[str] = attrs.Factory(set)
    # No lease of this queue ends before this (monotonic) time: the lease scan is skipped.
    next_expiry: float = math.inf
    turn: int = 0  # where the next wildcard pop starts among the rings

    def length(self) -> int:
        return sum(len(r.messages) for r in self.rings.values())

    def bytes(self) -> int:
        return sum(r.bytes for r in self.rings.values())

    def wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


def parse_id(message_id: str) -> tuple[int, int, int, str] | None:
    """(incarnation, seq, delivery attempt, partition) of an id, or None when it is not one
    of ours."""
    parts = message_id.split(".")
    if len(parts) != 4:
        return None
    try:
        incarnation = int(parts[0], 16)
        seq = int(parts[1])
        attempt = int(parts[2])
        padded = parts[3] + "=" * (-len(parts[3]) % 4)
        partition = base64.urlsafe_b64decode(padded.encode()).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    return incarnation, seq, attempt, partition


@attrs.define
class Delivered:
    ring: Ring
    seq: int
    attempts: int
    payload: bytes  # taken when delivered: an autoAck may free the message at once

    def to_wire(self) -> bytes:
        # The id is ASCII (hex, digits, base64url); the payload is spliced in as the bytes it
        # was stored as.
        return b"".join((b'{"id":"', self.ring.message_id(self.seq, self.attempts).encode(),
                         b'","partition":', self.ring.partition_json, b',"attempts":',
                         str(self.attempts).encode(), b',"payload":', self.payload, b"}"))


def wire_json(value: Any) -> bytes:
    return msgspec.json.encode(value)


class Engine:
    """Every ephemeral queue of this process, while it owns them (one owner per database:
    ephemeral/owner.py)."""

    def __init__(self, *, max_bytes: int, clock: Clock = time.monotonic) -> None:
        self.queues: dict[str, Queue] = {}
        self.max_bytes = max_bytes
        self.clock = clock
        self.total_bytes = 0
        self.pushed = 0
        self.popped = 0
        self.acked = 0
        self.drops: dict[str, int] = dict.fromkeys(DROP_REASONS, 0)
        self.budget_refusals = 0
        self.full_refusals = 0

    # -- queues --------------------------------------------------------------------------

    def declare(self, name: str, options: Options) -> Queue:
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = Queue(name, options, declared=True)
        else:
            queue.options = options
            queue.declared = True
        self._enforce(queue, self.clock())
        return queue

    def queue(self, name: str) -> Queue:
        """The queue, made implicitly with the defaults when it is new."""
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = Queue(name, Options(), declared=False)
        return queue

    def ring(self, queue: Queue, partition: str) -> Ring:
        ring = queue.rings.get(partition)
        if ring is None:
            ring = queue.rings[partition] = Ring(partition)
        return ring

    def reset(self, name: str) -> int:
        queue = self.queues.get(name)
        if queue is None:
            return 0
        dropped = queue.length()
        for ring in queue.rings.values():
            self.total_bytes -= ring.bytes + CELL_BYTES * len(ring.messages)
            ring.wake()
        queue.rings = {}
        queue.wake()
        return dropped

    def delete(self, name: str) -> bool:
        if name not in self.queues:
            return False
        self.reset(name)
        del self.queues[name]
        return True

    def clear(self) -> None:
        """Everything gone (ownership lost): waiting pops wake and find nothing."""
        for name in list(self.queues):
            self.reset(name)
        self.queues = {}
        self.total_bytes = 0

    # -- push ----------------------------------------------------------------------------

    def push(self, name: str, partition: str, payloads: list[bytes]) -> int:
        """All or nothing: QueueFull (policy reject) or BudgetExceeded refuse the whole
        batch before anything is added."""
        if not payloads:
            return 0
        queue = self.queue(name)
        now = self.clock()
        self._enforce(queue, now)
        options = queue.options
        size = sum(len(p) for p in payloads)
        cost = size + CELL_BYTES * len(payloads)
        if self.total_bytes + cost > self.max_bytes:
            self.budget_refusals += 1
            raise BudgetExceeded("the broker's ephemeral memory budget is used up "
                                 "(QUEEN_EPHEMERAL_MAX_BYTES)", code="ephemeral_unavailable",
                                 reason="memory_budget")
        if options.policy == "reject" and (
                (options.max_length and queue.length() + len(payloads) > options.max_length)
                or (options.max_bytes and queue.bytes() + size > options.max_bytes)):
            self.full_refusals += 1
            raise QueueFull(f"ephemeral queue {name} is full", code="queue_full")
        ring = self.ring(queue, partition)
        for payload in payloads:
            ring.messages.append((ring.next_seq, payload, now))
            ring.next_seq += 1
        ring.bytes += size
        self.total_bytes += cost
        queue.pushed += len(payloads)
        self.pushed += len(payloads)
        if options.policy == "dropOldest":
            self._drop_to_bounds(queue)
        ring.wake()
        queue.wake()
        return len(payloads)

    # -- pop -----------------------------------------------------------------------------

    def take(self, name: str, partition: str | None, group_name: str, batch: int, *,
             auto_ack: bool) -> list[Delivered]:
        """Up to `batch` messages for the group, redeliveries first, without waiting."""
        queue = self.queue(name)
        queue.group_names.add(group_name)
        now = self.clock()
        self._enforce(queue, now)
        if partition is not None:
            rings = [self.ring(queue, partition)]
        else:
            rings = list(queue.rings.values())
            if rings:
                start = queue.turn % len(rings)
                rings = rings[start:] + rings[:start]
                queue.turn += 1
        taken: list[Delivered] = []
        for ring in rings:
            if len(taken) >= batch:
                break
            taken.extend(self._take_from(queue, ring, group_name, batch - len(taken), now,
                                         auto_ack=auto_ack))
        if auto_ack and taken:
            for ring in {d.ring for d in taken}:
                self._trim(queue, ring)
        queue.popped += len(taken)
        self.popped += len(taken)
        return taken

    def _group(self, ring: Ring, group_name: str) -> Group:
        group = ring.groups.get(group_name)
        if group is None:
            group = ring.groups[group_name] = Group(cursor=ring.base)
        return group

    def _take_from(self, queue: Queue, ring: Ring, group_name: str, batch: int, now: float,
                   *, auto_ack: bool) -> list[Delivered]:
        group = self._group(ring, group_name)
        lease_until = now + queue.options.lease_seconds
        if not auto_ack:
            queue.next_expiry = min(queue.next_expiry, lease_until)
        out: list[Delivered] = []
        while group.redeliver and len(out) < batch:
            seq = group.redeliver.pop(0)
            attempts = group.attempts.pop(seq, 1) + 1
            message = ring.at(seq)
            if message is None:
                continue
            if not auto_ack:
                group.leased[seq] = (lease_until, attempts)
            out.append(Delivered(ring, seq, attempts, message[PAYLOAD]))
        group.cursor = max(group.cursor, ring.base)
        while group.cursor < ring.next_seq and len(out) < batch:
            seq = group.cursor
            group.cursor += 1
            if not auto_ack:
                group.leased[seq] = (lease_until, 1)
            out.append(Delivered(ring, seq, 1, ring.messages[seq - ring.base][PAYLOAD]))
        return out

    def give_back(self, delivered: list[Delivered], group_name: str) -> None:
        """A reply that never reached its client: its leases end now, uncounted."""
        for d in delivered:
            group = d.ring.groups.get(group_name)
            if group is None or group.leased.pop(d.seq, None) is None:
                continue
            bisect.insort(group.redeliver, d.seq)
            group.attempts[d.seq] = d.attempts - 1
            d.ring.wake()

    # -- ack -----------------------------------------------------------------------------

    def ack(self, name: str, group_name: str, message_id: str, status: str) -> str:
        """acked, redelivered, stale or unknown."""
        parsed = parse_id(message_id)
        if parsed is None:
            return "unknown"
        incarnation, seq, attempt, partition = parsed
        queue = self.queues.get(name)
        ring = queue.rings.get(partition) if queue is not None else None
        if queue is None or ring is None or ring.incarnation != incarnation:
            return "stale"
        self._enforce(queue, self.clock())
        group = ring.groups.get(group_name)
        lease = group.leased.get(seq) if group is not None else None
        if group is None or lease is None or lease[1] != attempt:
            return "unknown"  # acked already, or its lease ended (a later delivery holds it)
        del group.leased[seq]
        self.acked += 1
        if status == "completed":
            self._trim(queue, ring)
            return "acked"
        _, attempts = lease
        if attempts <= queue.options.retry_limit:
            bisect.insort(group.redeliver, seq)
            group.attempts[seq] = attempts
            ring.wake()
            queue.wake()
            return "redelivered"
        self._count_drop(queue, "retry", 1)
        self._trim(queue, ring)
        return "acked"

    # -- upkeep --------------------------------------------------------------------------

    def sweep(self) -> None:
        """Expired leases, TTLs: run every so often, and before each operation on a queue."""
        now = self.clock()
        for queue in list(self.queues.values()):
            self._enforce(queue, now)

    def _enforce(self, queue: Queue, now: float) -> None:
        options = queue.options
        woke = False
        if now >= queue.next_expiry:
            queue.next_expiry = math.inf
            for ring in queue.rings.values():
                for group in ring.groups.values():
                    expired = [seq for seq, (deadline, _) in group.leased.items()
                               if deadline <= now]
                    for seq in expired:
                        _, attempts = group.leased.pop(seq)
                        if attempts <= options.retry_limit and ring.at(seq) is not None:
                            bisect.insort(group.redeliver, seq)
                            group.attempts[seq] = attempts
                            woke = True
                        else:
                            self._count_drop(queue, "retry", 1)
                    if expired:
                        self._trim(queue, ring)
                    if group.leased:
                        queue.next_expiry = min(queue.next_expiry,
                                                min(d for d, _ in group.leased.values()))
                if woke:
                    ring.wake()
        if options.ttl_seconds:
            cut = now - options.ttl_seconds
            for ring in queue.rings.values():
                while ring.messages and ring.messages[0][ENQUEUED] <= cut:
                    self._drop_head(queue, ring, "ttl")
        if woke:
            queue.wake()

    def _drop_to_bounds(self, queue: Queue) -> None:
        options = queue.options
        while queue.rings and (
                (options.max_length and queue.length() > options.max_length)
                or (options.max_bytes and queue.bytes() > options.max_bytes)):
            oldest = min((r for r in queue.rings.values() if r.messages),
                         key=lambda r: (r.messages[0][ENQUEUED], r.messages[0][SEQ]),
                         default=None)
            if oldest is None:
                return
            self._drop_head(queue, oldest, "bounds")

    def _remove_head(self, ring: Ring) -> int:
        """Take the ring's oldest message out, with its bytes; its seq."""
        seq, payload, _ = ring.messages.popleft()
        ring.base += 1
        ring.bytes -= len(payload)
        self.total_bytes -= len(payload) + CELL_BYTES
        return seq

    def _drop_head(self, queue: Queue, ring: Ring, reason: str) -> None:
        seq = self._remove_head(ring)
        for group in ring.groups.values():
            lost = group.cursor <= seq or seq in group.leased or _contains(group.redeliver, seq)
            group.leased.pop(seq, None)
            group.attempts.pop(seq, None)
            if _contains(group.redeliver, seq):
                group.redeliver.remove(seq)
            group.cursor = max(group.cursor, ring.base)
            if lost:
                group.skipped += 1
        self._count_drop(queue, reason, 1)

    def _count_drop(self, queue: Queue, reason: str, n: int) -> None:
        queue.drops[reason] += n
        self.drops[reason] += n

    def _trim(self, queue: Queue, ring: Ring) -> None:
        """Free the head messages every group has passed and nobody leases."""
        if not queue.group_names or len(ring.groups) < len(queue.group_names):
            return  # a group has not consumed this ring yet: keep them for it
        while ring.messages:
            seq = ring.messages[0][SEQ]
            for group in ring.groups.values():
                if group.cursor <= seq or seq in group.leased or _contains(group.redeliver, seq):
                    return
            self._remove_head(ring)

    # -- reading -------------------------------------------------------------------------

    def describe(self, queue: Queue) -> dict[str, Any]:
        groups = sorted({g for r in queue.rings.values() for g in r.groups})
        return {"queue": queue.name, "tier": "declared" if queue.declared else "implicit",
                "depth": queue.length(), "bytes": queue.bytes(),
                "partitions": len(queue.rings), "groups": len(groups),
                "drops": dict(queue.drops), "pushed": queue.pushed, "popped": queue.popped,
                "options": queue.options.to_wire()}

    def depth(self, queue: Queue, group_name: str | None) -> dict[str, Any]:
        self._enforce(queue, self.clock())
        names = sorted({g for r in queue.rings.values() for g in r.groups})
        groups = []
        for g in names:
            pending = skipped = 0
            for ring in queue.rings.values():
                group = ring.groups.get(g)
                if group is None:
                    pending += len(ring.messages)
                else:
                    pending += group.pending(ring)
                    skipped += group.skipped
            groups.append({"group": _group_label(g), "pending": pending, "skipped": skipped})
        partitions = []
        for ring in queue.rings.values():
            if group_name is None:
                pending = len(ring.messages)
            else:
                group = ring.groups.get(group_name)
                pending = len(ring.messages) if group is None else group.pending(ring)
            partitions.append({"partition": ring.partition, "pending": pending,
                               "bytes": ring.bytes})
        return {"queue": queue.name, "group": _group_label(group_name),
                "tier": "declared" if queue.declared else "implicit",
                "pending": sum(p["pending"] for p in partitions),
                "partitionsPending": sum(1 for p in partitions if p["pending"]),
                "bytes": queue.bytes(), "partitions": partitions, "groups": groups,
                "drops": dict(queue.drops)}

    def rings(self) -> Iterator[Ring]:
        for queue in self.queues.values():
            yield from queue.rings.values()


def _group_label(group: str | None) -> str | None:
    return None if group is None or group == wire.QUEUE_MODE else group


def _contains(sorted_seqs: list[int], seq: int) -> bool:
    i = bisect.bisect_left(sorted_seqs, seq)
    return i < len(sorted_seqs) and sorted_seqs[i] == seq
