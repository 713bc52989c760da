"""POST /api/v1/transaction: pushes and acks that land together, in one PostgreSQL transaction.

Push operations follow the push path's rules (dedup reported, not an abort; producerSub
stamped; encryption) and are the only way to set a traceId. Ack operations follow /ack's rules;
any ack that is refused, or a `requiredLeases` entry that is not live, rolls everything back.
Riders (`kv`: tx.kv.*, tx.once, tx.guard) run first, in the same transaction (push/riders.py);
a lost `required` op rolls everything back and answers the kv_precondition verdict. A
`timers` rider (tx.timer) is parsed and applied by the hook the broker hands in
(timers/service.py; this room never imports the timers'), after the kv rider; its results
follow the kv rider's in the flat `results`.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal, Protocol, TypedDict

import asyncpg
import attrs
import msgspec
from msgspec import UNSET, Raw, UnsetType

from .. import ids, wire
from ..consume.acks import Ack, apply_acks, parse_ack
from ..consume.wakeups import WakeRegistry
from ..errors import BadRequest
from ..queues.queues import Queues, StaleQueues, retry_while_stale
from ..storage.database import Database
from ..storage.sql import Q
from .bundle import Segment, commit_in_transaction
from .items import PushItem
from .parse import build_item, trace_id
from .publisher import Publisher
from .riders import REFUSED, RIDERS


class _WireItem(msgspec.Struct):
    queue: object = UNSET
    partition: object = UNSET
    payload: Raw | UnsetType = UNSET
    transactionId: object = UNSET
    traceId: object = UNSET


class _WireOp(msgspec.Struct):
    type: object = UNSET
    items: list[_WireItem] | UnsetType = UNSET
    # The flat push form; payload/data stay raw bytes. Ack fields are read from a plain decode.
    queue: object = UNSET
    partition: object = UNSET
    payload: Raw | UnsetType = UNSET
    data: Raw | UnsetType = UNSET
    transactionId: object = UNSET
    traceId: object = UNSET


class _WireTransaction(msgspec.Struct):
    operations: list[Raw] | UnsetType = UNSET
    requiredLeases: object = UNSET
    # The 2.6 client's riders (tx.kv.*, tx.once, tx.guard, tx.timer): applied (push/riders.py)
    # or, when this broker has no such rider, refused, never committed without their effect.
    kv: object = UNSET
    timers: object = UNSET


_BODY = msgspec.json.Decoder(_WireTransaction)
_OP = msgspec.json.Decoder(_WireOp)
_ANY = msgspec.json.Decoder()


class _AckOutcome(TypedDict):
    success: bool
    error: str | None
    dlq: bool


class PushOpResult(TypedDict):
    index: int
    type: Literal["push"]
    success: bool
    status: str
    transactionId: str
    messageId: str | None
    partitionId: str | None
    queueName: str


class AckOpResult(_AckOutcome):
    index: int
    type: Literal["ack"]
    transactionId: str


class TransactionReply(TypedDict):
    """The reply of POST /api/v1/transaction; `error` only when it rolled back."""

    transactionId: str
    success: bool
    # Then one result per rider op (push/riders.py), each a dict of its rider's making.
    results: list[PushOpResult | AckOpResult | dict[str, Any]]


class TransactionFailure(TransactionReply):
    error: str


class PreconditionFailure(TransactionFailure):
    """A rider's `required` op lost: everything rolled back (docs/kv-and-locks.md)."""

    ok: bool
    reason: Literal["kv_precondition"]
    failedIndex: int
    kvReason: str | None
    version: int
    value: Any


@attrs.define
class _Op:
    """One flattened operation: a push item or an ack (group, ack), in request order."""

    push: PushItem | None = None
    ack: tuple[str, Ack] | None = None
    ack_result: _AckOutcome | None = None


def _push_item(index: int, queue: object, partition: object, txid: object,
               payload: Raw | UnsetType, trace: object, where: str) -> PushItem:
    # A missing payload is {} here, as on the reference's transaction route.
    item = build_item(index, queue, partition, txid,
                      b"{}" if payload is UNSET else bytes(payload))
    item.trace_id = trace_id(trace, where)
    return item


@attrs.frozen
class Parsed:
    """A transaction body, validated: flattened ops, required leases, prepared riders (rider
    key -> what its parse returned, in RIDERS order)."""

    ops: list[_Op]
    leases: list[uuid.UUID]
    riders: dict[str, Any] = attrs.field(factory=dict)


TIMERS = "timers"


class TimerRiderHook(Protocol):
    """A transaction's `timers` rider: validated before the transaction, applied inside it."""

    def parse(self, raw: Any, producer_sub: str | None) -> Any: ...

    async def apply(self, conn: asyncpg.Connection, parsed: Any) -> list[dict[str, Any]]: ...


