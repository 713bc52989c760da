"""Queues: what the push path assumes about them, and POST /api/v1/configure."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import attrs
import msgspec

from . import options as opts
from . import sql
from .database import Database
from .push import BadRequest

log = logging.getLogger("queen_trio.queues")


@attrs.frozen
class QueueFacts:
    """The options that shape a frame before it reaches the database."""

    encryption_enabled: bool
    dedup_window_seconds: int

    @property
    def dedup(self) -> bool:
        return self.dedup_window_seconds > 0


_IMPLICIT = opts.QueueOptions.implicit()
IMPLICIT_FACTS = QueueFacts(_IMPLICIT.encryption_enabled, _IMPLICIT.dedup_window_seconds)


class QueueDirectory:
    """A per-process cache of QueueFacts.

    An unknown queue is assumed to be implicit. The database checks every assumption under the
    partition lock (push_bundle answers 'stale'), so a cache that another broker made stale
    costs a retry, never a wrong write.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._facts: dict[str, QueueFacts] = {}

    def assumed(self, queue: str) -> QueueFacts:
        return self._facts.get(queue, IMPLICIT_FACTS)

    def known(self, queue: str) -> QueueFacts | None:
        """What was read from the database (None: never looked it up or configured it here)."""
        return self._facts.get(queue)

    def remember(self, queue: str, facts: QueueFacts) -> None:
        self._facts[queue] = facts

    def forget(self, queue: str) -> None:
        self._facts.pop(queue, None)

    async def refresh(self, queue: str) -> QueueFacts:
        row = await self._db.fetchrow(sql.query("queue_facts"), queue)
        facts = IMPLICIT_FACTS if row is None else QueueFacts(
            row["encryption_enabled"], row["dedup_window_seconds"])
        self._facts[queue] = facts
        return facts


@attrs.frozen
class ConfigureRequest:
    queue: str
    namespace: str | None
    task: str | None
    options: dict[str, Any]
    ignored: list[str]
    replace: bool


def parse_configure(body: Any) -> ConfigureRequest:
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object")
    queue = body.get("queue")
    if queue is None or queue == "":
        raise BadRequest("queue is required")
    if not isinstance(queue, str):
        raise BadRequest("queue must be a string")
    if len(queue) > 255 or "\x00" in queue:
        raise BadRequest("queue must be at most 255 characters, without NUL")
    names: dict[str, str | None] = {}
    for key in ("namespace", "task"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise BadRequest(f"{key} must be a string or null")
        if isinstance(value, str) and "\x00" in value:
            raise BadRequest(f"{key} must not contain NUL characters")
        names[key] = value
    mode = body.get("mode", "merge")
    if mode not in ("merge", "replace", None):
        raise BadRequest('mode must be "merge" or "replace"')
    raw_options = body.get("options")
    if raw_options is None:
        raw_options = {}
    if not isinstance(raw_options, dict):
        raise BadRequest("options must be an object")
    known, ignored = opts.split_known(raw_options)
    # Validate the requested values now, so a bad one is a 400 before anything is written.
    try:
        opts.effective({k: v for k, v in known.items() if v is not None})
    except opts.OptionsError as exc:
        raise BadRequest(str(exc)) from None
    if ignored:
        log.warning("configure ignored unknown options", extra={"queue": queue,
                                                                 "ignored": ignored})
    return ConfigureRequest(queue, names["namespace"], names["task"], known, ignored,
                            mode == "replace")


async def configure(db: Database, request: ConfigureRequest) -> dict[str, Any]:
    async def run(conn: asyncpg.Connection) -> dict[str, Any]:
        queue_id = None
        while queue_id is None:
            queue_id = await conn.fetchval(sql.query("configure_lock"), request.queue)
        row = await conn.fetchrow(sql.query("configure_read"), queue_id)
        current = msgspec.json.decode(row["explicit_options"])
        explicit = opts.merge(current, request.options, replace=request.replace)
        effective = opts.effective(explicit)
        namespace = row["namespace"] if request.namespace is None else request.namespace
        task = row["task"] if request.task is None else request.task
        columns = effective.to_columns()
        await conn.execute(
            sql.query("configure_write"), queue_id, namespace, task,
            msgspec.json.encode(explicit).decode(), *(columns[f] for f in opts.FIELDS),
        )
        partition_id = None
        while partition_id is None:
            partition_id = await conn.fetchval(sql.query("default_partition"), queue_id)
        return {
            "configured": True,
            "queueId": str(queue_id),
            "partitionId": str(partition_id),
            "queue": request.queue,
            "namespace": namespace,
            "task": task,
            "options": effective.to_wire(),
            "ignoredOptions": request.ignored,
        }

    return await db.in_transaction(run)


async def delete_queue(db: Database, name: str) -> dict[str, Any]:
    """Remove the queue and everything of it: partitions, messages, groups, dead letters."""

    async def run(conn: asyncpg.Connection) -> dict[str, Any]:
        partitions = [r["id"] for r in await conn.fetch(sql.query("delete_queue"), name)]
        await conn.execute(
            "SELECT 1 FROM queen.consumer_state WHERE partition_id = ANY($1::uuid[]) "
            "ORDER BY partition_id FOR UPDATE", partitions)
        await conn.execute(
            "DELETE FROM queen.transaction_index WHERE partition_id = ANY($1::uuid[])", partitions)
        deleted = await conn.execute("DELETE FROM queen.queues WHERE name = $1", name)
        return {"deleted": True, "queue": name, "existed": deleted != "DELETE 0"}

    return await db.in_transaction(run)
