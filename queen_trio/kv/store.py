"""The KV service: POST /api/v1/kv batches, the transaction rider's apply, the reads the
dashboard and the CLI make, and what the metrics count (docs/kv-and-locks.md).

A call runs on the KV pool (`QUEEN_KV_POOL_SIZE` connections, its own statement timeout) behind
a first-come-first-served gate, so KV traffic never queues behind the push and pop path and
a slow database fails KV with a 503 instead of starving the message path. A transaction's rider
runs on the transaction's own connection instead (`apply_in`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg
import attrs
import msgspec
import trio

from .. import wire
from ..errors import QueenError, Unavailable
from ..storage.database import Database, is_connection_failure, is_transient
from ..storage.sql import Q
from .ops import READ_BYTE_BUDGET, KvBadRequest, KvOp, apply_order, parse_ops

T = TypeVar("T")

_ENCODE = msgspec.json.Encoder()
_DECODE = msgspec.json.Decoder()


class KvCommitUnknown(QueenError):
    """The COMMIT itself failed: the call may or may not have applied (500, never a 503)."""


@attrs.frozen
class KvOutcome:
    """A KV op list applied: `results` in request order, each with `op`, `key`, `index`;
    `failed` the request index of the first `required` op that did not apply (then nothing
    was kept)."""

    results: list[dict[str, Any]]
    failed: int | None

    @property
    def failure(self) -> dict[str, Any] | None:
        """The failed op's verdict (its reason, current value and version), if any."""
        if self.failed is None:
            return None
        return next(r for r in self.results if r.get("index") == self.failed)


@attrs.frozen
class KvStatistics:
    ops: Mapping[tuple[str, str], int]        # (op, verdict) -> count
    lock_ops: Mapping[tuple[str, str], int]   # (op, verdict) -> count
    calls: int
    unavailable: int                          # calls answered 503 kv_unavailable
    gate_waiting: int                         # calls waiting at the gate now
    live_rows: int | None                     # from the sweeper's last reading
    permits: int | None                       # live lock permits, same reading


def verdict(op: str, result: Mapping[str, Any]) -> str:
    """How one op went, for the metrics: applied / a reason / found / missing / rolled back."""
    if result.get("rolledBack"):
        return "rolled_back"
    if op in ("get",):
        return "found" if result.get("found") else "missing"
    if op in ("getMany", "getPrefix"):
        return "read"
    if op in ("acquire", "renew", "release", "get_lock"):
        flag = {"acquire": "acquired", "renew": "renewed", "release": "released"}.get(op, "held")
        return "ok" if result.get(flag) else str(result.get("reason") or "no")
    return "applied" if result.get("applied") else str(result.get("reason") or "refused")


def _answer(ops: list[KvOp], raw: Mapping[str, Any], first_index: int) -> KvOutcome:
    by_index = {int(r["i"]): r for r in raw["results"]}
    failed = raw.get("failed")
    results: list[dict[str, Any]] = []
    for op in ops:
        result = by_index.get(op.index)
        if failed is not None and op.index != failed and (result is None or op.writes):
            # Rolled back with the failed op (a write), or never run (it came after).
            result = ({"applied": False, "rolledBack": True} if op.writes or op.op == "check"
                      else {"rolledBack": True})
        elif result is None:
            raise RuntimeError(f"kv_apply gave no result for op {op.index}")
        result = {k: v for k, v in result.items() if k != "i"}
        result["op"] = op.op
        if op.key is not None:
            result["key"] = op.key
        result["index"] = op.index - first_index
        results.append(result)
    return KvOutcome(results, None if failed is None else int(failed))


