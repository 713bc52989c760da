"""The `Streams` service: register queries, commit cycles, read state (docs/streams.md).

A cycle is one PostgreSQL transaction, in this order: the (query, source partition) shard's
advisory lock; the replay ledger (a cycle already committed is answered with its first
reply); a plain read of the lease, which fails fast; the state operations in array order;
the sink pushes through the push SQL (`commit_bundle`, as /api/v1/transaction); the cursor
row under its lock, where the lease is checked again and the cursor moved; the ledger row.
Deadlocks and serialization failures are retried here, never answered as success:false.
Long polls on the sink partitions are woken after the commit.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
import attrs
import msgspec

from .. import ids, wire
from ..consume.wakeups import WakeRegistry
from ..errors import Conflict
from ..push.bundle import Segment, commit_in_transaction
from ..push.outcome import Outcome
from ..push.publisher import Publisher
from ..queues.queues import Queues, StaleQueues, retry_while_stale
from ..storage.database import Database
from ..storage.sql import Q
from .parse import Cycle, Registration, StateQuery

log = logging.getLogger("queen_trio.streams")

T = TypeVar("T")

# Deadlocks and serialization failures: tried again, this many times in all.
MAX_ATTEMPTS = 6
_RETRIED = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)

# The outcomes a cycle is counted under (/metrics).
OUTCOMES = ("committed", "failed", "replayed", "refused")


class _Abort(Exception):
    """Roll the cycle back and answer success:false with this text."""


@attrs.frozen
class _Done:
    reply: dict[str, Any]
    replayed: bool = False
    released: str | None = None


@attrs.frozen
class StreamsStatistics:
    cycles: dict[str, int]
    retries: int
    registrations: int


def _failure(cycle: Cycle, queue_name: str | None, error: str) -> dict[str, Any]:
    # A failed cycle applied nothing: nothing is reported applied.
    return {"success": False, "query_id": str(cycle.query_id),
            "partition_id": str(cycle.partition_id), "queueName": queue_name,
            "state_ops_applied": 0, "push_results": [], "ack_result": None, "error": error}


def _push_results(cycle: Cycle, segments: list[Segment]) -> list[dict[str, Any]]:
    partition_of = {id(item): seg.partition_id
                    for seg in segments for packed in seg.groups for item in packed.group.items}
    results: list[dict[str, Any]] = []
    for index, item in enumerate(cycle.push_items):
        outcome, message_id = item.answer()
        entry: dict[str, Any] = {"index": index, "transaction_id": item.transaction_id,
                                 "status": outcome.wire, "message_id": message_id}
        if outcome is Outcome.QUEUED:
            entry["partition_id"] = partition_of.get(id(item))
            entry["trace_id"] = str(uuid.UUID(bytes=item.trace_id)) if item.trace_id else None
        entry["queueName"] = item.queue
        results.append(entry)
    return results


def _foreign_key_text(exc: asyncpg.exceptions.ForeignKeyViolationError, cycle: Cycle) -> str:
    constraint = getattr(exc, "constraint_name", "") or ""
    if "query" in constraint:
        return f"Unknown query_id: {cycle.query_id} (register the query first)"
    return f"Unknown partition_id: {cycle.partition_id} (no such partition)"


class Streams:
    def __init__(self, db: Database, publisher: Publisher, queues: Queues,
                 wakeups: WakeRegistry) -> None:
        self._db = db
        self._publisher = publisher
        self._queues = queues
        self._wakeups = wakeups
        self._cycles: Counter[str] = Counter()
        self._retries = 0
        self._registrations = 0

    def statistics(self) -> StreamsStatistics:
        return StreamsStatistics(cycles={k: self._cycles[k] for k in OUTCOMES},
                                 retries=self._retries, registrations=self._registrations)

    async def _retrying(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return await self._db.call(work)
            except _RETRIED as exc:
                if attempt == MAX_ATTEMPTS:
                    raise
                self._retries += 1
                log.debug("streams transaction retried", extra={"cause": type(exc).__name__})
        raise AssertionError("unreachable")

    # -- POST /streams/v1/queries ----------------------------------------------------------

    async def register(self, reg: Registration) -> dict[str, Any]:
        row = await self._retrying(lambda conn: Q.stream_register.fetchrow(
            conn, id=str(ids.new_id()), name=reg.name, source_queue=reg.source_queue,
            sink_queue=reg.sink_queue, config_hash=reg.config_hash, reset=reg.reset))
        assert row is not None  # queen.stream_register answers one row
        self._registrations += 1
        reply = {"success": True, "query_id": str(row["query_id"]), "name": reg.name,
                 "config_hash": row["config_hash"], "fresh": row["fresh"],
                 "reset": row["did_reset"]}
        if row["conflict"]:
            raise Conflict(
                f"config_hash mismatch: operator chain changed for queryId '{reg.name}'. "
                "Pass reset:true to wipe existing state, or use a new queryId.",
                **{**reply, "success": False, "fresh": False, "reset": False})
        return reply

    # -- POST /streams/v1/cycle -----------------------------------------------------------

    async def cycle(self, cycle: Cycle, producer_sub: str | None) -> dict[str, Any]:
        if cycle.refusal is not None:
            self._cycles["refused"] += 1
            return _failure(cycle, None, cycle.refusal)
        done: _Done | None = None
        segments: list[Segment] = []

        async def attempt() -> set[str]:
            nonlocal done, segments
            segments = self._publisher.segments(cycle.push_items, producer_sub)
            done = await self._retrying(lambda conn: self._in_transaction(conn, cycle, segments))
            return set()

        try:
            fresh = await retry_while_stale(self._queues, attempt)
        except _Abort as exc:
            self._cycles["failed"] += 1
            return _failure(cycle, exc.args[1] if len(exc.args) > 1 else None, str(exc.args[0]))
        if not fresh or done is None:
            self._cycles["failed"] += 1
            return _failure(cycle, None, "queue configuration kept changing")
        if done.replayed:
            self._cycles["replayed"] += 1
            return done.reply
        self._cycles["committed"] += 1
        # After the commit: long polls on the sink partitions (and on a released source).
        for queue in {item.queue for item in cycle.push_items
                      if item.answer()[0] is Outcome.QUEUED}:
            self._wakeups.notify(queue)
        if done.released:
            self._wakeups.notify(done.released)
        return done.reply

    async def _in_transaction(self, conn: asyncpg.Connection, cycle: Cycle,
                              segments: list[Segment]) -> _Done:
        qid, pid = str(cycle.query_id), str(cycle.partition_id)
        async with conn.transaction():
            begun = await Q.stream_cycle_begin.fetchrow(conn, query_id=qid, partition_id=pid)
            assert begun is not None  # an aggregate over the query and partition: one row
            queue_name: str | None = begun["queue_name"]
            key = cycle.key()
            if key is not None:
                first = await Q.stream_cycle_replayed.fetchval(
                    conn, query_id=qid, partition_id=pid, cycle_key=key)
                if first is not None and (cycle.ack is not None or not
                                          await Q.stream_keys_present.fetchval(
                                              conn, query_id=qid, partition_id=pid,
                                              keys=cycle.deleted_keys())):
                    return _Done(json.loads(first), replayed=True)
            ack = cycle.ack
            if ack is not None and ack.lease_id is not None and not (
                    await Q.stream_lease_live.fetchval(
                        conn, partition_id=pid, consumer_group=cycle.consumer_group,
                        lease_id=str(ack.lease_id))):
                raise _Abort("Invalid or expired lease", queue_name)
            applied = 0
            if cycle.state_ops:
                try:
                    applied = await Q.stream_apply_state.fetchval(
                        conn, query_id=qid, partition_id=pid,
                        types=[op.type for op in cycle.state_ops],
                        keys=[op.key for op in cycle.state_ops],
                        vals=[op.value for op in cycle.state_ops])
                except asyncpg.exceptions.ForeignKeyViolationError as exc:
                    raise _Abort(_foreign_key_text(exc, cycle), queue_name) from None
            stale, full = await commit_in_transaction(conn, segments)
            if stale:
                raise StaleQueues(stale)
            if full:
                raise _Abort(f"queue full: {full} (maxSize)", queue_name)
            ack_result: dict[str, Any] | None = None
            released: str | None = None
            if ack is not None:
                row = await Q.stream_ack.fetchrow(
                    conn, partition_id=pid, consumer_group=cycle.consumer_group,
                    transaction_id=ack.transaction_id,
                    lease_id=str(ack.lease_id) if ack.lease_id else None,
                    status=ack.status, release=cycle.release_lease, error=ack.error)
                assert row is not None  # queen.stream_ack answers one row
                if not row["ok"]:
                    raise _Abort(row["error"], queue_name)
                dlq = ack.status in ("failed", "dlq")
                ack_result = {"success": True, "count": 0 if dlq else 1,
                              "lease_released": bool(row["released"]), "dlq": dlq}
                released = row["queue_name"] if row["released"] else None
            reply = {"success": True, "query_id": qid, "partition_id": pid,
                     "queueName": queue_name, "state_ops_applied": applied,
                     "push_results": _push_results(cycle, segments), "ack_result": ack_result}
            await Q.stream_cycle_record.execute(
                conn, query_id=qid, partition_id=pid, cycle_key=key,
                reply=json.dumps(reply),
                queue_name=queue_name if ack is not None else None,
                consumer_group=cycle.consumer_group if ack is not None else None)
            return _Done(reply, released=released)

    # -- POST /streams/v1/state/get ----------------------------------------------------------

    async def state(self, query: StateQuery) -> list[dict[str, Any]]:
        rows = await self._db.call(lambda conn: Q.stream_state_get.fetch(
            conn, query_id=str(query.query_id), partition_id=str(query.partition_id),
            keys=query.keys, prefix=query.prefix, ripe=query.ripe))
        return [{"key": r["key"], "value": msgspec.Raw(r["value"].encode()),
                 "updated_at": wire.format_micros(r["updated_at"])} for r in rows]

    # -- operations: the CLI, the dashboard, /metrics ----------------------------------------

    async def queries(self, name: str | None = None) -> list[dict[str, Any]]:
        async def read(conn: asyncpg.Connection) -> list[dict[str, Any]]:
            out = []
            for r in await Q.stream_queries_list.fetch(conn, name=name):
                lag = await Q.stream_query_lag.fetchval(conn, query_id=r["id"])
                out.append({
                    "queryId": str(r["id"]), "name": r["name"],
                    "sourceQueue": r["source_queue"], "sinkQueue": r["sink_queue"],
                    "configHash": r["config_hash"],
                    "createdAt": wire.format_millis(r["created_at"]),
                    "updatedAt": wire.format_millis(r["updated_at"]),
                    "stateRows": r["state_rows"], "stateBytes": int(r["state_bytes"]),
                    "shards": r["shards"], "consumerGroups": list(r["groups"] or []),
                    "lag": int(lag or 0),
                    "lastCycleAt": (wire.format_millis(r["last_cycle_at"])
                                    if r["last_cycle_at"] else None)})
            return out
        return await self._db.call(read)

    async def shards(self, query_id: str, partition: str | None) -> list[dict[str, Any]]:
        rows = await self._db.call(lambda conn: Q.stream_query_shards.fetch(
            conn, query_id=query_id, partition=partition))
        return [{"partitionId": str(r["partition_id"]), "partition": r["partition_name"],
                 "queue": r["queue_name"], "stateRows": r["state_rows"],
                 "stateBytes": int(r["state_bytes"]),
                 "updatedAt": wire.format_millis(r["updated_at"]),
                 "watermarkMs": (int(r["watermark_ms"]) if r["watermark_ms"] is not None
                                 else None),
                 "lastCycleAt": (wire.format_millis(r["last_cycle_at"])
                                 if r["last_cycle_at"] else None),
                 "lag": int(r["lag"]) if r["lag"] is not None else None} for r in rows]

    async def delete(self, name: str) -> bool:
        deleted = await self._db.call(
            lambda conn: Q.stream_query_delete.fetchval(conn, name=name))
        return deleted is not None

    async def figures(self) -> dict[str, int]:
        row = await self._db.call(lambda conn: Q.stream_figures.fetchrow(conn))
        assert row is not None  # counts: one row
        return {"queries": int(row["queries"]), "stateRows": int(row["state_rows"]),
                "stateBytes": int(row["state_bytes"])}
