"""One message as the operations routes read it, and the one rule for a message's status.

A message's status is decided here, in Python, and nowhere else (not in SQL): the queries
return where each group stands on the partition (`message_states`: its cursor, its lease as
stored and the database's clock when read), the message's dead letters, and its frame.

`message_status`: `dead_letter` when dead-lettered; else, against a group's position,
`processing` under the group's live lease (the lease expires after the database's clock at
the read, and the message is below what it delivered), `pending` at or after its cursor,
`completed` behind it. The message's own status is taken against its partition's reference
group (`reference`: queue mode when the partition has it, else the slowest group); a
partition no group reads holds only pending messages.

`MessageView` is GET /api/v1/messages/:partitionId/:transactionId's read model, built from
the rows by `message_view`; `message_reply` is its reply.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import msgspec

from .. import wire
from ..errors import NotFound
from ..storage import frames as framing
from ..storage.encryption import PayloadCipher
from ..storage.sql import Row
from .resources import stamp

STATUSES = ("pending", "processing", "completed", "dead_letter")


@attrs.frozen
class Position:
    """Where a consumer group stands on a partition, as read."""

    group: str
    cursor: int
    retry_count: int
    # The lease as stored (None without one): what it delivered, and when it expires.
    delivered_until: int | None
    lease_expires_at: dt.datetime | None
    # The database's clock at the read, against which the lease is live or not.
    read_at: dt.datetime

    @classmethod
    def from_row(cls, row: Row) -> Position:
        """A `message_states` row."""
        leased = row["lease_id"] is not None
        return cls(row["consumer_group"], row["cursor_offset"], row["retry_count"],
                   row["delivered_until"] if leased else None,
                   row["lease_expires_at"] if leased else None, row["read_at"])

    @property
    def live_lease(self) -> bool:
        return self.lease_expires_at is not None and self.lease_expires_at > self.read_at


def message_status(position: Position | None, offset: int, *,
                   dead_lettered: bool = False) -> str:
    """The status of the message at `offset`, against `position` (None: no group reads the
    partition). The one place a message's status is decided."""
    if dead_lettered:
        return "dead_letter"
    if position is not None and offset < position.cursor:
        return "completed"
    if (position is not None and position.live_lease and position.delivered_until is not None
            and offset < position.delivered_until):
        return "processing"
    return "pending"


def reference(positions: Iterable[Position]) -> Position | None:
    """The group a partition's messages take their status from: queue mode when the partition
    has it, else the slowest group (then by name)."""
    positions = list(positions)
    for position in positions:
        if position.group == wire.QUEUE_MODE:
            return position
    return min(positions, key=lambda p: (p.cursor, p.group), default=None)


def mode_type(has_queue_mode: bool, bus_groups: int) -> str:
    """How a queue (or a partition) is read: by queue mode, named groups, both or neither."""
    if has_queue_mode:
        return "hybrid" if bus_groups else "queue"
    return "bus" if bus_groups else "none"


def lease_stamp(position: Position | None, status: str) -> str | None:
    """`leaseExpiresAt`: only for a message under a live lease."""
    if status != "processing" or position is None:
        return None
    return stamp(position.lease_expires_at)


@attrs.frozen
class DeadLetter:
    group: str
    error_message: str | None
    retry_count: int
    failed_at: dt.datetime | None


@attrs.frozen
class QueueConfig:
    lease_time: int
    retry_limit: int
    retry_delay: int
    ttl: int
    priority: int


@attrs.frozen
class MessageView:
    partition_id: uuid.UUID
    transaction_id: str
    offset: int
    queue: str
    partition: str
    namespace: str | None
    task: str | None
    config: QueueConfig
    created_at: dt.datetime
    # From the frame: its id, trace and producer; `encrypted` is None when it does not parse.
    message_id: str
    trace_id: str | None
    producer_sub: str | None
    encrypted: bool | None
    # Decrypted; or None, and `payload_error` says why.
    payload: bytes | None
    payload_error: str | None
    positions: tuple[Position, ...]  # by group name
    dead_letters: tuple[DeadLetter, ...]  # newest first

    @property
    def reference(self) -> Position | None:
        return reference(self.positions)

    @property
    def status(self) -> str:
        return message_status(self.reference, self.offset, dead_lettered=bool(self.dead_letters))

    def status_for(self, position: Position) -> str:
        """The message's status for one group: dead_letter only if that group dead-lettered
        it."""
        dead = any(d.group == position.group for d in self.dead_letters)
        return message_status(position, self.offset, dead_lettered=dead)

    @property
    def retry_count(self) -> int | None:
        """The newest dead letter's count; else the reference group's, while the message is
        at its cursor; else none."""
        if self.dead_letters:
            return self.dead_letters[0].retry_count
        ref = self.reference
        return ref.retry_count if ref is not None and ref.cursor == self.offset else None


