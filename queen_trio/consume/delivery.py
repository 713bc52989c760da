"""What a pop delivers, decided without I/O: the claimed rows decoded into the reply's messages
(payload bytes spliced verbatim), the cuts that dead-letter undecodable messages, the reply,
and how long a long poll parks between looks.

`consume/pop.py` claims and answers; every rule it follows on the way is a function here.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from typing import TypedDict

import attrs
import msgspec

from .. import ids, wire
from ..settings import Settings
from ..storage import frames as framing
from ..storage.sql import Row

# A lease's id: ids.new_id's, or a stdlib UUID (tests).
LeaseId = ids.Id


@attrs.frozen
class PopRequest:
    queue: str | None
    partition: str | None
    namespace: str | None
    task: str | None
    group: str
    batch: int
    partitions: int
    wait: bool
    timeout_ms: int
    auto_ack: bool
    start_mode: str
    start_from: dt.datetime | None
    autopilot: bool
    # The conflation policy this pop states (`conflation=true|false`); None: it states none
    # (docs/decisions.md#conflation).
    conflation: bool | None = None


class _PoppedMessage(TypedDict):
    id: str
    transactionId: str
    traceId: str | None
    data: msgspec.Raw  # the payload's bytes, spliced verbatim
    producerSub: str | None
    createdAt: str
    partitionId: str
    partition: str
    leaseId: str
    consumerGroup: str


class PoppedMessage(_PoppedMessage, total=False):
    """One message of a pop's reply; `queue` only on a namespace/task pop."""

    queue: str | None


class Autopilot(TypedDict):
    partitions: int
    batch: int
    waitMs: int


class _PopReply(TypedDict):
    success: bool
    queue: str | None
    partition: str
    partitionId: str
    leaseId: str
    consumerGroup: str
    messages: list[PoppedMessage]
    partitionsClaimed: int


class PopReply(_PopReply, total=False):
    """A pop's 200 reply; `autopilot` only when the pop asked for it; `conflation` when the
    group's policy is conflating, `conflationConflict` when the pop stated the other one."""

    autopilot: Autopilot
    conflation: bool
    conflationConflict: bool


class _EmptyConflationReply(TypedDict):
    success: bool
    queue: str | None
    consumerGroup: str
    messages: list[PoppedMessage]
    partitionsClaimed: int


class EmptyConflationReply(_EmptyConflationReply, total=False):
    """What a pop that stated a conflation policy answers with nothing to deliver: a 200,
    never a 204 (a 204 cannot carry the echo the client checks)."""

    autopilot: Autopilot
    conflation: bool
    conflationConflict: bool


@attrs.frozen
class Delivery:
    """A pop's reply, and the lease to give back if it never reaches the consumer (None for
    autoAck: its claim committed the cursor, at most once)."""

    reply: PopReply | EmptyConflationReply
    lease_id: LeaseId | None
    # Messages the claim moved the cursor past as superseded (a conflating group).
    superseded: int = 0


@attrs.frozen
class Bad:
    """A claimed message that cannot be decoded: it goes to the group's dead letters."""

    partition_id: uuid.UUID
    offset: int
    message_id: str
    transaction_id: str | None
    reason: str


@attrs.frozen
class Decoded:
    """What a claim's rows turned into: the messages to deliver, and what could not be read."""

    messages: list[PoppedMessage] = attrs.Factory(list)
    # (partition id, offset) of each message, in step with `messages`.
    offsets: list[tuple[uuid.UUID, int]] = attrs.Factory(list)
    bad: list[Bad] = attrs.Factory(list)
    # Undecodable messages dead-lettered: the cursor moved, so a look again may find more.
    dead_lettered: int = 0
    # The earliest moment a partition that had nothing deliverable may have (a delay ends).
    next_check: dt.datetime | None = None
    # The claim found its queue (the group has joined it now).
    found: bool = False
    # The group's stored conflation policies seen in the claim's rows (one per queue).
    policies: frozenset[bool] = frozenset()
    # Messages the claim moved the cursor past as superseded (a conflating group).
    superseded: int = 0

    def conflating(self, req: PopRequest) -> bool:
        """The delivery policy that applied is conflation (a queue never seen yet: the one the
        pop stated, which its first claim there stores)."""
        return True in self.policies or (not self.policies and req.conflation is True)

    def conflict(self, req: PopRequest) -> bool:
        """The pop stated a policy and a stored one differs: the stored one applied."""
        return req.conflation is not None and any(p != req.conflation for p in self.policies)

    def delivering(self, keep: Sequence[int], dead_lettered: int) -> Decoded:
        """Only the messages at `keep` (indexes) go out, after `dead_lettered` dead letters."""
        return attrs.evolve(self, messages=[self.messages[i] for i in keep],
                            offsets=[self.offsets[i] for i in keep],
                            dead_lettered=dead_lettered)


