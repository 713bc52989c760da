"""GET /api/v1/analytics/*: the dashboard's time series, from the samples (ops/stats.py).

system-metrics and worker-metrics: per worker; queue-lag: the cluster's per-queue snapshots;
queue-ops: per-queue traffic; queue-parked-replicas: long polls parked per queue and per broker
process; retention: what maintenance changed; postgres-stats: the database, live.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import asyncpg

from ..storage.database import Database
from ..storage.sql import Q, Row
from .metrics import ProcessFigures
from .resources import stamp
from .series import TimeRange, fill, grouped, parse_range
from .status import MB, selected_queues

Point = Callable[[Row | None], dict[str, Any]]


def _num(row: Row | None, key: str, digits: int | None = 3) -> float:
    value = 0.0 if row is None or row[key] is None else float(row[key])
    return int(value) if digits is None else round(value, digits)


def _series(span: TimeRange, rows: list[Any], key: str, point: Point,
            header: Callable[[Row], dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**header(group[0]), "points": fill(span, group, point)}
            for group in grouped(rows, key).values()]


# The worker series' figures, one list for the query's columns and the points' keys: (key in
# a point, column of queen.worker_samples, how a time bucket folds its samples, decimals: None
# for a whole number). system-metrics gives the gauges; worker-metrics the counts, each
# sample's being those of its interval.
WorkerFigure = tuple[str, str, str, int | None]
SYSTEM_FIGURES: tuple[WorkerFigure, ...] = (
    ("cpuUserPct", "cpu_user_pct", "avg", 3), ("cpuSysPct", "cpu_sys_pct", "avg", 3),
    ("rssMb", "rss_bytes", "avg", 3),  # bytes in the samples: the point gives MB
    ("eventLoopLagAvgMs", "loop_lag_avg_ms", "avg", 3),
    ("eventLoopLagMaxMs", "loop_lag_max_ms", "max", 3),
    ("dbPoolMax", "pool_max", "max", None), ("dbPoolSize", "pool_size", "avg", 3),
    ("dbPoolIdle", "pool_idle", "avg", 3), ("dbPoolActive", "pool_active", "avg", 3),
    ("dbPoolWaiting", "pool_waiting", "max", None),
    ("spoolPending", "spool_pending", "avg", 3),
    ("longPollWaiters", "long_poll_waiters", "avg", 3), ("queuedWork", "queued_work", "avg", 3))
WORKER_COUNTS: tuple[WorkerFigure, ...] = tuple((key, column, "sum", None) for key, column in (
    ("httpRequests", "http_requests"), ("httpErrors", "http_errors"),
    ("pushRequests", "push_requests"), ("pushMessages", "push_messages"),
    ("popRequests", "pop_requests"), ("popEmpty", "pop_empty"),
    ("popMessages", "pop_messages"), ("ackRequests", "ack_requests"),
    ("ackMessages", "ack_messages"), ("nacked", "nacked"), ("ackFailed", "ack_failed"),
    ("deadLettered", "dead_lettered"), ("transactions", "transactions"),
    ("dbCalls", "db_calls"), ("dbErrors", "db_errors")))
_WORKERS = Q.analytics_workers.filled(figures=",\n       ".join(
    f"{fold}(w.{column}) AS {column}" for _, column, fold, _ in SYSTEM_FIGURES + WORKER_COUNTS))


def _figures(r: Row | None, figures: tuple[WorkerFigure, ...]) -> dict[str, Any]:
    return {key: _num(r, column, digits) for key, column, _, digits in figures}


async def _worker_rows(db: Database, query: Mapping[str, str]) -> tuple[TimeRange, list[Any]]:
    span = parse_range(query)
    rows = await db.fetch(_WORKERS, **span.params(),
                          hostname=query.get("hostname") or None,
                          worker_id=query.get("workerId") or None)
    return span, rows


def _worker_header(row: Row) -> dict[str, Any]:
    return {"workerId": row["worker_id"], "hostname": row["hostname"], "pid": row["pid"]}


async def system_metrics(db: Database, query: Mapping[str, str]) -> dict[str, Any]:
    span, rows = await _worker_rows(db, query)

    def point(r: Row | None) -> dict[str, Any]:
        figures = _figures(r, SYSTEM_FIGURES)
        figures["rssMb"] = round(figures["rssMb"] / MB, 3)
        return figures

    return {"timeRange": span.to_wire(), "bucketMinutes": span.bucket_minutes,
            "workers": _series(span, rows, "worker_id", point, _worker_header)}


async def worker_metrics(db: Database, query: Mapping[str, str]) -> dict[str, Any]:
    span, rows = await _worker_rows(db, query)
    return {"timeRange": span.to_wire(), "bucketMinutes": span.bucket_minutes,
            "workers": _series(span, rows, "worker_id",
                               lambda r: _figures(r, WORKER_COUNTS), _worker_header)}


async def queue_lag(db: Database, query: Mapping[str, str]) -> dict[str, Any]:
    span = parse_range(query)
    rows = await db.fetch(Q.analytics_queue_lag, **span.params(),
                          queues=await selected_queues(db, query))

    def point(r: Row | None) -> dict[str, Any]:
        return {"pending": _num(r, "unconsumed"), "processing": _num(r, "processing"),
                "maxLagSeconds": _num(r, "max_lag"), "avgLagSeconds": _num(r, "avg_lag"),
                "maxOffsetLag": _num(r, "max_offset_lag", None),
                "deadLetters": _num(r, "dead_letters"), "messages": _num(r, "messages")}

    return {"timeRange": span.to_wire(), "bucketMinutes": span.bucket_minutes,
            "queues": _series(span, rows, "queue_name", point,
                              lambda r: {"queue": r["queue_name"]})}


async def _queue_ops_rows(db: Database, query: Mapping[str, str]) -> tuple[TimeRange, list[Any]]:
    span = parse_range(query)
    rows = await db.fetch(Q.analytics_queue_ops, **span.params(),
                          queues=await selected_queues(db, query))
    return span, rows


async def queue_ops(db: Database, query: Mapping[str, str]) -> dict[str, Any]:
    span, rows = await _queue_ops_rows(db, query)

    def point(r: Row | None) -> dict[str, Any]:
        return {"pushed": _num(r, "pushed", None), "popRequests": _num(r, "pop_requests", None),
                "popEmpty": _num(r, "pop_empty", None), "popped": _num(r, "popped", None),
                "acked": _num(r, "acked", None), "nacked": _num(r, "nacked", None),
                "ackFailed": _num(r, "ack_failed", None),
                "deadLettered": _num(r, "dead_lettered", None)}

    return {"timeRange": span.to_wire(), "bucketMinutes": span.bucket_minutes,
            "queues": _series(span, rows, "queue_name", point,
                              lambda r: {"queue": r["queue_name"]})}


async def parked_replicas(db: Database, query: Mapping[str, str], *, local: ProcessFigures,
                          fresh_seconds: float) -> dict[str, Any]:
    """Long polls parked now per queue and broker process (this one live, the others as of
    their latest sample), and the parked curve per queue."""
    span, rows = await _queue_ops_rows(db, query)
    queues = await selected_queues(db, query)
    others = await db.fetch(Q.analytics_parked_now, fresh_seconds=fresh_seconds)
    me = local.identity
    now: dict[str, list[dict[str, Any]]] = {}
    for r in others:
        if r["worker_id"] != me.worker_id:
            now.setdefault(r["queue_name"], []).append({
                "workerId": r["worker_id"], "hostname": r["hostname"], "pid": r["pid"],
                "parked": r["long_poll_waiters"], "asOf": stamp(r["sampled_at"])})
    for queue, n in local.wakeups.waiting.items():
        now.setdefault(queue, []).append({"workerId": me.worker_id, "hostname": me.hostname,
                                          "pid": me.pid, "parked": n,
                                          "asOf": stamp(local.taken_at)})
    current = [{"queue": queue, "total": sum(r["parked"] for r in replicas),
                "replicas": sorted(replicas, key=lambda r: r["workerId"])}
               for queue, replicas in sorted(now.items())
               if queues is None or queue in queues]

    def point(r: Row | None) -> dict[str, Any]:
        return {"parkedAvg": _num(r, "parked_avg"), "parkedMax": _num(r, "parked_max", None)}

    return {"timeRange": span.to_wire(), "bucketMinutes": span.bucket_minutes,
            "current": current,
            "queues": _series(span, rows, "queue_name", point,
                              lambda r: {"queue": r["queue_name"]})}


async def retention(db: Database, query: Mapping[str, str]) -> dict[str, Any]:
    span = parse_range(query)
    rows = await db.fetch(Q.analytics_retention, **span.params())
    kinds = sorted({r["kind"] for r in rows})
    per_bucket: dict[Any, dict[str, Any]] = {}
    for r in rows:
        per_bucket.setdefault(r["bucket"], {"bucket": r["bucket"]})[r["kind"]] = int(r["n"])

    def point(r: dict[str, Any] | None) -> dict[str, Any]:
        return {kind: (r or {}).get(kind, 0) for kind in kinds}

    points = fill(span, per_bucket.values(), point)
    totals = {kind: sum(int(r["n"]) for r in rows if r["kind"] == kind) for kind in kinds}
    return {"timeRange": span.to_wire(), "bucketMinutes": span.bucket_minutes,
            "kinds": kinds, "totals": totals, "points": points}


async def postgres_stats(db: Database) -> dict[str, Any]:
    async def run(conn: asyncpg.Connection) -> tuple[Any, list[Any]]:
        return (await Q.analytics_postgres.fetchrow(conn),
                await Q.analytics_postgres_tables.fetch(conn))

    d, tables = await db.call(run)
    reads = d["blks_read"] + d["blks_hit"]
    return {
        "database": {"name": d["name"], "version": d["version"],
                     "sizeBytes": d["size_bytes"], "backends": d["numbackends"],
                     "maxConnections": d["max_connections"], "commits": d["xact_commit"],
                     "rollbacks": d["xact_rollback"], "blocksRead": d["blks_read"],
                     "blocksHit": d["blks_hit"],
                     "cacheHitRatio": round(d["blks_hit"] / reads, 4) if reads else None,
                     "deadlocks": d["deadlocks"], "tempBytes": d["temp_bytes"],
                     "conflicts": d["conflicts"], "rowsInserted": d["tup_inserted"],
                     "rowsUpdated": d["tup_updated"], "rowsDeleted": d["tup_deleted"]},
        "activity": {"sessions": d["sessions"], "active": d["active"], "idle": d["idle"],
                     "idleInTransaction": d["idle_in_transaction"],
                     "waitingOnLocks": d["waiting"]},
        "locks": {"granted": d["locks_granted"], "waiting": d["locks_waiting"]},
        "tables": [{"name": t["name"], "rows": t["rows"], "deadRows": t["dead_rows"],
                    "totalBytes": t["total_bytes"], "tableBytes": t["table_bytes"],
                    "indexBytes": t["index_bytes"], "seqScans": t["seq_scan"],
                    "indexScans": t["idx_scan"], "lastAutovacuum": stamp(t["last_autovacuum"]),
                    "lastAutoanalyze": stamp(t["last_autoanalyze"])} for t in tables],
    }
