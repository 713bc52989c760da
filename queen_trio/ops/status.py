"""Status: the dashboard's summary over a time range, per queue, and the push analytics.

Live figures (message counters, leases, dead letters) come from offsets and cursors and are
true at once; traffic, requests, workers and lag curves come from the samples every broker
writes (ops/stats.py), so replies carry `statsAge`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ..queues.options import FIELDS, QueueOptions
from ..storage.database import Database
from ..storage.sql import Q, Row
from . import resources
from .concurrently import concurrently
from .metrics import WorkerIdentity
from .resources import stamp
from .series import fill, parse_interval, parse_range

MB = 1024 * 1024


async def selected_queues(db: Database, query: Mapping[str, str]) -> list[str] | None:
    """The queue names a `queue`/`namespace`/`task` filter selects; None without a filter."""
    queue = query.get("queue") or None
    namespace = query.get("namespace") or query.get("ns") or None
    task = query.get("task") or None
    if queue is None and namespace is None and task is None:
        return None
    rows = await db.fetch(Q.queue_names_matching, queue=queue, namespace=namespace, task=task)
    return [r["name"] for r in rows]


def _ratio(part: Any, whole: Any) -> float:
    return round(float(part) / float(whole), 3) if whole else 0.0


async def status(db: Database, query: Mapping[str, str], *, identity: WorkerIdentity,
                 stats_age: int) -> dict[str, Any]:
    span = parse_range(query)
    queues = await selected_queues(db, query)

    # Six independent reads, each on a pool connection of its own: the reply waits for the
    # slowest, not for their sum (a thousand queues' series take tens of milliseconds each).
    between = {"range_from": span.start, "range_to": span.end}
    series, requests, workers, queue_rows, live, errors = await concurrently(
        lambda: db.fetch(Q.status_throughput, **span.params(), queues=queues),
        lambda: db.fetchrow(Q.status_requests, **between),
        lambda: db.fetch(Q.status_workers, **between),
        lambda: db.fetch(Q.status_queues, queues=queues, **between),
        lambda: db.fetchrow(Q.status_live, queues=queues),
        lambda: db.fetch(Q.status_top_errors, queues=queues, **between),
    )
    per_second = span.bucket_seconds

    def point(r: Row | None) -> dict[str, Any]:
        def num(key: str) -> float:
            return float(r[key]) if r is not None and r[key] is not None else 0.0

        return {
            "ingested": int(num("ingested")), "processed": int(num("processed")),
            "popMessages": int(num("popped")),
            "ingestedPerSecond": round(num("ingested") / per_second, 3),
            "processedPerSecond": round(num("processed") / per_second, 3),
            "popPerSecond": round(num("popped") / per_second, 3),
            "avgLagMs": round(num("avg_lag_ms"), 3), "maxLagMs": round(num("max_lag_ms"), 3),
            "avgEventLoopLagMs": round(num("loop_lag_avg"), 3),
            "maxEventLoopLagMs": round(num("loop_lag_max"), 3),
            "minFreeSlots": int(num("min_free_slots")), "dbErrors": int(num("db_errors")),
            "ackFailed": int(num("ack_failed")), "dlqCount": int(num("dead_lettered")),
            "queenCpuUserPct": round(num("cpu_user"), 3),
            "queenCpuSysPct": round(num("cpu_sys"), 3),
            "queenRssMb": round(num("rss_bytes") / MB, 3),
            "dbPoolActive": round(num("pool_active"), 3),
            "dbPoolIdle": round(num("pool_idle"), 3), "dbPoolSize": round(num("pool_size"), 3),
        }

    throughput = fill(span, series, point)
    rq = requests
    return {
        "timeRange": span.to_wire(), "bucketMinutes": span.bucket_minutes,
        "pointCount": len(throughput), "throughput": throughput,
        "queues": [{"id": str(r["id"]), "name": r["name"], "namespace": r["namespace"] or None,
                    "task": r["task"] or None, "partitions": r["partitions"],
                    "totalConsumed": int(r["consumed"])} for r in queue_rows],
        "messages": {
            **resources.counters(live),
            "requests": {"push": int(rq["push_requests"]), "pop": int(rq["pop_requests"]),
                         "ack": int(rq["ack_requests"])},
            "batchEfficiency": {
                "push": _ratio(rq["push_messages"], rq["push_requests"]),
                "pop": _ratio(rq["pop_messages"], rq["pop_requests"] - rq["pop_empty"]),
                "ack": _ratio(rq["ack_messages"] + rq["nacked"] + rq["ack_failed"],
                              rq["ack_requests"])},
        },
        "leases": {"active": live["leases_active"],
                   "partitionsWithLeases": live["partitions_with_leases"],
                   "totalBatchSize": int(live["in_flight"]),
                   # Acks inside a live lease move the cursor; they are not kept per lease.
                   "totalAcked": None},
        "deadLetterQueue": {"totalMessages": int(live["dlq_total"]),
                            "affectedPartitions": live["dlq_partitions"],
                            "topErrors": [{"error": r["error"], "count": r["n"]}
                                          for r in errors]},
        "workers": [{"hostname": r["hostname"], "workerId": r["worker_id"], "pid": r["pid"],
                     "avgEventLoopLagMs": round(float(r["loop_lag_avg"]), 3),
                     "maxEventLoopLagMs": round(float(r["loop_lag_max"]), 3),
                     "freeSlots": r["free_slots"], "dbConnections": r["pool_size"],
                     "jobQueueSize": r["queued_work"],
                     "messagesProcessed": int(r["processed"]),
                     "lastSampleAt": stamp(r["sampled_at"])} for r in workers],
        "errors": {"dbErrors": int(rq["db_errors"]), "ackFailed": int(rq["ack_failed"]),
                   "dlqMessages": int(rq["dead_lettered"])},
        "answeredBy": identity.worker_id,
        "statsAge": stats_age,
    }


async def queue_status(db: Database, name: str) -> dict[str, Any]:
    """GET /api/v1/status/queues/:queue: the queue's options and every partition's figures."""
    queue = await resources.queue_row(db, name)
    entries, totals = resources.partition_entries(
        await db.fetch(Q.resources_queue_partitions, queue_id=queue["id"]))
    options = QueueOptions(**{f: queue[f] for f in FIELDS}).to_wire()
    partitions = [{**{k: v for k, v in e.items() if k != "consumed"}, "messages": e["stats"],
                   "cursor": {"totalConsumed": e["consumed"], "batchesConsumed": None}}
                  for e in entries]
    return {
        "queue": {"id": str(queue["id"]), "name": queue["name"],
                  "namespace": queue["namespace"] or None, "task": queue["task"] or None,
                  "priority": queue["priority"], "createdAt": stamp(queue["created_at"]),
                  "config": {"leaseTime": queue["lease_time"],
                             "retryLimit": queue["retry_limit"],
                             "retryDelay": queue["retry_delay"], "ttl": queue["ttl"],
                             "maxQueueSize": queue["max_size"],
                             "deadLetterQueue": queue["dead_letter_queue"], **options}},
        "partitions": partitions,
        "totals": {"messages": dict(totals), **totals},
    }


async def analytics(db: Database, query: Mapping[str, str]) -> dict[str, Any]:
    """GET /api/v1/status/analytics: messages pushed (and acknowledged) per interval."""
    interval, minutes = parse_interval(query)
    span = parse_range(query, default_span=dt.timedelta(hours=24), interval=minutes)
    queues = await selected_queues(db, query)
    rows = await db.fetch(Q.status_analytics, **span.params(), queues=queues)

    def point(r: Row | None) -> dict[str, Any]:
        return {"messages": int(r["pushed"]) if r else 0,
                "acknowledged": int(r["acked"]) if r else 0}

    return {"dataPoints": fill(span, rows, point), "interval": interval, **span.to_wire()}