# A claim's rows (pop_claim, pop_many, pop_namespace: partition_id, partition_name,
# first_offset, created_at, frames, frame_ends; or, for a partition with nothing deliverable
# yet, a null partition_id and its next_check_at), each with the queue it came from (a
# namespace/task pop claims several).
Runs = Sequence[tuple[str | None, Row]]


def decode_claim(runs: Runs, req: PopRequest, lease: str,
                 decrypt: Callable[[bytes], bytes]) -> Decoded:
    """The reply's messages, spliced from the claimed runs of frames; a row without a
    partition says when to look again. `lease`: the text every message carries ("" for
    autoAck). A frame that does not parse or decrypt is `bad`, in its offset's place."""
    messages: list[PoppedMessage] = []
    offsets: list[tuple[uuid.UUID, int]] = []
    bad: list[Bad] = []
    next_check: dt.datetime | None = None
    with_queue = req.queue is None
    group = req.group
    policies: set[bool] = set()
    superseded = 0
    for queue, row in runs:
        policy: bool | None = row["conflation"]
        if policy is not None:
            policies.add(policy)
        superseded += row["superseded"] or 0
        partition_id: uuid.UUID | None = row["partition_id"]
        if partition_id is None:
            check: dt.datetime | None = row["next_check_at"]
            if check is not None and (next_check is None or check < next_check):
                next_check = check
            continue
        pid = str(partition_id)
        created = wire.format_micros(row["created_at"])
        name: str = row["partition_name"]
        offset: int = row["first_offset"]
        frames: bytes = row["frames"]
        ends: Sequence[int] = row["frame_ends"]
        for fields in framing.fields_between(frames, ends):
            if isinstance(fields, framing.Undecodable):
                bad.append(Bad(partition_id, offset, fields.message_id,
                               fields.transaction_id, fields.reason))
                offset += 1
                continue
            message_id, txid, trace, sub, encrypted, payload = fields
            if encrypted:
                try:
                    payload = decrypt(payload)
                except Exception:
                    bad.append(Bad(partition_id, offset, message_id, txid, "decryption failed"))
                    offset += 1
                    continue
            message: PoppedMessage = {
                "id": message_id,
                "transactionId": txid,
                "traceId": trace,
                "data": msgspec.Raw(payload),
                "producerSub": sub,
                "createdAt": created,
                "partitionId": pid,
                "partition": name,
                "leaseId": lease,
                "consumerGroup": group,
            }
            if with_queue:
                message["queue"] = queue
            messages.append(message)
            offsets.append((partition_id, offset))
            offset += 1
    return Decoded(messages, offsets, bad, next_check=next_check, found=bool(runs),
                   policies=frozenset(policies), superseded=superseded)


@attrs.frozen
class Cut:
    """A leased partition's state after its undecodable head is dead-lettered."""

    cursor: int  # past the undecodable messages at the head
    until: int   # delivered_until: the end of the decodable run after them


@attrs.frozen
class DeadLetterPlan:
    cuts: dict[uuid.UUID, Cut]  # per partition id (leased claims only)
    dead: list[Bad]       # dead-lettered now
    keep: list[int]       # indexes of the decoded messages still delivered


