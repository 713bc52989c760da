"""Maintenance runs on one broker at a time: each pass takes a transaction-scoped advisory lock
and skips its turn when another broker holds it (River's leader model, without a leader table).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable

import asyncpg
import trio

from . import sql
from .database import Database

log = logging.getLogger("queen_trio.maintenance")

RECLAIM_LOCK_KEY = 0x51_75_65_65_6E_01


async def run_exclusive(
    db: Database, lock_key: int, work: Callable[[asyncpg.Connection], Awaitable[int]]
) -> int | None:
    """Run `work` in a transaction holding `lock_key`; None when another broker has it."""

    async def run(conn: asyncpg.Connection) -> int | None:
        if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", lock_key):
            return None
        return await work(conn)

    return await db.in_transaction(run)


async def reclaim_partitions(
    db: Database, *, idle_days: int, now: dt.datetime | None = None, limit: int = 1000
) -> int | None:
    """Delete empty partitions idle for `idle_days` as of `now`; the number deleted."""

    async def work(conn: asyncpg.Connection) -> int:
        rows = await conn.fetch(sql.query("reclaim_partitions"), now, idle_days, limit)
        return len(rows)

    return await run_exclusive(db, RECLAIM_LOCK_KEY, work)


class PartitionReclaimer:
    """The background service: one reclaim pass every `interval` seconds."""

    def __init__(self, db: Database, *, idle_days: int, interval: float) -> None:
        self._db = db
        self._idle_days = idle_days
        self._interval = interval
        self.passes = 0
        self.reclaimed = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                deleted = await reclaim_partitions(self._db, idle_days=self._idle_days)
            except Exception as exc:  # the next pass retries; the broker keeps serving
                log.warning("partition reclaim failed", extra={"error": str(exc)})
            else:
                self.passes += 1
                if deleted:
                    self.reclaimed += deleted
                    log.info("partitions reclaimed", extra={"count": deleted})
            await trio.sleep(self._interval)
