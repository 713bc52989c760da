"""The stats sampler: every STATS_INTERVAL_MS this process writes its own figures into
PostgreSQL (queen.worker_samples, queen.queue_samples, queen.worker_figures), and measures how
late the Trio loop runs its timers.

The status and analytics routes draw their time series from these samples, so a fresh broker
shows real curves within a minute; a reply built from them carries `statsAge`, the seconds
since this process's last sample. `POST /api/v1/stats/refresh` samples at once.

`StatsMaintenance` runs on one broker at a time (an advisory lock, like the other maintenance):
once a minute it snapshots every queue's figures (queen.queue_snapshots) and prunes samples
older than METRICS_RETENTION_DAYS.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

import asyncpg
import attrs
import msgspec
import trio

from .. import wire
from ..logs import Throttle
from ..storage.database import Database, is_connection_failure
from ..storage.sql import Q
from .activity import QueueActivity
from .maintenance import PeriodicService, run_exclusive
from .metrics import LoopLag, ProcessFigures, WorkerIdentity, worker_families

log = logging.getLogger("queen_trio.stats")

STATS_LOCK_KEY = 0x51_75_65_65_6E_03
# The Trio loop's lateness is measured with a timer of this period (long enough that an
# idle broker is mostly asleep: tests wait for every task to block).
PROBE_SECONDS = 0.5
_NO_QUEUE = QueueActivity(0, 0, 0, 0, 0, 0, 0, 0)


@attrs.frozen
class SamplerStatistics:
    samples: int
    failures: int
    last_error: str | None
    last_sample_at: dt.datetime | None
    interval_seconds: float


class StatsSampler:
    def __init__(self, db: Database, identity: WorkerIdentity, *, interval: float,
                 source: Callable[[], ProcessFigures] | None = None) -> None:
        self._db = db
        self.identity = identity
        self._interval = interval
        # Set by the composition root: every service's statistics, gathered; and what drops
        # the activity counts of queues that do not exist (Activity.forget_queues).
        self.source = source
        self.forget_queues: Callable[[Collection[str], Mapping[str, QueueActivity]],
                                     list[str]] | None = None
        # The queues whose counts were dropped after the last sample written.
        self._fresh: set[str] = set()
        self._previous: ProcessFigures | None = None
        self._lock = trio.Lock()
        self._samples = self._failures = 0
        # A sample that keeps failing is logged once a minute, with its traceback.
        self._throttle = Throttle()
        self._last_error: str | None = None
        self._last_at: dt.datetime | None = None
        self._lag_sum = self._lag_max = 0.0
        self._lag_count = 0

    def statistics(self) -> SamplerStatistics:
        return SamplerStatistics(samples=self._samples, failures=self._failures,
                                 last_error=self._last_error, last_sample_at=self._last_at,
                                 interval_seconds=self._interval)

    def loop_lag(self) -> LoopLag:
        """Since the last sample."""
        average = self._lag_sum / self._lag_count if self._lag_count else 0.0
        return LoopLag(average, self._lag_max)

    def rates(self, now: ProcessFigures) -> tuple[float, float]:
        """HTTP requests and stored messages per second since the last sample."""
        before = self._previous
        span = max(now.uptime - (before.uptime if before is not None else 0.0), 1e-3)
        requests = now.activity.http_requests - (
            before.activity.http_requests if before is not None else 0)
        messages = now.activity.push_messages - (
            before.activity.push_messages if before is not None else 0)
        return requests / span, messages / span

    @property
    def fresh_seconds(self) -> float:
        """A worker whose latest sample is older than this has stopped sampling."""
        return 3 * self._interval + 5

    def stats_age(self) -> int:
        """Whole seconds since this process's last sample; -1 before the first."""
        if self._last_at is None:
            return -1
        return max(int((wire.utc_now() - self._last_at).total_seconds()), 0)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._probe)
            task_status.started()
            while True:
                try:
                    await self.sample_now()
                except Exception as exc:  # the broker keeps serving; the next turn retries
                    # An unreachable database is said once, by the database (no traceback).
                    held = None if is_connection_failure(exc) else self._throttle.admit()
                    if held is not None:
                        log.warning("stats sample failed", exc_info=True,
                                    extra={"error": str(exc), "failures_held_back": held})
                await trio.sleep(self._interval)

    async def _probe(self) -> None:
        while True:
            started = trio.current_time()
            await trio.sleep(PROBE_SECONDS)
            late = max(trio.current_time() - started - PROBE_SECONDS, 0.0)
            self._lag_sum += late
            self._lag_count += 1
            self._lag_max = max(self._lag_max, late)

    async def sample_now(self) -> dt.datetime:
        """Write one sample of what happened since the last one; its time."""
        assert self.source is not None, "the broker sets the sampler's source"
        async with self._lock:
            figures = self.source()
            try:
                missing = await self._db.in_transaction(lambda conn: self._write(conn, figures))
            except Exception as exc:
                self._failures += 1
                self._last_error = f"{type(exc).__name__}: {exc}"
                raise
            self._fresh = set()
            if missing and self.forget_queues is not None:
                self._fresh = set(self.forget_queues(missing, figures.activity.queues))
            # Only a written sample moves the baseline: a failed one is covered by the next.
            self._previous = figures
            self._samples += 1
            self._last_at = figures.taken_at
            self._lag_sum = self._lag_max = 0.0
            self._lag_count = 0
            return figures.taken_at

    async def _write(self, conn: asyncpg.Connection, now: ProcessFigures) -> list[str]:
        """Write the sample; the counted queues the database does not have."""
        before = self._previous
        ident = self.identity
        span = (now.uptime - before.uptime) if before is not None else now.uptime
        span = max(span, 1e-3)
        a, b = now.activity, before.activity if before is not None else None

        def delta(field: str) -> int:
            return int(getattr(a, field) - (getattr(b, field) if b is not None else 0))

        db_before = before.database if before is not None else None
        # The first sample has no CPU baseline: the process's CPU so far is mostly its start
        # (imports, migrations), which over the broker's few milliseconds of uptime read as
        # thousands of percent on every curve.
        cpu_user = now.cpu_user - before.cpu_user if before is not None else 0.0
        cpu_sys = now.cpu_system - before.cpu_system if before is not None else 0.0
        common = {"worker_id": ident.worker_id, "sampled_at": now.taken_at,
                  "hostname": ident.hostname, "pid": ident.pid,
                  "interval_ms": int(span * 1000)}
        await Q.stats_insert_worker_sample.execute(
            conn, **common, started_at=ident.started_at,
            **{field: delta(field) for field in (
                "http_requests", "http_errors", "push_requests", "push_messages",
                "pop_requests", "pop_empty", "pop_messages", "ack_requests", "ack_messages",
                "nacked", "ack_failed", "dead_lettered", "transactions")},
            db_calls=now.database.calls - (db_before.calls if db_before else 0),
            db_errors=now.database.failures - (db_before.failures if db_before else 0),
            loop_lag_avg_ms=now.loop_lag.average * 1000,
            loop_lag_max_ms=now.loop_lag.maximum * 1000,
            cpu_user_pct=100 * cpu_user / span, cpu_sys_pct=100 * cpu_sys / span,
            rss_bytes=now.rss_bytes, pool_max=now.pool_max, pool_size=now.database.pool_size,
            pool_idle=now.database.pool_idle, pool_active=now.pool_active,
            pool_waiting=now.pool_waiting, spool_pending=now.spool.pending,
            spool_failed=now.spool.failed, long_poll_waiters=now.long_poll_waiters,
            queued_work=now.claims.waiting + now.acks.waiting,
            maintenance=msgspec.json.encode(_maintenance_delta(now, before)).decode())
        missing = [r["name"] for r in await Q.stats_missing_queues.fetch(
            conn, names=list(now.activity.queues))] if now.activity.queues else []
        rows = _queue_rows(now, before, set(missing), self._fresh)
        if rows:
            await Q.stats_insert_queue_samples.execute(
                conn, sampled_at=now.taken_at, worker_id=ident.worker_id,
                hostname=ident.hostname, pid=ident.pid, interval_ms=int(span * 1000),
                queue_names=[r[0] for r in rows],
                **{column: [r[i + 1] for r in rows] for i, column in enumerate(
                    ("pushed", "pop_requests", "pop_empty", "popped", "acked", "nacked",
                     "ack_failed", "dead_lettered", "waiters"))})
        families = [f.to_json() for f in worker_families(now)]
        await Q.stats_upsert_worker_figures.execute(
            conn, worker_id=ident.worker_id, hostname=ident.hostname, pid=ident.pid,
            started_at=ident.started_at, sampled_at=now.taken_at,
            families=msgspec.json.encode(families).decode())
        return missing