def _riders(decoded: _WireTransaction) -> dict[str, Any]:
    """Each rider the body carries, parsed (the `timers` rider raw: the runner's hook parses
    it); one this broker cannot honour refuses the whole transaction."""
    for key in REFUSED:
        if getattr(decoded, key) not in (UNSET, None, []):
            # The client's own reason code: its guard and once() callers see why.
            raise BadRequest("kv_bad_request", reason="riders_not_supported",
                             detail=f"transaction {key} riders are not supported by this "
                                    "broker yet; nothing was committed")
    prepared: dict[str, Any] = {}
    for key, rider in RIDERS.items():
        value = getattr(decoded, key)
        if value not in (UNSET, None, []):
            prepared[key] = rider.parse(value)
    if decoded.timers not in (UNSET, None, []):
        prepared[TIMERS] = decoded.timers
    return prepared


def _required_leases(value: object) -> list[uuid.UUID]:
    """`requiredLeases`: absent, null, or an array of lease ids."""
    if value in (UNSET, None):
        return []
    if not isinstance(value, list):
        raise BadRequest("requiredLeases must be an array of lease ids")
    return [wire.parse_uuid(v, "requiredLeases entry") for v in value]


def parse_transaction(body: bytes, pushed: list[PushItem] | None = None) -> Parsed:
    """The operations, required leases and riders of a JSON transaction body. `pushed`: the
    pushes of a binary transaction (push/binary.py), whose `body` is the JSON head; they follow
    the head's operations, in the order written, and a head may then carry no operation."""
    if pushed and not body.strip():
        body = b"{}"
    try:
        decoded = wire.decode_strict(_BODY, body)
    except msgspec.ValidationError as exc:
        if "operations" in str(exc):
            raise BadRequest("operations array required") from None
        raise BadRequest("Request body must be a JSON object") from None
    riders = _riders(decoded)
    if decoded.operations is UNSET and not pushed:
        raise BadRequest("operations array required")
    operations = [] if decoded.operations is UNSET else decoded.operations
    if not operations and not riders and not pushed:
        raise BadRequest("operations array cannot be empty")
    leases = _required_leases(decoded.requiredLeases)
    ops: list[_Op] = []
    for n, raw in enumerate(operations):
        where = f" (operation {n})"
        try:
            op = _OP.decode(raw)
        except msgspec.ValidationError as exc:
            if "$.items" in str(exc):
                raise BadRequest(f"items{where} must be an array of objects") from None
            raise BadRequest(f"operation {n} must be an object") from None
        if op.type == "push":
            if op.items is UNSET:
                ops.append(_Op(push=_push_item(len(ops), op.queue, op.partition, op.transactionId,
                                               op.payload if op.payload is not UNSET else op.data,
                                               op.traceId, where)))
                continue
            for item in op.items:
                ops.append(_Op(push=_push_item(len(ops), item.queue, item.partition,
                                               item.transactionId, item.payload, item.traceId,
                                               where)))
        elif op.type == "ack":
            fields = _ANY.decode(raw)
            ops.append(_Op(ack=(wire.consumer_group(fields.get("consumerGroup"), where),
                                parse_ack(fields, where))))
        else:
            raise BadRequest(f"Unknown operation type{where}: {op.type!r}")
    for carried in pushed or ():
        carried.index = len(ops)
        ops.append(_Op(push=carried))
    return Parsed(ops, leases, riders)


class _Abort(Exception):
    """Roll the transaction back and answer success:false with this reason."""


class _Precondition(Exception):
    """A rider's `required` op lost: roll back, answer this kv_precondition verdict."""

    def __init__(self, verdict: dict[str, Any]) -> None:
        super().__init__("kv_precondition")
        self.verdict = verdict


