"""The timer sweeper: every broker process fires due timers, each exactly once
(docs/timers.md#firing).

1. Probe: when is the next timer visible? Sleep until then, at most a second, and wake early
   on a `queen_timers` NOTIFY (a schedule due within two seconds). An idle broker costs one
   indexed probe per second and logs nothing.
2. Claim, in a short transaction: due rows, `FOR UPDATE SKIP LOCKED`, stamped with a fresh
   claim token and a short lease (`queen.timers_claim`).
3. Fire, in one transaction: delete the rows that still carry the token (`timers_take`), push
   exactly those with the push SQL (`commit_bundle`, as /api/v1/transaction does: dedup on the
   txn, encryption, implicit queues), commit; wake-ups after the commit. Delete and push commit
   together or not at all, so a broker that dies mid-fire leaves the rows to another once the
   lease lapses, and a fire that outlived its lease finds nothing to delete and pushes nothing.
4. A batch that fails is fired again timer by timer; a timer that fails alone backs off
   (doubling, up to a minute), and can be cancelled meanwhile.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from typing import Any

import asyncpg
import attrs
import trio

from ..consume.wakeups import WakeRegistry
from ..errors import DatabaseUnavailable, Overloaded
from ..push.bundle import PackedGroup, Segment, commit_bundle
from ..push.items import Group, PushItem
from ..push.outcome import Outcome
from ..queues.queues import QueueFacts, Queues, StaleQueues, retry_while_stale
from ..storage import frames
from ..storage.database import Database, is_connection_failure
from ..storage.encryption import PayloadCipher
from ..storage.sql import Q

log = logging.getLogger("queen_trio.timers")

CHANNEL = "queen_timers"
MAX_SLEEP_SECONDS = 1.0
# Lateness buckets of the fired timers (seconds past deliverAt, at the fire's commit).
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@attrs.frozen
class SweeperStatistics:
    fired: int
    duplicates: int  # fired into a queue that already held its txn (push dedup)
    failures: int
    claims: int
    # Claimed timers the fire no longer held (its lease lapsed and another broker took them,
    # or a cancel or reschedule came after the lapse): nothing of them was pushed here.
    lapsed: int
    probes: int
    lateness_counts: tuple[int, ...]  # per LATENESS_BUCKETS (not cumulative), then +Inf
    lateness_sum: float


class _FireFailed(Exception):
    pass


def _next_id(promised: uuid.UUID, last: uuid.UUID | None) -> uuid.UUID:
    """The delivered message's id: the promised one while it sorts after the partition's
    newest message (docs/decisions.md#the-promised-message-id), else the smallest id after
    that one's."""
    if last is None or promised.int > last.int:
        return promised
    return uuid.UUID(int=last.int + 1)


class TimerSweeper:
    def __init__(self, db: Database, queues: Queues, cipher: PayloadCipher,
                 wakeups: WakeRegistry, *, lease_seconds: float, batch: int,
                 deadline_seconds: float = 30.0) -> None:
        self._db = db
        self._queues = queues
        self._cipher = cipher
        self._wakeups = wakeups
        self._lease_ms = max(1, int(lease_seconds * 1000))
        self._batch = batch
        self._deadline = deadline_seconds
        self._wake = trio.Event()
        self._fired = 0
        self._duplicates = 0
        self._failures = 0
        self._claims = 0
        self._lapsed = 0
        self._probes = 0
        self._buckets = [0] * (len(LATENESS_BUCKETS) + 1)
        self._lateness_sum = 0.0
        # A test hook: called between the claim and the fire (simulated crashes).
        self.after_claim: Any = None

    def statistics(self) -> SweeperStatistics:
        return SweeperStatistics(self._fired, self._duplicates, self._failures, self._claims,
                                 self._lapsed, self._probes, tuple(self._buckets),
                                 self._lateness_sum)

    def on_notify(self, _payload: str) -> None:
        """A schedule due soon, in this process or another (the LISTEN connection)."""
        self._wake.set()

    def poke(self) -> None:
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            self._wake = trio.Event()
            wait = MAX_SLEEP_SECONDS
            # A started step runs to its end (a database call cut by a cancellation would
            # leave its connection's protocol broken), under a deadline.
            with trio.move_on_after(self._deadline, shield=True):
                try:
                    wait = await self.step()
                except (DatabaseUnavailable, Overloaded) as exc:
                    # Said by the database's own line; the sweeper just comes back.
                    log.debug("timer sweep failed; trying again", extra={"error": str(exc)})
                except Exception as exc:
                    # Anything else (a connection cut mid-call, a statement timeout): the
                    # sweeper never dies of it, and no timer is lost by it (a claim lapses).
                    log.warning("timer sweep failed; trying again in a second",
                                extra={"error": f"{type(exc).__name__}: {exc}"})
            if wait > 0:
                with trio.move_on_after(wait):
                    await self._wake.wait()
            else:
                await trio.lowlevel.checkpoint()

    async def step(self) -> float:
        """One probe and, when something is due, one claim and its fire: the seconds to wait
        before the next step (at most MAX_SLEEP_SECONDS; 0 when more may be due)."""
        self._probes += 1
        until = await self._db.fetchval(Q.timers_next)
        if until is None or until > 0:
            return MAX_SLEEP_SECONDS if until is None else min(until, MAX_SLEEP_SECONDS)
        if await self.claim_and_fire() == 0:
            # Due but held by another broker's claim: look again shortly.
            return 0.05
        return 0.0

    async def claim_and_fire(self) -> int:
        """One claim, then its fire: the number of timers claimed."""
        token = uuid.uuid4()
        claimed = await self._db.fetch(Q.timers_claim, token=token, lease_ms=self._lease_ms,
                                       limit=self._batch)
        if not claimed:
            return 0
        self._claims += 1
        if self.after_claim is not None:
            await self.after_claim(token)
        queues = {row["queue"] for row in claimed}
        fired = self._fired
        try:
            await self._fire_retrying(token, None, queues)
            self._lapsed += len(claimed) - (self._fired - fired)
        except Exception as exc:
            if _transient(exc):
                raise  # the claim lapses; any broker fires them once the database is back
            log.info("timer batch failed; firing its timers one by one",
                     extra={"error": str(exc), "timers": len(claimed)})
            for row in claimed:
                key = ([row["queue"]], [row["timer_key"]])
                try:
                    await self._fire_retrying(token, key, {row["queue"]})
                except Exception as one:
                    if _transient(one):
                        raise
                    self._failures += 1
                    log.warning("timer fire failed; backing off",
                                extra={"queue": row["queue"], "timerKey": row["timer_key"],
                                       "error": str(one)})
                    await self._db.execute(Q.timers_backoff, token=token, queues=key[0],
                                           keys=key[1], error=str(one)[:1000])
        return len(claimed)

    async def _fire_retrying(self, token: uuid.UUID,
                             keys: tuple[list[str], list[str]] | None, queues: set[str]) -> None:
        async def attempt() -> set[str]:
            await self._fire(token, keys, queues)
            return set()

        if not await retry_while_stale(self._queues, attempt):
            raise _FireFailed("queue configuration kept changing")

    async def _fire(self, token: uuid.UUID, keys: tuple[list[str], list[str]] | None,
                    queues: set[str]) -> None:
        facts = {queue: self._queues.assumed(queue) for queue in queues}
        cipher = self._cipher

        async def work(conn: asyncpg.Connection) -> tuple[list[Any], list[Segment]]:
            async with conn.transaction():
                rows = await Q.timers_take.fetch(
                    conn, token=token, queues=None if keys is None else keys[0],
                    keys=None if keys is None else keys[1])
                if not rows:
                    return [], []
                segments = await _segments(conn, rows, facts, cipher)
                await commit_bundle(conn, segments)
                stale = {seg.queue for seg in segments if seg.outcome is Outcome.STALE}
                if stale:
                    raise StaleQueues(stale)
                full = [seg.queue for seg in segments if seg.outcome is Outcome.FULL]
                if full:
                    raise _FireFailed(f"queue full: {full[0]}")
                return rows, segments

        rows, segments = await self._db.call(work)
        for seg in segments:
            self._wakeups.notify(seg.queue)
            for item in seg.writers:
                if item.outcome is Outcome.DUPLICATE:
                    self._duplicates += 1
        for row in rows:
            self._fired += 1
            late = max(0.0, float(row["lateness"]))
            self._lateness_sum += late
            for i, bound in enumerate(LATENESS_BUCKETS):
                if late <= bound:
                    self._buckets[i] += 1
                    break
            else:
                self._buckets[-1] += 1


def _transient(exc: BaseException) -> bool:
    """A failure that says nothing about the timers (the database went away, the broker is
    overloaded, a serialization failure or deadlock): no backoff, no attempt counted; the
    claim lapses and the timers fire once it passes."""
    return (isinstance(exc, (DatabaseUnavailable, Overloaded, OSError))
            or is_connection_failure(exc)
            or isinstance(exc, (asyncpg.SerializationError, asyncpg.DeadlockDetectedError,
                                asyncpg.InterfaceError, asyncpg.InternalClientError)))


async def _segments(conn: asyncpg.Connection, rows: list[Any], facts: dict[str, QueueFacts],
                    cipher: PayloadCipher) -> list[Segment]:
    """One segment per destination partition; ids that keep id order = offset order."""
    by_partition: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in rows:
        by_partition[(row["queue"], row["partition"])].append(row)
    keys = sorted(by_partition)
    last_rows = await Q.partition_last_ids.fetch(
        conn, queues=[k[0] for k in keys], partitions=[k[1] for k in keys])
    last: dict[tuple[str, str], uuid.UUID | None] = {
        (r["queue"], r["partition"]): (None if r["last_id"] is None
                                       else uuid.UUID(str(r["last_id"])))
        for r in last_rows}
    segments: list[Segment] = []
    for queue, partition in keys:
        fact = facts[queue]
        encrypt_now = fact.encryption_enabled and cipher.enabled
        group = Group(queue, partition)
        packed: list[bytes] = []
        previous = last.get((queue, partition))
        timers = sorted(by_partition[(queue, partition)],
                        key=lambda r: (uuid.UUID(str(r["message_id"])).int, r["deliver_at"]))
        for n, row in enumerate(timers):
            message_id = _next_id(uuid.UUID(str(row["message_id"])), previous)
            previous = message_id
            payload = bytes(row["payload"])
            encrypted = bool(row["encrypted"])
            if not encrypted and encrypt_now:
                # The queue encrypts by now: encrypted at fire, never twice.
                payload, encrypted = cipher.encrypt(payload), True
            item = PushItem(n, queue, partition, row["txn"], payload, message_id)
            group.items.append(item)
            sub = (row["producer_sub"] or "").encode()
            packed.append(frames.pack(message_id.bytes, row["txn"].encode(), payload,
                                      producer_sub=sub, encrypted=encrypted))
        writers = list(group.items)
        segments.append(Segment.fuse([PackedGroup(group, fact.encryption_enabled, fact.dedup,
                                                  writers, packed)]))
    return segments