def dead_letter_plan(offsets: Sequence[tuple[uuid.UUID, int]], bad: Sequence[Bad], *,
                     auto_ack: bool) -> DeadLetterPlan:
    """Which undecodable messages of one claim are dead-lettered now, and what is delivered.

    autoAck: the cursor is already past every claimed message, so each undecodable one is
    dead-lettered and the others are delivered. With a lease, the cursor is cumulative: per
    partition, the undecodable messages at its head are dead-lettered (the cursor moves past
    them), the decodable run after them is delivered, and the delivery stops short of the next
    undecodable message, which a later claim dead-letters once it is the head.
    """
    if auto_ack:
        return DeadLetterPlan({}, list(bad), list(range(len(offsets))))
    claimed: dict[uuid.UUID, list[tuple[int, bool]]] = {}  # partition -> (offset, decodable)
    for pid, offset in offsets:
        claimed.setdefault(pid, []).append((offset, True))
    for item in bad:
        claimed.setdefault(item.partition_id, []).append((item.offset, False))
    cuts = {pid: _cut(sorted(run)) for pid, run in claimed.items()
            if not all(ok for _, ok in run)}
    return DeadLetterPlan(
        cuts,
        [item for item in bad if item.offset < cuts[item.partition_id].cursor],
        [i for i, (pid, offset) in enumerate(offsets)
         if pid not in cuts or offset < cuts[pid].until])


def _cut(run: list[tuple[int, bool]]) -> Cut:
    """A partition's claimed (offset, decodable) in offset order, at least one undecodable."""
    head = 0
    while head < len(run) and not run[head][1]:
        head += 1
    end = head
    while end < len(run) and run[end][1]:
        end += 1
    cursor = run[head][0] if head < len(run) else run[-1][0] + 1
    return Cut(cursor, run[end - 1][0] + 1 if end > head else cursor)


def assemble_reply(req: PopRequest, lease_id: LeaseId, decoded: Decoded) -> Delivery | None:
    """The pop's reply from its decoded messages; None (204) when there are none. The
    top-level queue and partition are the first message's."""
    messages = decoded.messages
    if not messages:
        return None
    first = messages[0]
    lease = "" if req.auto_ack else str(lease_id)
    reply: PopReply = {
        "success": True,
        "queue": first.get("queue", req.queue),
        "partition": first["partition"],
        "partitionId": first["partitionId"],
        "leaseId": lease,
        "consumerGroup": req.group,
        "messages": messages,
        "partitionsClaimed": len({pid for pid, _ in decoded.offsets}),
    }
    if req.autopilot:
        reply["autopilot"] = {"partitions": req.partitions, "batch": req.batch,
                              "waitMs": 0 if len(messages) else 100}
    if decoded.conflating(req):
        reply["conflation"] = True
    if decoded.conflict(req):
        reply["conflationConflict"] = True
    return Delivery(reply, None if req.auto_ack else lease_id, decoded.superseded)


def empty_conflation_reply(req: PopRequest, decoded: Decoded) -> Delivery:
    """The 200 of a pop that stated a conflation policy and has nothing to deliver (empty, or
    its long poll timed out): the echo rides it (docs/decisions.md#conflation)."""
    reply: EmptyConflationReply = {"success": True, "queue": req.queue,
                                   "consumerGroup": req.group, "messages": [],
                                   "partitionsClaimed": 0}
    if req.autopilot:
        reply["autopilot"] = {"partitions": req.partitions, "batch": req.batch, "waitMs": 100}
    if decoded.conflating(req):
        reply["conflation"] = True
    if decoded.conflict(req):
        reply["conflationConflict"] = True
    return Delivery(reply, None, decoded.superseded)


def park_seconds(empty_checks: int, settings: Settings, next_check: dt.datetime | None,
                 now: dt.datetime) -> float:
    """How long a long poll parks after its `empty_checks`-th empty look (woken earlier by a
    commit): the backoff, but never past the moment a delayed message may become deliverable
    (it wakes just after it; the SQL cut decides, never this timer)."""
    s = settings
    ms: float
    if empty_checks <= s.pop_wait_backoff_threshold:
        ms = s.pop_wait_initial_interval_ms
    else:
        ms = s.pop_wait_initial_interval_ms * empty_checks * s.pop_wait_backoff_multiplier
    park = min(ms, s.pop_wait_max_interval_ms) / 1000
    if next_check is not None:
        park = min(park, max((next_check - now).total_seconds() + 0.001, 0.0))
    return park