def precondition_envelope(outcome: KvOutcome, flat_offset: int) -> dict[str, Any]:
    """The answer of a lost `required` op: 200 with the JS client's fields (`ok`, `reason`,
    `failedIndex` in the flat result space, `kvReason`, `version`, `value`)."""
    failure = outcome.failure or {}
    return {"ok": False, "success": False, "reason": "kv_precondition",
            "failedIndex": flat_offset + int(failure.get("index", 0)),
            "kvReason": failure.get("reason"), "version": failure.get("version", 0),
            "value": failure.get("value")}


class KvStore:
    def __init__(self, db: Database, *, gate_size: int, gate_timeout: float) -> None:
        self._db = db
        self._gate = trio.Semaphore(gate_size)  # FIFO: trio's ParkingLot wakes in order
        self._gate_timeout = gate_timeout
        self._waiting = 0
        self._ops: Counter[tuple[str, str]] = Counter()
        self._lock_ops: Counter[tuple[str, str]] = Counter()
        self._calls = 0
        self._unavailable = 0
        self.live_rows: int | None = None
        self.permits: int | None = None

    @property
    def db(self) -> Database:
        return self._db

    def statistics(self) -> KvStatistics:
        return KvStatistics(ops=dict(self._ops), lock_ops=dict(self._lock_ops),
                            calls=self._calls, unavailable=self._unavailable,
                            gate_waiting=self._waiting, live_rows=self.live_rows,
                            permits=self.permits)

    def count(self, ops: list[KvOp], results: list[dict[str, Any]]) -> None:
        for op, result in zip(ops, results, strict=False):
            self._ops[(op.op, verdict(op.op, result))] += 1

    def count_lock(self, op: str, result: Mapping[str, Any]) -> None:
        self._lock_ops[(op, verdict(op if op != "get" else "get_lock", result))] += 1

    # -- the gate and the KV pool -------------------------------------------------------------

    @asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        self._waiting += 1
        try:
            with trio.move_on_after(self._gate_timeout) as waited:
                await self._gate.acquire()
        finally:
            self._waiting -= 1
        if waited.cancelled_caught:
            self._unavailable += 1
            raise Unavailable("kv_unavailable", reason="busy",
                              detail=f"no KV connection free within {self._gate_timeout:g} s")
        try:
            yield
        finally:
            self._gate.release()

    async def call(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`work` on a KV pool connection, behind the gate. Failures that certainly changed
        nothing (the database unreachable, a timeout, a deadlock) answer 503 kv_unavailable;
        bad data 400."""
        self._calls += 1
        async with self._turn():
            try:
                return await self._db.call(work)
            except KvCommitUnknown:
                raise
            except asyncpg.DataError as exc:
                raise KvBadRequest("kv_bad_value", f"the database refused a value: {exc}") from None
            except QueenError as exc:
                if isinstance(exc, Unavailable) or not is_transient(exc):
                    raise
                self._unavailable += 1
                raise Unavailable("kv_unavailable", reason="database",
                                  detail=str(exc)) from exc
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self._unavailable += 1
                raise Unavailable("kv_unavailable", reason="database",
                                  detail=f"{type(exc).__name__}: {exc}") from exc

    # -- KV ----------------------------------------------------------------------------------

    @staticmethod
    async def apply_in(conn: asyncpg.Connection, ops: list[KvOp], *,
                       first_index: int = 0) -> KvOutcome:
        """Apply validated ops inside the caller's open transaction (a transaction rider's
        connection, or `batch`'s). The caller rolls back when `failed` is set."""
        if not ops:
            return KvOutcome([], None)
        ordered = [op.wire for op in apply_order(ops)]
        text = await Q.kv_apply.fetchval(conn, ops=_ENCODE.encode(ordered).decode(),
                                         budget=READ_BYTE_BUDGET)
        return _answer(ops, _DECODE.decode(text), first_index)

    async def batch(self, body: bytes) -> dict[str, Any]:
        """POST /api/v1/kv: every op in one transaction, index-aligned results."""
        decoded = wire.require_object(wire.decode_object(body))
        if "operations" not in decoded:
            raise KvBadRequest("kv_bad_request", "operations array required")
        ops = parse_ops(decoded["operations"])
        if not ops:
            return {"results": []}

        writes = any(op.writes for op in ops)
        if not writes or not any(op.required for op in ops):
            # Nothing can have to be rolled back: one statement, its own implicit transaction,
            # one round trip instead of BEGIN, kv_apply, COMMIT (issue 21's measurements).
            async def alone(conn: asyncpg.Connection) -> KvOutcome:
                try:
                    return await self.apply_in(conn, ops)
                except Exception as exc:
                    if not writes or not is_connection_failure(exc):
                        raise  # refused by the database: its implicit transaction rolled back
                    # The connection failed while the statement ran (asyncpg says so with a
                    # class 08 error too): the commit may have happened.
                    raise KvCommitUnknown("kv_error", reason="commit_unknown",
                                          detail="the connection failed during the call; it "
                                                 f"may have applied: {type(exc).__name__}"
                                          ) from exc

            outcome = await self.call(alone)
            self.count(ops, outcome.results)
            return self._answer_of(outcome)

        async def work(conn: asyncpg.Connection) -> KvOutcome:
            transaction = conn.transaction()
            await transaction.start()
            try:
                outcome = await self.apply_in(conn, ops)
            except BaseException:
                await transaction.rollback()
                raise
            if outcome.failed is not None:
                await transaction.rollback()
                return outcome
            try:
                await transaction.commit()
            except Exception as exc:
                raise KvCommitUnknown("kv_error", reason="commit_unknown",
                                      detail="the commit failed; the call may have applied: "
                                             f"{type(exc).__name__}") from exc
            return outcome

        outcome = await self.call(work)
        self.count(ops, outcome.results)
        return self._answer_of(outcome)

    @staticmethod
    def _answer_of(outcome: KvOutcome) -> dict[str, Any]:
        if outcome.failed is not None:
            return {**precondition_envelope(outcome, 0), "results": outcome.results}
        return {"results": outcome.results}

    # -- reads for people (dashboard, CLI) -----------------------------------------------------

    async def namespaces(self) -> list[dict[str, Any]]:
        rows = await self.call(lambda conn: Q.kv_namespaces.fetch(conn))
        return [{"namespace": r["ns"], "rows": r["rows"], "bytes": r["bytes"],
                 "nextExpiry": None if r["next_expiry"] is None
                 else wire.format_micros(r["next_expiry"]),
                 "lastWrite": wire.format_micros(r["last_write"])} for r in rows]

    async def browse(self, ns: str, prefix: str, after: str | None,
                     limit: int) -> dict[str, Any]:
        """A page of live rows of `ns` whose key starts with `prefix` (any, when empty)."""
        op: dict[str, Any] = {"i": 0, "op": "getPrefix", "ns": ns, "prefix": prefix,
                              "limit": limit, "keysOnly": False, "required": False}
        if after:
            op["after"] = after
        text = await self.call(lambda conn: Q.kv_apply.fetchval(
            conn, ops=_ENCODE.encode([op]).decode(), budget=READ_BYTE_BUDGET))
        result: dict[str, Any] = _DECODE.decode(text)["results"][0]
        result.pop("i", None)
        return result

    async def locks_list(self, limit: int = 1000) -> list[dict[str, Any]]:
        rows = await self.call(lambda conn: Q.lock_list.fetch(conn, lim=limit))
        return [{"name": r["name"], "slot": r["slot"], "owner": r["owner"],
                 "token": r["token"], "since": r["since"], "expiresAt": r["expires_at"],
                 "renewedAt": r["renewed_at"]} for r in rows]

    async def read_figures(self) -> None:
        """Live rows and permits now, for the metrics (the sweeper calls this each pass)."""
        row = await self._db.fetchrow(Q.kv_figures)
        if row is not None:
            self.live_rows, self.permits = int(row["live_rows"]), int(row["permits"])