def _maintenance_delta(now: ProcessFigures, before: ProcessFigures | None) -> dict[str, int]:
    earlier: dict[str, int] = {}
    if before is not None:
        for p in before.periodic:
            for kind, n in p.totals.items():
                earlier[kind] = earlier.get(kind, 0) + n
    out: dict[str, int] = {}
    for p in now.periodic:
        for kind, n in p.totals.items():
            out[kind] = out.get(kind, 0) + n
    return {kind: n - earlier.get(kind, 0) for kind, n in out.items() if n - earlier.get(kind, 0)}


def _queue_rows(now: ProcessFigures, before: ProcessFigures | None,
                missing: Collection[str] = (), fresh: Collection[str] = ()
                ) -> list[tuple[Any, ...]]:
    """(queue, deltas..., waiters) for every queue with traffic or waiters. A queue the
    database does not have (`missing`) has no traffic of its own: only its parked long polls
    count (a consumer may wait for a queue before its first push creates it). A `fresh`
    queue's counts were dropped after the last sample: they count from zero."""
    earlier: Mapping[str, QueueActivity] = before.activity.queues if before is not None else {}
    rows = []
    for queue in sorted(set(now.activity.queues) | set(now.wakeups.waiting)):
        if queue in missing:
            a = b = _NO_QUEUE
        else:
            a = now.activity.queues.get(queue, _NO_QUEUE)
            b = _NO_QUEUE if queue in fresh else earlier.get(queue, _NO_QUEUE)
        deltas = (a.pushed - b.pushed, a.pop_requests - b.pop_requests,
                  a.pop_empty - b.pop_empty, a.popped - b.popped, a.acked - b.acked,
                  a.nacked - b.nacked, a.ack_failed - b.ack_failed,
                  a.dead_lettered - b.dead_lettered)
        waiters = now.wakeups.waiting.get(queue, 0)
        if any(deltas) or waiters:
            rows.append((queue, *deltas, waiters))
    return rows


