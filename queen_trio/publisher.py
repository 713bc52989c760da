"""A push end to end: group, pack (encrypt), hand to the lane, wait, answer per item."""

from __future__ import annotations

import logging
from typing import Any

from .encryption import PayloadCipher
from .lane import LaneClosed, PushLane
from .push import Group, PackedGroup, PushItem, group_items, pack_group
from .queues import QueueDirectory
from .spool import Spool, SpoolRecord

log = logging.getLogger("queen_trio.publisher")

# How often a group is repacked because another broker changed its queue meanwhile.
MAX_STALE_RETRIES = 3


class Publisher:
    def __init__(self, lane: PushLane, directory: QueueDirectory, cipher: PayloadCipher,
                 spool: Spool | None = None) -> None:
        self._lane = lane
        self._directory = directory
        self._cipher = cipher
        self._spool = spool
        self._warned_plaintext: set[str] = set()

    async def push(self, items: list[PushItem], producer_sub: str | None) -> tuple[int, list[Any]]:
        """Commit every group; return (HTTP status, per-item results in request order)."""
        pending: list[Group] = []
        to_spool: list[Group] = []
        for group in group_items(items):
            # Behind spooled records of its partition a group waits its turn in the spool.
            if self._spool is not None and self._spool.holds(group.queue, group.partition):
                to_spool.append(group)
            else:
                pending.append(group)
        for attempt in range(MAX_STALE_RETRIES + 1):
            submitted: list[PackedGroup] = []
            for group in pending:
                packed = self.pack(group, producer_sub)
                try:
                    self._lane.submit(packed)
                except LaneClosed as exc:
                    for item in packed.writers:
                        item.status, item.error = "unavailable", str(exc)
                    to_spool.append(group)
                    continue
                submitted.append(packed)
            for packed in submitted:
                await packed.done.wait()
            to_spool.extend(p.group for p in submitted if p.outcome == "unavailable")
            stale = [p.group for p in submitted if p.outcome == "stale"]
            if not stale or attempt == MAX_STALE_RETRIES:
                break
            for queue in {g.queue for g in stale}:
                await self._directory.refresh(queue)
            pending = stale
        if to_spool and self._spool is not None:
            await self._buffer(to_spool, producer_sub)
        for item in items:
            if item.status == "stale":
                item.status, item.error = "failed", "queue configuration kept changing"
        return _http_status(items), [item.result() for item in items]

    async def _buffer(self, groups: list[Group], producer_sub: str | None) -> None:
        """Spool the groups (fsynced) and mark them `buffered`; a write failure leaves them
        `unavailable` (503)."""
        assert self._spool is not None
        records: list[SpoolRecord] = []
        writers: list[PushItem] = []
        for group in groups:
            known = self._directory.known(group.queue)
            # Encrypted now only when the queue's config is known; else once, at replay.
            encrypt = (self._cipher.encrypt if known is not None and known.encryption_enabled
                       and self._cipher.enabled else None)
            dedup = known.dedup if known is not None else True
            packed = pack_group(group, dedup=dedup, encryption_assumed=False, encrypt=None,
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
                item.status, item.error = "unavailable", f"spool write failed: {exc}"
            return
        for item in writers:
            item.status, item.error = "buffered", None

    def pack(self, group: Any, producer_sub: str | None) -> PackedGroup:
        """Pack a group under what the broker assumes about its queue (encrypting if asked)."""
        facts = self._directory.assumed(group.queue)
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


def _http_status(items: list[PushItem]) -> int:
    """201 when nothing failed; 429 when only full queues did; 503 when the database is
    unreachable (and nothing worse failed); 500 otherwise (DECISIONS: Push)."""
    statuses = {item.status for item in items if item.winner is None}
    if "failed" in statuses:
        return 500
    if "unavailable" in statuses:
        return 503
    if "full" in statuses:
        return 429
    return 201
