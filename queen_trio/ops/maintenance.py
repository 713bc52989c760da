"""Maintenance runs on one broker at a time: each pass takes a transaction-scoped advisory lock
and skips its turn when another broker holds it (River's leader model, without a leader table).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import asyncpg
import attrs
import trio

from ..logs import Throttle
from ..storage.database import Database, is_connection_failure
from ..storage.sql import Q

log = logging.getLogger("queen_trio.maintenance")

T = TypeVar("T")

RECLAIM_LOCK_KEY = 0x51_75_65_65_6E_01
RETENTION_LOCK_KEY = 0x51_75_65_65_6E_02


async def run_exclusive(
    db: Database, lock_key: int, work: Callable[[asyncpg.Connection], Awaitable[T]], *,
    wait: bool = False,
) -> T | None:
    """Run `work` in a transaction holding `lock_key`; None when another broker has it.
    `wait`: wait for the pass that holds it (another broker's, or this broker's own timer,
    whose first pass runs at start), then run: for a caller that must have its own pass."""

    async def run(conn: asyncpg.Connection) -> T | None:
        if wait:
            await Q.maintenance_lock.execute(conn, lock_key=lock_key)
        elif not await Q.try_maintenance_lock.fetchval(conn, lock_key=lock_key):
            return None
        return await work(conn)

    return await db.in_transaction(run)


async def reclaim_partitions(
    db: Database, *, idle_days: int, now: dt.datetime | None = None, limit: int = 1000,
    wait: bool = False,
) -> int | None:
    """Delete empty partitions idle for `idle_days` as of `now`; the number deleted (None:
    another pass had the lock, unless `wait`)."""

    async def work(conn: asyncpg.Connection) -> int:
        rows = await Q.reclaim_partitions.fetch(conn, now=now, idle_days=idle_days, limit=limit)
        return len(rows)

    return await run_exclusive(db, RECLAIM_LOCK_KEY, work, wait=wait)


@attrs.frozen
class PeriodicStatistics:
    name: str
    passes: int              # passes this broker ran
    skipped: int             # turns another broker held the lock
    failures: int
    last_error: str | None
    totals: Mapping[str, int]  # what the passes changed, by kind


class PeriodicService:
    """A pass every `interval` seconds; a failed pass is logged and the next one retries.

    `pass_once` returns what it changed by kind, or None when another broker had the turn.
    """

    name = "maintenance"
    # Kinds of work a pass does every time (the stats' snapshots): counted, never logged, so
    # an idle broker stays quiet.
    routine: frozenset[str] = frozenset()

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._passes = self._skipped = self._failures = 0
        self._last_error: str | None = None
        self._totals: Counter[str] = Counter()
        # A pass that keeps failing is logged once a minute, with its traceback.
        self._throttle = Throttle()

    def statistics(self) -> PeriodicStatistics:
        return PeriodicStatistics(name=self.name, passes=self._passes, skipped=self._skipped,
                                  failures=self._failures, last_error=self._last_error,
                                  totals=dict(self._totals))

    async def pass_once(self) -> Mapping[str, int] | None:
        raise NotImplementedError

    async def run_pass(self) -> Mapping[str, int] | None:
        """One pass now, counted in statistics(); a failure is counted and raised."""
        try:
            done = await self.pass_once()
        except Exception as exc:
            self._failures += 1
            self._last_error = f"{type(exc).__name__}: {exc}"
            raise
        if done is None:
            self._skipped += 1
        else:
            self._passes += 1
            self._totals.update(done)
            if any(n for kind, n in done.items() if kind not in self.routine):
                log.info(self.name, extra=dict(done))
        return done

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                await self.run_pass()
            except Exception as exc:  # the broker keeps serving
                # An unreachable database is said once, by the database (no traceback).
                held = None if is_connection_failure(exc) else self._throttle.admit()
                if held is not None:
                    log.warning(f"{self.name} failed", exc_info=True,
                                extra={"error": str(exc), "failures_held_back": held})
            await trio.sleep(self._interval)


class PartitionReclaimer(PeriodicService):
    """Partition reclaim, every `interval` seconds."""

    name = "partition reclaim"

    def __init__(self, db: Database, *, idle_days: int, interval: float) -> None:
        super().__init__(interval)
        self._db = db
        self._idle_days = idle_days

    async def pass_once(self) -> Mapping[str, int] | None:
        deleted = await reclaim_partitions(self._db, idle_days=self._idle_days)
        return None if deleted is None else {"reclaimed": deleted}


async def retention_pass(db: Database, *, now: dt.datetime | None = None,
                         limit: int = 1000, wait: bool = False) -> dict[str, int] | None:
    """One retention, eviction and pruning pass as of `now`; None when another pass holds the
    lock (a broker's, this one's own timer's), unless `wait`."""

    async def work(conn: asyncpg.Connection) -> dict[str, int]:
        row = await Q.retention_pass.fetchrow(conn, now=now, limit=limit)
        assert row is not None  # a function's one row
        return dict(row)

    return await run_exclusive(db, RETENTION_LOCK_KEY, work, wait=wait)


class RetentionService(PeriodicService):
    """retentionSeconds, completedRetentionSeconds, maxWaitTimeSeconds and dedup-index pruning,
    every `interval` seconds, on one broker at a time."""

    name = "retention pass"

    def __init__(self, db: Database, *, interval: float, batch: int) -> None:
        super().__init__(interval)
        self._db = db
        self._batch = batch

    async def pass_once(self) -> Mapping[str, int] | None:
        return await retention_pass(self._db, limit=self._batch)
