"""POST /api/v1/locks: acquire, renew, release and get for locks and semaphores.

A permit is a KV row (namespace `queen-locks`, key `<name>#<slot>`, value `{owner, since}`,
the lifetime as its TTL) and its version is the fencing token: it changes at every renew and
only rises. The ops of one call are independent, each its own short transaction; every
answer is index-aligned and echoes `index`, `op` and `name` (docs/kv-and-locks.md).
"""

from __future__ import annotations

from typing import Any

import asyncpg
import msgspec

from .. import wire
from ..errors import BadRequest
from ..storage.database import is_connection_failure
from ..storage.sql import Q
from .ops import MAX_TTL_SECONDS
from .store import KvCommitUnknown, KvStore

LOCKS_NAMESPACE = "queen-locks"
MAX_NAME_BYTES = 256
MAX_OWNER_BYTES = 256
MAX_LIMIT = 1024
MAX_OPS = 64
LOCK_OPS = ("acquire", "renew", "release", "get")

_DECODE = msgspec.json.Decoder()


class LocksBadRequest(BadRequest):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__("locks_bad_request", reason=reason, detail=detail)


def _control(text: str) -> bool:
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in text)


def _text(value: Any, label: str, limit: int, at: int) -> str:
    if not isinstance(value, str) or not value:
        raise LocksBadRequest(f"locks_bad_{label}",
                              f"operation {at}: {label} must be a non-empty string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise LocksBadRequest(f"locks_bad_{label}",
                              f"operation {at}: {label} is not valid Unicode") from None
    if size > limit or _control(value):
        raise LocksBadRequest(f"locks_bad_{label}",
                              f"operation {at}: {label} must be at most {limit} bytes, "
                              "without control characters")
    return value


def _int(raw: dict[str, Any], field: str, at: int, low: int, high: int,
         default: int | None = None) -> int:
    value = raw.get(field)
    if value is None and default is not None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        reason = "locks_bad_ttl" if field == "ttlSeconds" else f"locks_bad_{field}"
        raise LocksBadRequest(reason,
                              f"operation {at}: {field} must be an integer in {low}..{high}")
    return value


def parse_lock_ops(body: bytes) -> list[dict[str, Any]]:
    decoded = wire.require_object(wire.decode_object(body))
    raw_ops = decoded.get("operations")
    if not isinstance(raw_ops, list):
        raise LocksBadRequest("locks_bad_request", "operations must be an array of ops")
    if len(raw_ops) > MAX_OPS:
        raise LocksBadRequest("locks_too_many_ops",
                              f"at most {MAX_OPS} ops per call, got {len(raw_ops)}")
    ops: list[dict[str, Any]] = []
    names: set[str] = set()
    for at, raw in enumerate(raw_ops):
        if not isinstance(raw, dict):
            raise LocksBadRequest("locks_bad_op", f"operation {at} must be an object")
        kind = raw.get("op")
        if kind not in LOCK_OPS:
            raise LocksBadRequest("locks_unknown_op",
                                  f"operation {at}: unknown op {kind!r} "
                                  f"(one of {', '.join(LOCK_OPS)})")
        name = _text(raw.get("name"), "name", MAX_NAME_BYTES, at)
        if "#" in name:
            raise LocksBadRequest("locks_bad_name", f"operation {at}: name must not contain #")
        if name in names:
            raise LocksBadRequest("locks_duplicate_in_call",
                                  f"operation {at}: a second op on lock {name!r} in one call")
        names.add(name)
        op: dict[str, Any] = {"op": kind, "name": name}
        if kind in ("acquire", "renew"):
            if raw.get("forever") is not None:
                raise LocksBadRequest("locks_bad_ttl", f"operation {at}: a lock has no forever")
            op["ttl"] = _int(raw, "ttlSeconds", at, 1, MAX_TTL_SECONDS)
            owner = raw.get("owner")
            op["owner"] = None if owner is None else _text(owner, "owner", MAX_OWNER_BYTES, at)
        if kind == "acquire":
            op["limit"] = _int(raw, "limit", at, 1, MAX_LIMIT, default=1)
        if kind in ("renew", "release"):
            op["token"] = _int(raw, "token", at, 1, 2**63 - 1)
            op["slot"] = _int(raw, "slot", at, 0, MAX_LIMIT - 1, default=0)
        ops.append(op)
    return ops


def guard(name: str, slot: int, token: int) -> dict[str, Any]:
    """The KV check a transaction carries to commit only while this permit is held."""
    return {"op": "check", "ns": LOCKS_NAMESPACE, "key": f"{name}#{slot}", "expect": token,
            "required": True}


async def _one(conn: asyncpg.Connection, op: dict[str, Any]) -> dict[str, Any]:
    kind = op["op"]
    if kind == "acquire":
        text = await Q.lock_acquire.fetchval(conn, name=op["name"], owner=op["owner"],
                                             ttl=op["ttl"], lim=op["limit"])
    elif kind == "renew":
        text = await Q.lock_renew.fetchval(conn, name=op["name"], token=op["token"],
                                           slot=op["slot"], owner=op["owner"], ttl=op["ttl"])
    elif kind == "release":
        text = await Q.lock_release.fetchval(conn, name=op["name"], token=op["token"],
                                             slot=op["slot"])
    else:
        text = await Q.lock_get.fetchval(conn, name=op["name"])
    result: dict[str, Any] = _DECODE.decode(text)
    if result.get("acquired") or result.get("renewed"):
        result["guard"] = guard(op["name"], int(result["slot"]), int(result["token"]))
    return result


async def run_locks(store: KvStore, body: bytes) -> dict[str, Any]:
    ops = parse_lock_ops(body)

    async def work(conn: asyncpg.Connection) -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []
        for op in ops:
            try:
                answers.append(await _one(conn, op))
            except Exception as exc:
                # Each op is its own implicit transaction. Once a write has been sent, a lost
                # connection (or any failure after an earlier write committed) may leave some
                # of the call applied: 503 would promise it was not (docs/kv-and-locks.md).
                sent_a_write = op["op"] != "get" and is_connection_failure(exc)
                if not sent_a_write and not any(o["op"] != "get" for o in ops[:len(answers)]):
                    raise
                raise KvCommitUnknown("kv_error", reason="commit_unknown",
                                      detail=f"operation {len(answers)} failed after a write "
                                             f"was sent; the call may have applied: "
                                             f"{type(exc).__name__}") from exc
        return answers

    answers = await store.call(work) if ops else []
    results = []
    for index, (op, result) in enumerate(zip(ops, answers, strict=True)):
        store.count_lock(op["op"], result)
        results.append({**result, "index": index, "op": op["op"], "name": op["name"]})
    return {"results": results}