def message_view(row: Row | None, states: Sequence[Row],
                 dead: Sequence[Row], cipher: PayloadCipher,
                 transaction_id: str) -> MessageView:
    """The model from `message_lookup`'s row, `message_states` and `message_dead_letters`;
    NotFound when there is no such message, or neither its segment nor a dead letter holds
    its frame any more."""
    frame_bytes = row["frame"] if row is not None else None
    if frame_bytes is None and dead:
        frame_bytes = dead[0]["frame"]  # retention removed the segment; the DLQ kept a copy
    if row is None or frame_bytes is None:
        raise NotFound("Message not found")
    fields = framing.read_one(frame_bytes)
    payload, problem = cipher.read_payload(fields)
    if isinstance(fields, framing.Undecodable):
        message_id, trace, sub, encrypted = fields.message_id, None, None, None
    else:
        message_id, _txid, trace, sub, encrypted, _payload = fields
    return MessageView(
        partition_id=row["partition_id"], transaction_id=transaction_id,
        offset=row["message_offset"], queue=row["queue_name"],
        partition=row["partition_name"], namespace=row["namespace"] or None,
        task=row["task"] or None,
        config=QueueConfig(row["lease_time"], row["retry_limit"], row["retry_delay"],
                           row["ttl"], row["priority"]),
        created_at=row["created_at"] or dead[0]["message_created_at"],
        message_id=message_id, trace_id=trace, producer_sub=sub, encrypted=encrypted,
        payload=payload, payload_error=problem,
        positions=tuple(sorted((Position.from_row(s) for s in states), key=lambda p: p.group)),
        dead_letters=tuple(DeadLetter(d["consumer_group"], d["error_message"],
                                      d["retry_count"], d["failed_at"]) for d in dead))


def message_reply(view: MessageView) -> dict[str, Any]:
    """GET /api/v1/messages/:partitionId/:transactionId's reply."""
    status = view.status
    groups = []
    for position in view.positions:
        own = view.status_for(position)
        groups.append({"name": position.group, "status": own,
                       "consumed": own in ("completed", "dead_letter"),
                       "leaseExpiresAt": lease_stamp(position, own)})
    named = [p for p in view.positions if p.group != wire.QUEUE_MODE]
    has_queue_mode = len(named) != len(view.positions)
    config = view.config
    return {
        "id": view.message_id, "transactionId": view.transaction_id,
        "partitionId": str(view.partition_id), "queuePath": f"{view.queue}/{view.partition}",
        "queue": view.queue, "partition": view.partition,
        "namespace": view.namespace, "task": view.task,
        "status": status,
        "payload": None if view.payload is None else msgspec.Raw(view.payload),
        "payloadError": view.payload_error,
        "isEncrypted": view.encrypted,
        "traceId": view.trace_id, "producerSub": view.producer_sub,
        "createdAt": wire.format_millis(view.created_at),
        "errorMessage": view.dead_letters[0].error_message if view.dead_letters else None,
        "retryCount": view.retry_count,
        "leaseExpiresAt": lease_stamp(view.reference, status),
        "queueConfig": {"leaseTime": config.lease_time, "retryLimit": config.retry_limit,
                        "retryDelay": config.retry_delay, "ttl": config.ttl,
                        "priority": config.priority},
        "mode": {"hasQueueMode": has_queue_mode, "busGroupsCount": len(named),
                 "consumedByGroups": sum(1 for g in groups if g["consumed"]
                                         and g["name"] != wire.QUEUE_MODE),
                 "type": mode_type(has_queue_mode, len(named))},
        "consumerGroups": groups,
        "deadLetters": [{"consumerGroup": d.group, "errorMessage": d.error_message,
                         "retryCount": d.retry_count, "failedAt": stamp(d.failed_at)}
                        for d in view.dead_letters],
    }