class TransactionRunner:
    def __init__(self, db: Database, publisher: Publisher, queues: Queues,
                 wakeups: WakeRegistry, timers: TimerRiderHook | None = None) -> None:
        self._db = db
        self._publisher = publisher
        self._queues = queues
        self._wakeups = wakeups
        self._timers = timers

    async def run(self, parsed: Parsed, producer_sub: str | None
                  ) -> TransactionReply | TransactionFailure | PreconditionFailure:
        ops, leases, riders = parsed.ops, parsed.leases, dict(parsed.riders)
        reply_id = str(ids.new_id())
        if TIMERS in riders:
            if self._timers is None:
                raise BadRequest("kv_bad_request", reason="riders_not_supported",
                                 detail="transaction timers riders are not supported by this "
                                        "broker; nothing was committed")
            riders[TIMERS] = self._timers.parse(riders[TIMERS], producer_sub)
        pushes = [op.push for op in ops if op.push is not None]
        ack_ops = [op for op in ops if op.ack is not None]
        segments: list[Segment] = []
        released: list[str] = []
        rider_results: list[dict[str, Any]] = []

        async def attempt() -> set[str]:
            nonlocal segments, released, rider_results
            segments = self._publisher.segments(pushes, producer_sub)
            rider_results = []
            released = await self._db.call(
                lambda conn: self._in_transaction(conn, segments, ack_ops, leases, riders,
                                                  len(ops), rider_results))
            return set()

        try:
            fresh = await retry_while_stale(self._queues, attempt)
        except _Abort as exc:
            return {"transactionId": reply_id, "success": False, "error": str(exc),
                    "results": []}
        except _Precondition as exc:
            v = exc.verdict
            return {"transactionId": reply_id, "success": False, "ok": False,
                    "reason": "kv_precondition", "failedIndex": v["failedIndex"],
                    "kvReason": v["kvReason"], "version": v["version"], "value": v["value"],
                    "error": f"kv precondition failed: {v['kvReason']}", "results": []}
        if not fresh:
            return {"transactionId": reply_id, "success": False,
                    "error": "queue configuration kept changing", "results": []}
        for queue in {item.queue for item in pushes} | set(released):
            self._wakeups.notify(queue)
        results: list[PushOpResult | AckOpResult | dict[str, Any]] = [
            *self._results(ops, segments), *rider_results]
        return {"transactionId": reply_id, "success": True, "results": results}

    async def _apply_riders(self, conn: asyncpg.Connection, riders: dict[str, Any], flat: int,
                            into: list[dict[str, Any]]) -> None:
        """Every rider, in RIDERS order, first in the transaction (the lock order: KV rows and
        timer rows before queue, partition and consumer rows). Results go into `into` with
        their flat index; a lost required op raises _Precondition."""
        for key, rider in RIDERS.items():
            if key not in riders:
                continue
            results, failure = await rider.apply(conn, riders[key])
            if failure is not None:
                raise _Precondition({
                    "success": False, "ok": False, "reason": "kv_precondition",
                    "failedIndex": flat + int(failure.get("index", 0)),
                    "kvReason": failure.get("reason"), "version": failure.get("version", 0),
                    "value": failure.get("value")})
            for result in results:
                into.append({**result, "index": flat})
                flat += 1
        if TIMERS in riders and self._timers is not None:
            # Timer rows before partition rows (docs/decisions.md#timers).
            for n, result in enumerate(await self._timers.apply(conn, riders[TIMERS])):
                into.append({"type": "timer", "timerIndex": n, "success": result["ok"],
                             **result, "index": flat})
                flat += 1

    async def _in_transaction(self, conn: asyncpg.Connection, segments: list[Segment],
                              ack_ops: list[_Op], leases: list[uuid.UUID],
                              riders: dict[str, Any], flat: int,
                              rider_results: list[dict[str, Any]]) -> list[str]:
        """Everything in one transaction; raises to roll back. Returns queues whose lease was
        released by an ack (long polls there should look again)."""
        async with conn.transaction():
            await self._apply_riders(conn, riders, flat, rider_results)
            if leases and await Q.live_leases.fetchval(conn, lease_ids=leases) != len(set(leases)):
                raise _Abort("requiredLeases: a lease is not live (expired, released or unknown)")
            stale, full = await commit_in_transaction(conn, segments)
            if stale:
                raise StaleQueues(stale)
            if full:
                raise _Abort(f"queue full: {full}")
            released: list[str] = []
            if ack_ops:
                rows = await apply_acks(conn, [op.ack for op in ack_ops if op.ack is not None])
                for row in rows:
                    if row.released:
                        assert row.queue_name is not None  # the queue of a lease it released
                        released.append(row.queue_name)
                        continue
                    if not row.success:
                        raise _Abort(f"ACK operation failed: {row.error}")
                    assert row.item_no is not None  # an ack's row
                    ack_ops[row.item_no - 1].ack_result = {
                        "success": True, "error": None, "dlq": bool(row.dlq)}
            return released

    @staticmethod
    def _results(ops: list[_Op], segments: list[Segment]) -> list[PushOpResult | AckOpResult]:
        partition_of = {id(item): seg.partition_id
                        for seg in segments for packed in seg.groups for item in packed.group.items}
        results: list[PushOpResult | AckOpResult] = []
        for index, op in enumerate(ops):
            if op.push is not None:
                outcome, message_id = op.push.answer()
                results.append({"index": index, "type": "push", "success": True,
                                "status": outcome.wire, "transactionId": op.push.transaction_id,
                                "messageId": message_id,
                                "partitionId": partition_of.get(id(op.push)),
                                "queueName": op.push.queue})
            elif op.ack is not None:
                outcome_of_ack = op.ack_result or {"success": True, "error": None, "dlq": False}
                results.append({"index": index, "type": "ack",
                                "transactionId": op.ack[1].transaction_id,
                                "success": outcome_of_ack["success"],
                                "error": outcome_of_ack["error"],
                                "dlq": outcome_of_ack["dlq"]})
        return results
