"""The bodies of /streams/v1/queries, /cycle and /state/get, read and bounded (docs/streams.md).

Casing is the SDK's: snake_case at the top, camelCase inside `ack` and `push_items`. Bad
input is a 400 (or a 413 for a bound) with a sentence that names the field; the reference's
success:false texts (`Unknown state_op type: X`, `Unknown ack.status: X`,
`ack.transactionId is required`) stay HTTP 200 failures, as the SDK expects.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import attrs
import msgspec

from .. import wire
from ..errors import BadRequest, TooLarge
from ..push.items import PushItem
from ..push.parse import build_item, trace_id

# Bounds (docs/streams.md, "Limits").
MAX_STATE_OPS = 10_000
MAX_PUSH_ITEMS = 10_000
MAX_KEY_BYTES = 1024
MAX_VALUE_BYTES = 1024 * 1024
MAX_KEYS = 10_000
MAX_NAME_BYTES = 1024

_ENCODE = msgspec.json.Encoder()


class CycleRefused(Exception):
    """A cycle the reference answers with HTTP 200 success:false (its error text)."""


@attrs.frozen
class Registration:
    name: str
    source_queue: str
    sink_queue: str | None
    config_hash: str
    reset: bool


@attrs.frozen
class StateOp:
    type: str
    key: str
    value: str | None  # JSON text of an upsert's value


@attrs.frozen
class CycleAck:
    transaction_id: str
    lease_id: uuid.UUID | None
    status: str
    error: str | None


@attrs.define
class Cycle:
    query_id: uuid.UUID
    partition_id: uuid.UUID
    consumer_group: str
    state_ops: list[StateOp]
    push_items: list[PushItem]
    ack: CycleAck | None
    release_lease: bool
    # Set when the body is read: the reference's success:false texts, answered without work.
    refusal: str | None = None

    def key(self) -> str | None:
        """The cycle's idempotency key (docs/decisions.md#streams-replayed-cycles): the ack
        (transaction id, lease, release flag), or for an ack-less cycle the keys it deletes;
        None when nothing identifies it."""
        if self.ack is not None:
            return "ack\x1f" + "\x1f".join([
                self.ack.transaction_id, str(self.ack.lease_id or ""), self.ack.status,
                "release" if self.release_lease else "keep"])
        deleted = sorted({op.key for op in self.state_ops if op.type == "delete"})
        if not deleted:
            return None
        digest = hashlib.sha256("\x1f".join(deleted).encode()).hexdigest()
        return f"flush\x1f{digest}"

    def deleted_keys(self) -> list[str]:
        return sorted({op.key for op in self.state_ops if op.type == "delete"})


@attrs.frozen
class StateQuery:
    query_id: uuid.UUID
    partition_id: uuid.UUID
    keys: list[str]
    prefix: str | None
    ripe: Decimal | None


def _body(body: bytes) -> dict[str, Any]:
    decoded = wire.decode_object(body) if body.strip() else None
    if decoded is None:
        raise BadRequest("Empty request body")
    if not isinstance(decoded, dict):
        raise BadRequest("request body must be a JSON object")
    return decoded


def _stored_text(value: str, label: str, bound: int, too_long: Callable[[], Exception]) -> str:
    """`value` as PostgreSQL text holds it (no NUL), of at most `bound` UTF-8 bytes; past the
    bound `too_long()` is raised (docs/streams.md: a name past it is a 413, a key a 400)."""
    if "\x00" in value:
        raise BadRequest(f"{label} must not contain NUL characters")
    if len(value.encode()) > bound:
        raise too_long()
    return value


def _required_text(body: dict[str, Any], field: str) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{field} is required")
    return _stored_text(value, field, MAX_NAME_BYTES,
                        lambda: TooLarge(f"{field} must be at most {MAX_NAME_BYTES} bytes"))


def _flag(body: dict[str, Any], field: str, default: bool) -> bool:
    value = body.get(field, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"{field} must be a boolean (true or false), not {value!r}")
    return value


def _uuid(body: dict[str, Any], field: str) -> uuid.UUID:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{field} is required")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise BadRequest(f"{field} is not a valid UUID: {value!r}") from None


def _array(body: dict[str, Any], field: str, bound: int) -> list[Any]:
    value = body.get(field)
    if value is None:  # absent or null: none (the Go SDK never sends null; it costs nothing)
        return []
    if not isinstance(value, list):
        raise BadRequest(f"{field} must be an array")
    if len(value) > bound:
        raise TooLarge(f"{field} holds {len(value)} entries; at most {bound} per request")
    return value


def _key(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"key{where} must be a string")
    return _stored_text(value, f"key{where}", MAX_KEY_BYTES,
                        lambda: BadRequest(f"key{where} is longer than {MAX_KEY_BYTES} bytes"))


def _json_value(value: Any, where: str) -> str:
    text = _ENCODE.encode(value)
    if len(text) > MAX_VALUE_BYTES:
        raise TooLarge(f"value{where} is {len(text)} bytes of JSON; at most {MAX_VALUE_BYTES}")
    if b"\\u0000" in text:
        raise BadRequest(f"value{where} must not contain NUL characters (\\u0000)")
    return text.decode()


def parse_registration(body: bytes) -> Registration:
    fields = _body(body)
    name = _required_text(fields, "name")
    source = _required_text(fields, "source_queue")
    config_hash = _required_text(fields, "config_hash")
    sink = fields.get("sink_queue")
    if sink is not None and not isinstance(sink, str):
        raise BadRequest("sink_queue must be a string")
    if sink is not None:
        sink = wire.name(sink, "sink_queue") or None
    return Registration(name=name, source_queue=source, sink_queue=sink,
                        config_hash=config_hash, reset=_flag(fields, "reset", False))


def _state_op(raw: Any, n: int) -> tuple[StateOp | None, str | None]:
    where = f" (state_ops[{n}])"
    if not isinstance(raw, dict):
        raise BadRequest(f"state_ops[{n}] must be an object")
    kind = raw.get("type")
    if kind not in ("upsert", "delete"):
        shown = kind if isinstance(kind, str) else repr(kind)
        return None, f"Unknown state_op type: {shown}"
    if "key" not in raw:
        raise BadRequest(f"key{where} is required")
    key = _key(raw.get("key"), where)
    value = _json_value(raw.get("value", {}), where) if kind == "upsert" else None
    return StateOp(type=kind, key=key, value=value), None


def _push_item(raw: Any, n: int) -> PushItem:
    where = f" (push_items[{n}])"
    if not isinstance(raw, dict):
        raise BadRequest(f"push_items[{n}] must be an object")
    if raw.get("queue") is None:
        raise BadRequest(f"queue{where} is required")
    payload = _ENCODE.encode(raw.get("payload", {}))
    if len(payload) > MAX_VALUE_BYTES:
        raise TooLarge(f"payload{where} is {len(payload)} bytes; at most {MAX_VALUE_BYTES}")
    partition = raw.get("partition", msgspec.UNSET)
    item = build_item(n, raw.get("queue"), msgspec.UNSET if partition is None else partition,
                      raw.get("transactionId", msgspec.UNSET), payload)
    item.trace_id = trace_id(raw.get("traceId"), where)
    return item


def _ack(raw: Any) -> tuple[CycleAck | None, str | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        raise BadRequest("ack must be an object or null")
    txid = raw.get("transactionId")
    if txid is None or txid == "":
        return None, "ack.transactionId is required"
    txid = wire.name(txid, "ack.transactionId")
    lease = raw.get("leaseId")
    lease_id: uuid.UUID | None = None
    if lease not in (None, ""):
        if not isinstance(lease, str):
            raise BadRequest("ack.leaseId must be a UUID string")
        try:
            lease_id = uuid.UUID(lease)
        except ValueError:
            raise BadRequest(f"ack.leaseId is not a valid UUID: {lease!r}") from None
    status = raw.get("status", "completed")
    if status is None:
        status = "completed"
    if status not in ("completed", "success", "failed", "dlq"):
        return None, f"Unknown ack.status: {status}"
    count = raw.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise BadRequest(f"ack.count must be a non-negative integer, not {count!r}")
    error = raw.get("error")
    if error is not None:
        error = wire.text(error, "ack.error")
    return CycleAck(transaction_id=txid, lease_id=lease_id, status=status, error=error), None


def parse_cycle(body: bytes) -> Cycle:
    fields = _body(body)
    query_id = _uuid(fields, "query_id")
    partition_id = _uuid(fields, "partition_id")
    group = wire.consumer_group(fields.get("consumer_group"), " (consumer_group)")
    refusal: str | None = None
    ops: list[StateOp] = []
    for n, raw in enumerate(_array(fields, "state_ops", MAX_STATE_OPS)):
        op, refused = _state_op(raw, n)
        if op is not None:
            ops.append(op)
        refusal = refusal or refused
    items = [_push_item(raw, n) for n, raw in enumerate(_array(fields, "push_items",
                                                                MAX_PUSH_ITEMS))]
    ack, refused = _ack(fields.get("ack"))
    refusal = refusal or refused
    return Cycle(query_id=query_id, partition_id=partition_id, consumer_group=group,
                 state_ops=ops, push_items=items, ack=ack,
                 release_lease=_flag(fields, "release_lease", True), refusal=refusal)


def parse_state_query(body: bytes) -> StateQuery:
    fields = _body(body)
    query_id = _uuid(fields, "query_id")
    partition_id = _uuid(fields, "partition_id")
    keys = [_key(k, f" (keys[{n}])") for n, k in enumerate(_array(fields, "keys", MAX_KEYS))]
    prefix = fields.get("key_prefix")
    if prefix is not None and not isinstance(prefix, str):
        raise BadRequest("key_prefix must be a string")
    if prefix is not None and "\x00" in prefix:
        raise BadRequest("key_prefix must not contain NUL characters")
    ripe_raw = fields.get("ripe_at_or_before")
    ripe: Decimal | None = None
    if ripe_raw is not None:
        if isinstance(ripe_raw, bool) or not isinstance(ripe_raw, (int, float)):
            raise BadRequest("ripe_at_or_before must be a number (epoch milliseconds)")
        if ripe_raw != ripe_raw or ripe_raw in (float("inf"), float("-inf")):
            raise BadRequest("ripe_at_or_before must be a finite number")
        ripe = Decimal(str(ripe_raw))
    return StateQuery(query_id=query_id, partition_id=partition_id, keys=keys,
                      prefix=prefix or None, ripe=ripe)
