"""The `kv` rider of POST /api/v1/transaction (`tx.kv.*`, `tx.once(...)`, `tx.guard(lock)`):
validated with the transaction's budgets (64 ops, 256 keys, no getPrefix) and applied on the
transaction's own connection, before its pushes and acks (push/riders.py)."""

from __future__ import annotations

from typing import Any

import asyncpg

from .ops import KvOp, parse_ops
from .store import KvStore


def parse_kv_rider(raw: Any) -> list[KvOp]:
    return parse_ops(raw, in_transaction=True)


async def apply_kv_rider(conn: asyncpg.Connection,
                         ops: list[KvOp]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(one result per op in rider order, the failed op's verdict or None). A verdict names
    the op's rider-local `index`, its `reason`, current `value` and `version`."""
    outcome = await KvStore.apply_in(conn, ops)
    return outcome.results, outcome.failure
