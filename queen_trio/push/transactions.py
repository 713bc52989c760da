"""POST /api/v1/transaction: pushes and acks that land together, in one PostgreSQL transaction.

Push operations follow the push path's rules (dedup reported, not an abort; producerSub
stamped; encryption) and are the only way to set a traceId. Ack operations follow /ack's rules;
any ack that is refused, or a `requiredLeases` entry that is not live, rolls everything back.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import attrs
import msgspec
from msgspec import UNSET, Raw, UnsetType

from .. import ids, wire
from ..consume.acks import Ack, apply_acks, parse_ack
from ..consume.wakeups import WakeRegistry
from ..errors import BadRequest
from ..queues.queues import Queues, retry_while_stale
from ..storage.database import Database
from ..storage.sql import Q
from .bundle import Segment, commit_bundle
from .items import PushItem, group_items
from .outcome import Outcome
from .parse import build_item
from .publisher import Publisher


class _WireItem(msgspec.Struct):
    queue: Any = UNSET
    partition: Any = UNSET
    payload: Raw | UnsetType = UNSET
    transactionId: Any = UNSET
    traceId: Any = UNSET


class _WireOp(msgspec.Struct):
    type: Any = UNSET
    items: list[_WireItem] | UnsetType = UNSET
    # The flat push form; payload/data stay raw bytes. Ack fields are read from a plain decode.
    queue: Any = UNSET
    partition: Any = UNSET
    payload: Raw | UnsetType = UNSET
    data: Raw | UnsetType = UNSET
    transactionId: Any = UNSET
    traceId: Any = UNSET


class _WireTransaction(msgspec.Struct):
    operations: list[Raw] | UnsetType = UNSET
    requiredLeases: Any = UNSET
    # The 2.6 client's riders (tx.kv.*, tx.once, tx.guard, tx.timer): read so that a
    # transaction carrying one is refused, never committed without its gate.
    kv: Any = UNSET
    timers: Any = UNSET


_BODY = msgspec.json.Decoder(_WireTransaction)
_OP = msgspec.json.Decoder(_WireOp)
_ANY = msgspec.json.Decoder()


@attrs.define
class _Op:
    """One flattened operation: a push item or an ack (group, ack), in request order."""

    push: PushItem | None = None
    ack: tuple[str, Ack] | None = None
    ack_result: dict[str, Any] | None = None


def _trace_id(value: Any, where: str) -> bytes | None:
    if value is UNSET or value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest(f"traceId{where} must be a UUID string")
    try:
        return uuid.UUID(value).bytes
    except ValueError:
        raise BadRequest(f"traceId{where} must be a UUID: {value!r}") from None


def _push_item(index: int, queue: Any, partition: Any, txid: Any, payload: Raw | UnsetType,
               trace: Any, where: str) -> PushItem:
    # A missing payload is {} here, as on the reference's transaction route.
    item = build_item(index, queue, partition, txid,
                      b"{}" if payload is UNSET else bytes(payload))
    item.trace_id = _trace_id(trace, where)
    return item


def _refuse_riders(decoded: _WireTransaction) -> None:
    """A rider this broker cannot honour refuses the whole transaction."""
    for rider in ("kv", "timers"):
        if getattr(decoded, rider) not in (UNSET, None, []):
            # The client's own reason code: its guard and once() callers see why.
            raise BadRequest("kv_bad_request", reason="riders_not_supported",
                             detail=f"transaction {rider} riders are not supported by this "
                                    "broker yet; nothing was committed")


def parse_transaction(body: bytes, pushed: list[PushItem] | None = None
                      ) -> tuple[list[_Op], list[uuid.UUID]]:
    """The operations and required leases of a JSON transaction body. `pushed`: the pushes of
    a binary transaction (push/binary.py), whose `body` is the JSON head; they follow the
    head's operations, in the order written, and a head may then carry no operation."""
    if pushed and not body.strip():
        body = b"{}"
    try:
        decoded = wire.decode_strict(_BODY, body)
    except msgspec.ValidationError as exc:
        if "operations" in str(exc):
            raise BadRequest("operations array required") from None
        raise BadRequest("Request body must be a JSON object") from None
    _refuse_riders(decoded)
    if decoded.operations is UNSET and not pushed:
        raise BadRequest("operations array required")
    operations = [] if decoded.operations is UNSET else decoded.operations
    if not operations and not pushed:
        raise BadRequest("operations array cannot be empty")
    leases: list[uuid.UUID] = []
    if decoded.requiredLeases not in (UNSET, None):
        if not isinstance(decoded.requiredLeases, list):
            raise BadRequest("requiredLeases must be an array of lease ids")
        leases = [wire.parse_uuid(v, "requiredLeases entry") for v in decoded.requiredLeases]
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
    return ops, leases


