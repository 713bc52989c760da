"""Queues: configure, delete, and the cache of what the push path assumes about each queue."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import asyncpg
import attrs
import msgspec

from .. import wire
from ..errors import BadRequest
from ..storage.database import Database
from ..storage.sql import Q
from . import options as opts

log = logging.getLogger("queen_trio.queues")

# In a configure reply, when the queue asks for encryption the broker cannot give.
PLAINTEXT_WARNING = "encryption key unusable: payloads are stored in plaintext"


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
    queue = wire.name(queue, "queue")
    names: dict[str, str | None] = {}
    for key in ("namespace", "task"):
        value = body.get(key)
        names[key] = None if value is None else wire.name(value, key)
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


class Queues:
    """Configure and delete queues, and keep a per-process cache of their QueueFacts.

    An unknown queue is assumed to be implicit. The database checks every assumption under the
    partition lock (push_bundle answers 'stale'), so a cache that another broker made stale
    costs a retry, never a wrong write.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._facts: dict[str, QueueFacts] = {}

    # -- the facts cache -----------------------------------------------------------------------

    def assumed(self, queue: str) -> QueueFacts:
        return self._facts.get(queue, IMPLICIT_FACTS)

    def known(self, queue: str) -> QueueFacts | None:
        """What was read from the database (None: never looked it up or configured it here)."""
        return self._facts.get(queue)

    async def refresh(self, queue: str) -> QueueFacts:
        row = await self._db.fetchrow(Q.queue_facts, queue=queue)
        facts = IMPLICIT_FACTS if row is None else QueueFacts(
            row["encryption_enabled"], row["dedup_window_seconds"])
        self._facts[queue] = facts
        return facts

    def forget_all(self) -> None:
        self._facts.clear()

    # -- configure and delete ------------------------------------------------------------------

    async def configure(self, request: ConfigureRequest, *,
                        encryption_usable: bool) -> dict[str, Any]:
        """POST /api/v1/configure: merge or replace, and remember the queue's new facts.
        `encryption_usable`: whether the broker has a key (without one, a queue that asks for
        encryption is told its payloads are stored in plaintext)."""
        reply = await self._db.in_transaction(lambda conn: _configure(conn, request))
        options = reply["options"]
        self._facts[request.queue] = QueueFacts(options["encryptionEnabled"],
                                                options["dedupWindowSeconds"])
        if options["encryptionEnabled"] and not encryption_usable:
            reply["warnings"] = [PLAINTEXT_WARNING]
        return reply

    async def delete(self, name: str) -> dict[str, Any]:
        """Remove the queue and everything of it: partitions, messages, groups, dead letters."""
        reply = await self._db.in_transaction(lambda conn: _delete(conn, name))
        self._facts.pop(name, None)
        return reply


async def _configure(conn: asyncpg.Connection, request: ConfigureRequest) -> dict[str, Any]:
    queue_id = None
    while queue_id is None:
        queue_id = await Q.configure_lock.fetchval(conn, queue=request.queue)
    row = await Q.configure_read.fetchrow(conn, queue_id=queue_id)
    assert row is not None  # configure_lock made it, in this transaction
    current = msgspec.json.decode(row["explicit_options"])
    explicit = opts.merge(current, request.options, replace=request.replace)
    effective = opts.effective(explicit)
    namespace = row["namespace"] if request.namespace is None else request.namespace
    task = row["task"] if request.task is None else request.task
    await Q.configure_write.execute(
        conn, queue_id=queue_id, namespace=namespace, task=task,
        explicit_options=msgspec.json.encode(explicit).decode(), **effective.to_columns())
    partition_id = None
    while partition_id is None:
        partition_id = await Q.default_partition.fetchval(conn, queue_id=queue_id)
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


async def _delete(conn: asyncpg.Connection, name: str) -> dict[str, Any]:
    partitions = [r["id"] for r in await Q.delete_queue_lock_partitions.fetch(conn, queue=name)]
    await Q.delete_queue_lock_states.execute(conn, partition_ids=partitions)
    deleted = await Q.delete_queue_row.execute(conn, queue=name)
    return {"deleted": True, "queue": name, "existed": deleted != "DELETE 0"}


# How often an operation is repeated because another broker changed a queue meanwhile.
MAX_STALE_RETRIES = 3


class StaleQueues(Exception):
    """Raised inside an attempt (rolling its transaction back): these queues' cached facts
    were stale."""

    def __init__(self, queues: Iterable[str]) -> None:
        self.queues = set(queues)
        super().__init__(sorted(self.queues))


async def retry_while_stale(queues: Queues,
                            attempt: Callable[[], Awaitable[set[str]]]) -> bool:
    """Run `attempt` until it reports no queue whose cached facts were stale (by returning
    them, or by raising StaleQueues), refreshing those queues in between, at most
    MAX_STALE_RETRIES more times. False when the last attempt was still stale."""
    for tries in range(MAX_STALE_RETRIES + 1):
        try:
            stale = await attempt()
        except StaleQueues as exc:
            stale = exc.queues
        if not stale:
            return True
        if tries == MAX_STALE_RETRIES:
            return False
        for queue in stale:
            await queues.refresh(queue)
    return False
