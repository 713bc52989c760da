"""A push end to end: group, pack (encrypt), hand to the lane, wait, answer per item."""

from __future__ import annotations

import logging

from ..queues.queues import Queues, retry_while_stale
from ..storage.encryption import PayloadCipher
from .bundle import PackedGroup, Segment, pack_group
from .items import Group, PushItem, PushResult, group_items
from .lane import LaneClosed, PushLane
from .outcome import Outcome, http_status
from .spool import Spool, SpoolRecord

log = logging.getLogger("queen_trio.publisher")


class Publisher:
    def __init__(self, lane: PushLane, queues: Queues, cipher: PayloadCipher,
                 spool: Spool | None = None, *, max_pending_bytes: int = 256 * 1024 * 1024
                 ) -> None:
        self._lane = lane
        self._max_pending_bytes = max_pending_bytes
        self._queues = queues
        self._cipher = cipher
        self._spool = spool
        self._warned_plaintext: set[str] = set()

    def forget_warnings(self) -> None:
        """Warn again about queues already warned about (a test broker's reset)."""
        self._warned_plaintext.clear()

    async def push(self, items: list[PushItem], producer_sub: str | None
                   ) -> tuple[int, list[PushResult]]:
        """Commit every group; return (HTTP status, per-item results in request order)."""
        weight = sum(len(item.payload) for item in items)
        if self._lane.pending_bytes + weight > self._max_pending_bytes:
            # The lane holds too much already: store nothing, the client comes back.
            for item in items:
                item.settle(Outcome.OVERLOADED, "broker overloaded")
            return http_status([Outcome.OVERLOADED]), [item.result() for item in items]
        pending: list[Group] = []
        to_spool: list[Group] = []
        for group in group_items(items):
            # Behind spooled records of its partition a group waits its turn in the spool.
            if self._spool is not None and self._spool.holds(group.queue, group.partition):
                to_spool.append(group)
            else:
                pending.append(group)

        async def attempt() -> set[str]:
            nonlocal pending
            submitted: list[PackedGroup] = []
            for group in pending:
                packed = self.pack(group, producer_sub)
                try:
                    self._lane.submit_nowait(packed)
                except LaneClosed as exc:
                    for item in packed.writers:
                        item.settle(Outcome.UNAVAILABLE, str(exc))
                    to_spool.append(group)
                    continue
                submitted.append(packed)
            for packed in submitted:
                await packed.done.wait()
            to_spool.extend(p.group for p in submitted if p.outcome is Outcome.UNAVAILABLE)
            pending = [p.group for p in submitted if p.outcome is Outcome.STALE]
            return {g.queue for g in pending}

        if not await retry_while_stale(self._queues, attempt):
            for group in pending:
                for item in group.items:
                    if item.outcome is Outcome.STALE:
                        item.settle(Outcome.FAILED, "queue configuration kept changing")
        if to_spool and self._spool is not None:
            await self._buffer(to_spool, producer_sub)
        return (http_status(i.outcome for i in items if i.winner is None),
                [item.result() for item in items])

    async def _buffer(self, groups: list[Group], producer_sub: str | None) -> None:
        """Spool the groups (fsynced) and mark them `buffered`; a write failure leaves them
        `unavailable` (503)."""
        assert self._spool is not None
        records: list[SpoolRecord] = []
        writers: list[PushItem] = []
        for group in groups:
            known = self._queues.known(group.queue)
            # Encrypted now only when the queue's config is known; else once, at replay.
            encrypt = (self._cipher.encrypt if known is not None and known.encryption_enabled
                       and self._cipher.enabled else None)
            packed = pack_group(group, dedup=known.dedup if known is not None else True,
                                encryption_assumed=False, encrypt=None,
                                producer_sub=producer_sub)
            for item in packed.writers:
                records.append(SpoolRecord(
                    queue=item.queue, partition=item.partition, message_id=item.message_id.bytes,
                    transaction_id=item.transaction_id, producer_sub=producer_sub,
                    trace_id=item.trace_id,
                    payload=encrypt(item.payload) if encrypt else item.payload,
                    encrypted=encrypt is not None))
                writers.append(item)
        try:
            await self._spool.append(records)
        except OSError as exc:
            log.error("spool write failed", extra={"error": str(exc)})
            for item in writers:
                item.settle(Outcome.UNAVAILABLE, f"spool write failed: {exc}")
            return
        for item in writers:
            item.settle(Outcome.BUFFERED)

    def segments(self, items: list[PushItem], producer_sub: str | None) -> list[Segment]:
        """The items as one segment per group, packed now, for a caller that commits them in
        its own transaction (transactions, stream cycles) rather than through the lane."""
        return [Segment.fuse([self.pack(group, producer_sub)]) for group in group_items(items)]

    def pack(self, group: Group, producer_sub: str | None) -> PackedGroup:
        """Pack a group under what the broker assumes about its queue (encrypting if asked)."""
        facts = self._queues.assumed(group.queue)
        encrypt = None
        if facts.encryption_enabled:
            if self._cipher.enabled:
                encrypt = self._cipher.encrypt
            elif group.queue not in self._warned_plaintext:
                self._warned_plaintext.add(group.queue)
                log.warning("queue has encryptionEnabled but encryption is disabled; "
                            "storing plaintext", extra={"queue": group.queue,
                                                        "cause": self._cipher.problem})
        return pack_group(group, dedup=facts.dedup, encryption_assumed=facts.encryption_enabled,
                          encrypt=encrypt, producer_sub=producer_sub)