class _Abort(Exception):
    """Roll the transaction back and answer success:false with this reason."""


class _Stale(Exception):
    pass


class TransactionRunner:
    def __init__(self, db: Database, publisher: Publisher, queues: Queues,
                 wakeups: WakeRegistry) -> None:
        self._db = db
        self._publisher = publisher
        self._queues = queues
        self._wakeups = wakeups

    async def run(self, ops: list[_Op], leases: list[uuid.UUID],
                  producer_sub: str | None) -> dict[str, Any]:
        reply_id = str(ids.new_id())
        pushes = [op.push for op in ops if op.push is not None]
        ack_ops = [op for op in ops if op.ack is not None]
        segments: list[Segment] = []
        released: list[str] = []

        async def attempt() -> set[str]:
            nonlocal segments, released
            segments = [Segment.fuse([self._publisher.pack(group, producer_sub)])
                        for group in group_items(pushes)]
            try:
                released = await self._db.call(
                    lambda conn: self._in_transaction(conn, segments, ack_ops, leases))
            except _Stale as exc:
                return set(exc.args[0])
            return set()

        try:
            fresh = await retry_while_stale(self._queues, attempt)
        except _Abort as exc:
            return {"transactionId": reply_id, "success": False, "error": str(exc),
                    "results": []}
        if not fresh:
            return {"transactionId": reply_id, "success": False,
                    "error": "queue configuration kept changing", "results": []}
        for queue in {item.queue for item in pushes} | set(released):
            self._wakeups.notify(queue)
        return {"transactionId": reply_id, "success": True,
                "results": self._results(ops, segments)}

    async def _in_transaction(self, conn: asyncpg.Connection, segments: list[Segment],
                              ack_ops: list[_Op], leases: list[uuid.UUID]) -> list[str]:
        """Everything in one transaction; raises to roll back. Returns queues whose lease was
        released by an ack (long polls there should look again)."""
        async with conn.transaction():
            if leases and await Q.live_leases.fetchval(conn, lease_ids=leases) != len(set(leases)):
                raise _Abort("requiredLeases: a lease is not live (expired, released or unknown)")
            writing = [seg for seg in segments if seg.writers]
            if writing:
                await commit_bundle(conn, writing)
                stale = {seg.queue for seg in writing if seg.outcome is Outcome.STALE}
                if stale:
                    raise _Stale(stale)
                full = [seg.queue for seg in writing if seg.outcome is Outcome.FULL]
                if full:
                    raise _Abort(f"queue full: {full[0]}")
            released: list[str] = []
            if ack_ops:
                rows = await apply_acks(conn, [op.ack for op in ack_ops if op.ack is not None])
                for row in rows:
                    if row["released"]:
                        released.append(row["queue_name"])
                        continue
                    if not row["success"]:
                        raise _Abort(f"ACK operation failed: {row['error']}")
                    ack_ops[row["item_no"] - 1].ack_result = {
                        "success": True, "error": None, "dlq": bool(row["dlq"])}
            return released

    @staticmethod
    def _results(ops: list[_Op], segments: list[Segment]) -> list[dict[str, Any]]:
        partition_of = {id(item): seg.partition_id
                        for seg in segments for packed in seg.groups for item in packed.group.items}
        results: list[dict[str, Any]] = []
        for index, op in enumerate(ops):
            if op.push is not None:
                outcome, message_id = op.push.answer()
                results.append({"index": index, "type": "push", "success": True,
                                "status": outcome.wire, "transactionId": op.push.transaction_id,
                                "messageId": message_id,
                                "partitionId": partition_of.get(id(op.push)),
                                "queueName": op.push.queue})
            elif op.ack is not None:
                results.append({"index": index, "type": "ack",
                                "transactionId": op.ack[1].transaction_id,
                                **(op.ack_result or {"success": True, "error": None,
                                                     "dlq": False})})
        return results
