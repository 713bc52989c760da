"""Timer ops on the wire: schedule, reschedule and cancel, validated before any write.

One op shape serves `POST /api/v1/timers`, the DELETE route's cancel and a transaction's
`timers` rider (the client builds all three with `queen/timers/ops.py`). Every refusal is a
400 `{"error": "timers_bad_request", "reason": ...}` naming the op; a payload past its bound
is a 413 `payload_too_large`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import attrs
import msgspec

from .. import wire
from ..errors import BadRequest, TooLarge

# Per call (POST /api/v1/timers, or a transaction's rider).
MAX_OPS = 256
# The decoded (and decompressed) payload of one timer.
MAX_PAYLOAD_BYTES = 1024 * 1024
# deliverAt = now + delayMs, at most this far ahead.
HORIZON_MS = 90 * 24 * 3600 * 1000
# Fields the broker owns: a client that sends one is refused (the client refuses them too).
SERVER_OWNED = frozenset({
    "producerSub", "producer_sub", "messageId", "message_id", "tenant", "tenantId",
    "tenant_id", "deliverAt", "deliver_at", "delaySeconds", "delay_seconds", "attempts",
    "claimToken", "claim_token", "claimedUntil", "claimed_until",
})
DEFAULT_PARTITION = "Default"
_KNOWN = frozenset({"op", "queue", "timerKey", "payload", "delayMs", "txn", "partition",
                    "payloadZstd"})
_JSON = msgspec.json.Decoder()


def bad(reason: str, detail: str) -> BadRequest:
    return BadRequest("timers_bad_request", reason=reason, detail=detail)


@attrs.frozen
class TimerOp:
    """One validated op: `schedule` (reschedule is the same upsert) or `cancel`."""

    op: str
    queue: str
    timer_key: str
    partition: str = DEFAULT_PARTITION
    delay_ms: int = 0
    txn: str | None = None
    # The JSON document the message will carry (decoded and decompressed, validated).
    payload: bytes = b""
    rescheduled: bool = False  # the client asked for "reschedule" (same upsert)


def _decompress(data: bytes, cap: int, where: str) -> bytes:
    import zstandard  # loaded by the first compressed timer only

    try:
        params = zstandard.get_frame_parameters(data)
    except zstandard.ZstdError as exc:
        raise bad("bad_payload", f"payload{where} is not a zstd frame: {exc}") from None
    # The frame's declared size (when it declares one) is refused before anything is
    # allocated; a frame that does not declare it is streamed with a hard cap.
    if params.content_size != zstandard.CONTENTSIZE_UNKNOWN and params.content_size > cap:
        raise TooLarge("payload_too_large",
                              detail=f"payload{where} decompresses past {cap} bytes")
    out = bytearray()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data)
        while True:
            chunk = reader.read(65536)
            if not chunk:
                break
            out += chunk
            if len(out) > cap:
                raise TooLarge("payload_too_large",
                                      detail=f"payload{where} decompresses past {cap} bytes")
    except zstandard.ZstdError as exc:
        raise bad("bad_payload", f"payload{where} is not a valid zstd frame: {exc}") from None
    return bytes(out)


def _payload(value: Any, zstd: bool, where: str, max_body_bytes: int) -> bytes:
    if not isinstance(value, str):
        raise bad("bad_payload", f"payload{where} must be a base64 string")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise bad("bad_payload", f"payload{where} is not valid base64") from None
    cap = min(MAX_PAYLOAD_BYTES, max_body_bytes)
    if zstd:
        raw = _decompress(raw, cap, where)
    if len(raw) > cap:
        raise TooLarge("payload_too_large",
                              detail=f"payload{where} is {len(raw)} bytes; at most {cap}")
    try:
        wire.check_depth(raw)
        _JSON.decode(raw)
    except (msgspec.DecodeError, BadRequest, UnicodeDecodeError):
        raise bad("bad_payload", f"payload{where} must decode to one JSON document "
                                 "(a timer becomes a message, whose body is JSON)") from None
    return raw


def _required_text(value: Any, field: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise bad(f"bad_{field}", f"{field}{where} must be a non-empty string")
    try:
        return wire.name(value, field, where)
    except BadRequest as exc:
        raise bad(f"bad_{field}", str(exc)) from None


def parse_op(raw: Any, where: str, *, max_body_bytes: int) -> TimerOp:
    if not isinstance(raw, dict):
        raise bad("bad_op", f"operation{where} must be an object")
    for field in raw:
        if field in SERVER_OWNED or (isinstance(field, str) and field.startswith("_")):
            raise bad("server_owned_field",
                      f"`{field}`{where} is set by the broker and cannot be supplied")
    kind = raw.get("op")
    queue = _required_text(raw.get("queue"), "queue", where)
    key = _required_text(raw.get("timerKey"), "timerKey", where)
    txn = raw.get("txn")
    if kind == "cancel":
        if txn is not None and not isinstance(txn, str):
            raise bad("bad_txn", f"txn{where} must be a string")
        return TimerOp("cancel", queue, key, txn=txn or None)
    if kind not in ("schedule", "reschedule"):
        raise bad("bad_op", f"op{where} must be schedule, reschedule or cancel: {kind!r}")
    partition = raw.get("partition", DEFAULT_PARTITION)
    partition = _required_text(partition, "partition", where)
    delay = raw.get("delayMs")
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay != delay:
        raise bad("bad_delay", f"delayMs{where} must be a number of milliseconds")
    if delay > HORIZON_MS:
        raise bad("timer_horizon_exceeded",
                  f"delayMs{where} is past the horizon of {HORIZON_MS} ms (90 days)")
    delay_ms = max(int(delay), -HORIZON_MS)
    txn = _required_text(txn, "txn", where)
    zstd = raw.get("payloadZstd", False)
    if not isinstance(zstd, bool):
        raise bad("bad_payload", f"payloadZstd{where} must be a boolean")
    payload = _payload(raw.get("payload"), zstd, where, max_body_bytes)
    return TimerOp("schedule", queue, key, partition, delay_ms, txn, payload,
                   rescheduled=kind == "reschedule")


def parse_ops(raw: Any, *, max_body_bytes: int, label: str = "operations") -> list[TimerOp]:
    """A list of ops: at most MAX_OPS, one per (queue, timerKey)."""
    if not isinstance(raw, list):
        raise bad("bad_body", f"{label} must be an array of timer operations")
    if len(raw) > MAX_OPS:
        raise bad("too_many_ops", f"{label} holds {len(raw)} operations; at most {MAX_OPS}")
    ops = [parse_op(item, f" ({label}[{n}])", max_body_bytes=max_body_bytes)
           for n, item in enumerate(raw)]
    seen: set[tuple[str, str]] = set()
    for n, op in enumerate(ops):
        if (op.queue, op.timer_key) in seen:
            raise bad("duplicate_timer",
                      f"{label}[{n}] names ({op.queue!r}, {op.timer_key!r}) again; one op per "
                      "timer per call")
        seen.add((op.queue, op.timer_key))
    return ops


def parse_body(body: bytes, *, max_body_bytes: int) -> list[TimerOp]:
    """POST /api/v1/timers: `{"operations": [op, ...]}`."""
    try:
        decoded = wire.decode_object(body)
    except BadRequest as exc:
        raise bad("bad_body", str(exc)) from None
    if not isinstance(decoded, dict) or "operations" not in decoded:
        raise bad("bad_body", "the body must be an object with an operations array")
    return parse_ops(decoded["operations"], max_body_bytes=max_body_bytes)
