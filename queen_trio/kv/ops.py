"""KV operations as the 2.6 client sends them: validated, typed, and put in the order the
database applies them (docs/kv-and-locks.md).

Every refusal is a 400 `{"error": "kv_bad_request", "reason": <id>, "detail": <prose>}` (413
`payload_too_large` for a value over the size limit) and is decided before anything is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import attrs
import msgspec

from ..errors import BadRequest, TooLarge

NAMESPACE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
MAX_KEY_BYTES = 512
MAX_VALUE_BYTES = 64 * 1024
# Budgets of one call: ops, keys read (getMany's keys, getPrefix's clamped limit), bytes read.
MAX_OPS = 256
MAX_RIDER_OPS = 64
MAX_KEYS = 1024
MAX_RIDER_KEYS = 256
READ_BYTE_BUDGET = 4 * 1024 * 1024
DEFAULT_PREFIX_LIMIT = 100
MAX_PREFIX_LIMIT = 1000
# A TTL beyond this is refused (ten years): make_interval takes an integer of seconds.
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600

OPS = ("get", "getMany", "getPrefix", "put", "putIfAbsent", "delete", "incr", "check")
WRITES = frozenset({"put", "putIfAbsent", "delete", "incr"})
_TENANT_FIELDS = ("tenant", "tenantId", "_tenant")
_ENCODE = msgspec.json.Encoder()


class KvBadRequest(BadRequest):
    """A KV call refused as a whole (400), with the reason code the clients know."""

    def __init__(self, reason: str, detail: str, *, code: str = "kv_bad_request") -> None:
        super().__init__(code, reason=reason, detail=detail)
        self.reason = reason


class KvTooLarge(TooLarge):
    """A value over MAX_VALUE_BYTES (413)."""

    def __init__(self, detail: str) -> None:
        super().__init__("payload_too_large", reason="payload_too_large", detail=detail)


@attrs.frozen
class KvOp:
    """One validated op. `index` is its place in the request; `wire` what the SQL reads."""

    index: int
    op: str
    ns: str
    key: str | None
    required: bool
    wire: dict[str, Any]

    @property
    def writes(self) -> bool:
        return self.op in WRITES

    @property
    def reads_many(self) -> bool:
        return self.op in ("getMany", "getPrefix")


def _bad(reason: str, detail: str, at: int) -> KvBadRequest:
    return KvBadRequest(reason, f"operation {at}: {detail}")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _key(value: Any, at: int, label: str = "key") -> str:
    if not isinstance(value, str) or not value:
        raise _bad("kv_bad_key", f"{label} must be a non-empty string", at)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise _bad("kv_bad_key", f"{label} is not valid Unicode", at) from None
    if size > MAX_KEY_BYTES:
        raise _bad("kv_key_too_large", f"{label} is longer than {MAX_KEY_BYTES} bytes", at)
    if "\x00" in value:
        raise _bad("kv_bad_key", f"{label} must not contain NUL", at)
    return value


def _expiry(op: dict[str, Any], at: int) -> int | None:
    """ttlSeconds, or None for forever; exactly one of the two must be declared."""
    ttl, forever = op.get("ttlSeconds"), op.get("forever")
    has_ttl = ttl is not None
    has_forever = forever is not None and forever is not False
    if has_ttl == has_forever:
        raise _bad("kv_expiry_not_specified",
                   "give exactly one of ttlSeconds (an integer > 0) and forever: true", at)
    if has_forever:
        if forever is not True:
            raise _bad("kv_bad_ttl", "forever must be true", at)
        return None
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
        raise _bad("kv_bad_ttl", "ttlSeconds must be an integer > 0", at)
    if ttl > MAX_TTL_SECONDS:
        raise _bad("kv_bad_ttl", f"ttlSeconds must be at most {MAX_TTL_SECONDS}", at)
    return ttl


def _expect(op: dict[str, Any], at: int, *, mandatory: bool = False) -> int | None:
    if "expect" not in op:
        if mandatory:
            raise _bad("kv_bad_expect", "check needs an expect (an integer >= 0)", at)
        return None
    value = op["expect"]
    if not _int(value) or value < 0:
        raise _bad("kv_bad_expect", "expect must be an integer >= 0", at)
    return int(value)


def _value(op: dict[str, Any], at: int) -> Any:
    if "value" not in op:
        raise _bad("kv_value_required", "value is required (null is a value)", at)
    size = len(_ENCODE.encode(op["value"]))
    if size > MAX_VALUE_BYTES:
        raise KvTooLarge(f"operation {at}: value is {size} bytes, more than {MAX_VALUE_BYTES}")
    return op["value"]


def _get_many(raw: dict[str, Any], at: int, wire: dict[str, Any], in_tx: bool) -> None:
    keys = raw.get("keys")
    if not isinstance(keys, list) or not keys:
        raise _bad("kv_bad_keys", "keys must be a non-empty array of keys", at)
    wire["keys"] = [_key(k, at, "each key") for k in keys]


def _get_prefix(raw: dict[str, Any], at: int, wire: dict[str, Any], in_tx: bool) -> None:
    if in_tx:
        raise _bad("kv_prefix_in_transaction", "getPrefix is not allowed in a transaction", at)
    prefix = raw.get("prefix")
    if not isinstance(prefix, str) or not prefix:
        raise _bad("kv_prefix_required", "prefix must be a non-empty string", at)
    wire["prefix"] = _key(prefix, at, "prefix")
    after = raw.get("after")
    if after is not None:
        wire["after"] = _key(after, at, "after")
    limit = raw.get("limit")
    if limit is None:
        limit = DEFAULT_PREFIX_LIMIT
    if not _int(limit):
        raise _bad("kv_bad_limit", "limit must be an integer", at)
    wire["limit"] = min(max(int(limit), 1), MAX_PREFIX_LIMIT)
    keys_only = raw.get("keysOnly", False)
    if not isinstance(keys_only, bool):
        raise _bad("kv_bad_keys_only", "keysOnly must be a boolean", at)
    wire["keysOnly"] = keys_only


def _put(raw: dict[str, Any], at: int, wire: dict[str, Any], in_tx: bool) -> None:
    wire["value"] = _value(raw, at)
    wire["ttl"] = _expiry(raw, at)
    expect = _expect(raw, at)
    if wire["op"] == "putIfAbsent":
        if expect not in (None, 0):
            raise _bad("kv_bad_expect", "putIfAbsent takes no expect (or 0)", at)
        expect = 0
    wire["expect"] = expect


def _delete(raw: dict[str, Any], at: int, wire: dict[str, Any], in_tx: bool) -> None:
    wire["expect"] = _expect(raw, at)


def _incr(raw: dict[str, Any], at: int, wire: dict[str, Any], in_tx: bool) -> None:
    if "expect" in raw:
        raise _bad("kv_bad_expect", "incr takes no expect", at)
    delta = raw.get("delta", 1)
    if not _number(delta):
        raise _bad("kv_bad_delta", "delta must be a finite number", at)
    for bound in ("min", "max"):
        if raw.get(bound) is not None and not _number(raw[bound]):
            raise _bad("kv_bad_bound", f"{bound} must be a finite number", at)
        wire[bound] = raw.get(bound)
    if wire["min"] is not None and wire["max"] is not None and wire["min"] > wire["max"]:
        raise _bad("kv_bad_bound", "min is above max", at)
    wire["delta"] = delta
    wire["ttl"] = _expiry(raw, at)


def _check(raw: dict[str, Any], at: int, wire: dict[str, Any], in_tx: bool) -> None:
    wire["expect"] = _expect(raw, at, mandatory=True)


def _read(raw: dict[str, Any], at: int, wire: dict[str, Any], in_tx: bool) -> None:
    return None


# Each op's own fields, into `wire` (the common ones are read by parse_op).
_FIELDS: dict[str, Callable[[dict[str, Any], int, dict[str, Any], bool], None]] = {
    "get": _read, "getMany": _get_many, "getPrefix": _get_prefix, "put": _put,
    "putIfAbsent": _put, "delete": _delete, "incr": _incr, "check": _check,
}


def parse_op(raw: Any, at: int, *, in_transaction: bool = False) -> KvOp:
    if not isinstance(raw, dict):
        raise _bad("kv_bad_op", "must be an object", at)
    kind = raw.get("op")
    if kind not in OPS:
        raise _bad("kv_unknown_op", f"unknown op {kind!r} (one of {', '.join(OPS)})", at)
    for field in _TENANT_FIELDS:
        if field in raw:
            raise _bad("kv_tenant_not_an_input", f"{field} is not an input", at)
    ns = raw.get("ns")
    if not isinstance(ns, str) or not NAMESPACE.fullmatch(ns):
        raise _bad("kv_bad_namespace", "ns must match [a-z0-9][a-z0-9._-]{0,63}", at)
    required = raw.get("required", False)
    if not isinstance(required, bool):
        raise _bad("kv_bad_required", "required must be a boolean", at)
    wire: dict[str, Any] = {"i": at, "op": kind, "ns": ns, "required": required}
    key: str | None = None
    if kind not in ("getMany", "getPrefix"):
        key = wire["key"] = _key(raw.get("key"), at)
    if kind in ("get", "check") and "value" in raw:
        raise _bad("kv_bad_op", f"{kind} takes no value", at)
    _FIELDS[kind](raw, at, wire, in_transaction)
    return KvOp(index=at, op=kind, ns=ns, key=key, required=required, wire=wire)


def parse_ops(raw: Any, *, in_transaction: bool = False, first_index: int = 0) -> list[KvOp]:
    """Validate a list of ops (a /kv call's, or a transaction's `kv` rider) as a whole."""
    if not isinstance(raw, list):
        raise KvBadRequest("kv_bad_request", "operations must be an array of ops")
    limit, key_limit = ((MAX_RIDER_OPS, MAX_RIDER_KEYS) if in_transaction
                        else (MAX_OPS, MAX_KEYS))
    if len(raw) > limit:
        raise KvBadRequest("kv_too_many_ops", f"at most {limit} ops per call, got {len(raw)}")
    ops = [parse_op(item, first_index + n, in_transaction=in_transaction)
           for n, item in enumerate(raw)]
    written: set[tuple[str, str]] = set()
    keys = 0
    for op in ops:
        if op.writes and op.key is not None:
            if (op.ns, op.key) in written:
                raise _bad("kv_duplicate_key_in_call",
                           f"a second write of {op.ns}/{op.key} in one call", op.index)
            written.add((op.ns, op.key))
        keys += (len(op.wire["keys"]) if op.op == "getMany"
                 else op.wire["limit"] if op.op == "getPrefix" else 1)
    if keys > key_limit:
        raise KvBadRequest("kv_key_budget", f"at most {key_limit} keys per call, got {keys}")
    return ops


def apply_order(ops: list[KvOp]) -> list[KvOp]:
    """The order the database takes row locks in: single-key ops by (ns, key) in byte order
    (COLLATE "C"), then the multi-key reads; ties keep the request order. The same order in
    every path is what keeps two calls from deadlocking (docs/kv-and-locks.md)."""
    def order(op: KvOp) -> tuple[int, bytes, bytes, int]:
        if op.reads_many:
            return (1, b"", b"", op.index)
        return (0, op.ns.encode(), (op.key or "").encode(), op.index)

    return sorted(ops, key=order)