async def stats_pass(db: Database, *, retention_days: int, now: dt.datetime | None = None,
                     wait: bool = False) -> dict[str, int] | None:
    """Snapshot every queue's figures and prune old samples; None when another pass holds the
    lock, unless `wait`."""

    async def work(conn: asyncpg.Connection) -> dict[str, int]:
        snapshot = await Q.stats_snapshot_queues.execute(conn)
        pruned = await Q.stats_prune.fetchval(conn, days=retention_days, now=now)
        pruned += await Q.stats_prune_hidden.fetchval(conn)
        return {"snapshots": int(snapshot.split()[-1]), "pruned": int(pruned)}

    return await run_exclusive(db, STATS_LOCK_KEY, work, wait=wait)


# POST /stats/refresh waits this long for a pass already running elsewhere.
REFRESH_WAIT_SECONDS = 5.0
REFRESH_RETRY_SECONDS = 0.05


class StatsMaintenance(PeriodicService):
    """The cluster's per-queue snapshot and sample pruning, every minute, on one broker."""

    name = "stats maintenance"
    routine = frozenset({"snapshots"})  # every minute: logged only when it also pruned

    def __init__(self, db: Database, *, retention_days: int, interval: float = 60.0) -> None:
        super().__init__(interval)
        self._db = db
        self._retention_days = retention_days

    async def pass_once(self) -> Mapping[str, int] | None:
        return await stats_pass(self._db, retention_days=self._retention_days)

    async def snapshot_now(self) -> bool:
        """One pass now (POST /stats/refresh). A pass that another broker, or this one's own
        timer, is running holds the lock: wait for it rather than skip, since it may have
        begun before the writes the caller wants counted. False if the lock stays held for
        REFRESH_WAIT_SECONDS."""
        with trio.move_on_after(REFRESH_WAIT_SECONDS):
            while True:  # the lock may be another process's: no event to wait on, so poll
                if await self.run_pass() is not None:
                    return True
                await trio.sleep(REFRESH_RETRY_SECONDS)
        return False
