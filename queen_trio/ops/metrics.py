"""Metrics: this process's figures as metric families, GET /metrics (JSON) and
GET /metrics/prometheus.

Every figure comes from the frozen `statistics()` records of the services, gathered by the
broker into one `ProcessFigures`. The families of a process carry its `worker_id`; the stats
sampler stores each process's latest families in queen.worker_figures, so whichever worker
answers a scrape renders every live worker's series (its own from memory, the others' from
PostgreSQL) plus the cluster's figures, which PostgreSQL answers for all. No family has a
partition label: with thousands of partitions they would swamp Prometheus.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import resource
import socket
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Any

import asyncpg
import attrs
import msgspec
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from .. import __version__, wire
from ..consume.fusion import FusionStatistics
from ..consume.wakeups import ListenerStatistics, WakeStatistics
from ..ephemeral.service import EphemeralStatistics
from ..kv.store import KvStatistics
from ..push.lane import LaneStatistics
from ..push.spool import SpoolStatistics
from ..storage.database import Database, DatabaseStatistics
from ..storage.encryption import EncryptionStatus
from ..storage.sql import Q
from ..timers.service import TimerStatistics
from ..timers.sweeper import LATENESS_BUCKETS, SweeperStatistics
from .activity import ActivityStatistics, HistogramSnapshot
from .maintenance import PeriodicStatistics

# The binary body forms (push/binary.py), each always exposed so a rate reads from zero.
BINARY_FORMS = ("plain", "zstd", "frames", "transaction")

log = logging.getLogger("queen_trio.metrics")

# The contract's exposition type (text format 0.0.4).
PROMETHEUS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


@attrs.frozen
class WorkerIdentity:
    """Which broker process this is: named in samples, /health, /metrics and status."""

    worker_id: str
    hostname: str
    pid: int
    started_at: dt.datetime

    @classmethod
    def of_this_process(cls, worker_id: str | None = None,
                        index: int | None = None) -> WorkerIdentity:
        """`worker_id` names the broker (QUEEN_WORKER_ID; default hostname:pid); the workers
        of one supervisor share the setting and add their number to it."""
        hostname, pid = socket.gethostname(), os.getpid()
        name = worker_id or f"{hostname}:{pid}"
        if worker_id and index is not None:
            name = f"{worker_id}-{index}"
        return cls(name, hostname, pid, wire.utc_now())

    def to_wire(self) -> dict[str, Any]:
        return {"workerId": self.worker_id, "hostname": self.hostname, "pid": self.pid,
                "startedAt": wire.format_millis(self.started_at)}


@attrs.frozen
class LoopLag:
    """The Trio loop's lateness (seconds) since the last sample, measured by the sampler."""

    average: float
    maximum: float


@attrs.frozen
class ProcessFigures:
    """One reading of everything this process knows about itself."""

    identity: WorkerIdentity
    taken_at: dt.datetime
    uptime: float
    cpu_user: float       # seconds since start
    cpu_system: float
    rss_bytes: int
    loop_lag: LoopLag
    activity: ActivityStatistics
    database: DatabaseStatistics
    pool_max: int
    lane: LaneStatistics
    spool: SpoolStatistics
    claims: FusionStatistics
    acks: FusionStatistics
    wakeups: WakeStatistics
    listener: ListenerStatistics
    periodic: Sequence[PeriodicStatistics]
    stats_samples: int
    stats_failures: int
    encryption: EncryptionStatus = EncryptionStatus(False)
    ephemeral: EphemeralStatistics | None = None
    kv: KvStatistics | None = None
    # Streams cycles by outcome (committed, failed, replayed, refused) and the transactions
    # retried after a deadlock or a serialization failure (queen_trio/streams/service.py).
    streams_cycles: Mapping[str, int] = attrs.Factory(dict)
    streams_retries: int = 0
    timers: TimerStatistics | None = None
    sweeper: SweeperStatistics | None = None

    @property
    def pool_active(self) -> int:
        return self.database.pool_size - self.database.pool_idle

    @property
    def pool_waiting(self) -> int:
        # Calls in flight beyond the connections in use are waiting for one.
        return max(self.database.in_flight - self.pool_active, 0)

    @property
    def long_poll_waiters(self) -> int:
        return sum(self.wakeups.waiting.values())


def rss_bytes() -> int:
    """Resident memory now (Linux /proc), else the peak the kernel reports."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def cpu_seconds() -> tuple[float, float]:
    times = os.times()
    return times.user, times.system


# -- metric families --------------------------------------------------------------------------

Labels = Mapping[str, str]


@attrs.frozen
class Family:
    name: str
    kind: str  # "gauge", "counter" or "histogram"
    help: str
    samples: tuple[tuple[Labels, float | HistogramSnapshot], ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "help": self.help,
                "samples": [[dict(labels), v.to_json() if isinstance(v, HistogramSnapshot)
                             else v] for labels, v in self.samples]}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Family:
        histogram = value["kind"] == "histogram"
        return cls(value["name"], value["kind"], value["help"], tuple(
            (labels, HistogramSnapshot.from_json(v) if histogram else float(v))
            for labels, v in value["samples"]))


class FamilyBook:
    """Families being built: samples accumulate per name, in order of first use."""

    def __init__(self, **common: str) -> None:
        self._common = common
        self._families: dict[str, tuple[str, str, list[tuple[Labels, Any]]]] = {}

    def add(self, name: str, kind: str, help: str, value: float | HistogramSnapshot, /,
            **labels: str) -> None:
        entry = self._families.setdefault(name, (kind, help, []))
        entry[2].append(({**self._common, **labels}, value))

    def gauge(self, name: str, help: str, value: float, /, **labels: str) -> None:
        self.add(name, "gauge", help, float(value), **labels)

    def counter(self, name: str, help: str, value: float, /, **labels: str) -> None:
        self.add(name, "counter", help, float(value), **labels)

    def families(self) -> list[Family]:
        return [Family(name, kind, help, tuple(samples))
                for name, (kind, help, samples) in self._families.items()]


# The families of one sample and no label of their own, as data: (name, kind, help, the
# figure: its attribute path in ProcessFigures). `_scalars` renders a table where its
# families belong in worker_families; tests/unit/test_ops_figures.py checks that every path
# names a number and every counter ends in `_total`.
ScalarFamily = tuple[str, str, str, str]

DATABASE_FAMILIES: tuple[ScalarFamily, ...] = (
    ("queen_db_pool_max", "gauge", "Connections the pool may open (DB_POOL_SIZE).",
     "pool_max"),
    ("queen_db_pool_size", "gauge", "Connections the pool holds open.", "database.pool_size"),
    ("queen_db_pool_idle", "gauge", "Open connections not in use.", "database.pool_idle"),
    ("queen_db_pool_active", "gauge", "Connections in use.", "pool_active"),
    ("queen_db_pool_held", "gauge", "Connections in use that busy push shards and fusion "
     "callers keep between their calls.", "database.held"),
    ("queen_db_pool_waiting", "gauge", "Database calls waiting for a connection.",
     "pool_waiting"),
    ("queen_db_calls_total", "counter", "Database calls, each one trio-asyncio crossing.",
     "database.calls"),
    ("queen_db_call_failures_total", "counter", "Database calls that raised.",
     "database.failures"),
    ("queen_db_call_seconds_total", "counter", "Time spent in database calls, crossing "
     "included.", "database.seconds_in_calls"),
    ("queen_db_calls_in_flight", "gauge", "Database calls running now.", "database.in_flight"),
)

TRAFFIC_FAMILIES: tuple[ScalarFamily, ...] = (
    ("queen_messages_pushed_total", "counter", "Messages stored by pushes and transactions.",
     "activity.push_messages"),
    ("queen_pop_requests_total", "counter", "Pop requests answered.", "activity.pop_requests"),
    ("queen_pop_empty_total", "counter", "Pop requests that delivered nothing.",
     "activity.pop_empty"),
    ("queen_pop_messages_total", "counter", "Messages delivered by pops.",
     "activity.pop_messages"),
    ("queen_conflation_superseded_total", "counter", "Messages a conflating consumer group's "
     "pops moved the cursor past, superseded by a newer one (counted consumed, never "
     "dead-lettered).", "activity.superseded"),
    ("queen_ack_requests_total", "counter", "Ack requests.", "activity.ack_requests"),
    ("queen_ack_messages_total", "counter", "Acks that settled their message (completed or "
     "dead-lettered).", "activity.ack_messages"),
    ("queen_nacks_total", "counter", "Failed and retry acks applied: the delivery comes back.",
     "activity.nacked"),
    ("queen_ack_failed_total", "counter", "Acks refused.", "activity.ack_failed"),
    ("queen_dead_lettered_total", "counter", "Acks that dead-lettered their message.",
     "activity.dead_lettered"),
    ("queen_transactions_total", "counter", "POST /api/v1/transaction requests.",
     "activity.transactions"),
)

LANE_FAMILIES: tuple[ScalarFamily, ...] = (
    ("queen_lane_active_flushers", "gauge", "Partitions with a flush task.",
     "lane.active_flushers"),
    ("queen_lane_segments_total", "counter", "Segments committed by the lane.",
     "lane.segments"),
    ("queen_lane_bundles_total", "counter", "push_bundle calls.", "lane.bundles"),
    ("queen_lane_fused_groups_total", "counter", "Push groups fused into a segment with "
     "others.", "lane.fused_groups"),
    ("queen_lane_bundle_splits_total", "counter", "Bundles that failed and were retried one "
     "by one.", "lane.bundle_splits"),
    ("queen_lane_failed_segments_total", "counter", "Segments that failed.",
     "lane.failed_segments"),
)

SPOOL_FAMILIES: tuple[ScalarFamily, ...] = (
    ("queen_spool_pending", "gauge", "Spooled push records not replayed yet.",
     "spool.pending"),
    ("queen_spool_failed", "gauge", "Spool records moved to failed/.", "spool.failed"),
    ("queen_spool_files", "gauge", "Spool files not replayed yet.", "spool.files"),
    ("queen_spool_replayed_total", "counter", "Spool records that landed through replay.",
     "spool.replayed"),
)

LISTENER_FAMILIES: tuple[ScalarFamily, ...] = (
    ("queen_wakeups_total", "counter", "Long-poll wake-ups delivered.",
     "wakeups.notifications"),
    ("queen_listener_connected", "gauge", "1 while the LISTEN connection is up.",
     "listener.connected"),
    ("queen_listener_notifications_total", "counter", "NOTIFY messages from other brokers.",
     "listener.notifications"),
    ("queen_listener_reconnects_total", "counter", "LISTEN reconnections.",
     "listener.reconnects"),
)

SCALAR_TABLES = (DATABASE_FAMILIES, TRAFFIC_FAMILIES, LANE_FAMILIES, SPOOL_FAMILIES,
                 LISTENER_FAMILIES)


def _scalars(book: FamilyBook, f: ProcessFigures, table: Iterable[ScalarFamily]) -> None:
    for name, kind, help, path in table:
        book.add(name, kind, help, float(attrgetter(path)(f)))


def worker_families(f: ProcessFigures) -> list[Family]:
    """This process's families, each sample labelled with its worker_id."""
    ident = f.identity
    book = FamilyBook(worker_id=ident.worker_id)
    g, c = book.gauge, book.counter
    a = f.activity
    g("queen_worker_info", "The broker process behind a worker_id (always 1).", 1,
      hostname=ident.hostname, pid=str(ident.pid), version=__version__)
    g("queen_uptime_seconds", "Seconds since the broker process started.", f.uptime)
    for mode, seconds in (("user", f.cpu_user), ("system", f.cpu_system)):
        c("queen_process_cpu_seconds_total", "CPU time used by the process.", seconds,
          mode=mode)
    g("queen_process_resident_memory_bytes", "Resident memory of the process.", f.rss_bytes)
    for stat, lag in (("max", f.loop_lag.maximum), ("avg", f.loop_lag.average)):
        g("queen_event_loop_lag_seconds", "How late the Trio loop ran a timer, since the last "
          "sample.", lag, stat=stat)

    _scalars(book, f, DATABASE_FAMILIES)

    for (method, route, status), n in sorted(a.responses.items()):
        c("queen_http_requests_total", "HTTP answers by route and status.", n,
          method=method, route=route, status=str(status))
    for (method, route), hist in sorted(a.latency.items()):
        book.add("queen_http_request_duration_seconds", "histogram",
                 "HTTP request latency by route.", hist, method=method, route=route)
    c("queen_push_requests_total", "POST /api/v1/push requests.", a.push_requests)
    for form in BINARY_FORMS:
        c("queen_push_binary_bodies_total", "Push and transaction bodies in the 2.6 client's "
          "binary forms, by form.", a.binary_bodies.get(form, 0), form=form)
    for outcome in ("queued", "duplicate", "buffered", "failed"):
        c("queen_push_items_total", "Push items by their status.",
          a.push_items.get(outcome, 0), status=outcome)
    _scalars(book, f, TRAFFIC_FAMILIES)

    book.add("queen_lane_segment_messages", "histogram", "Messages per committed segment.",
             a.segment_sizes)
    book.add("queen_lane_bundle_segments", "histogram", "Segments per push_bundle call.",
             a.bundle_sizes)
    _scalars(book, f, LANE_FAMILIES)
    for name, fusion in (("claim", f.claims), ("ack", f.acks)):
        c("queen_fusion_calls_total", "Fused database calls.", fusion.calls, lane=name)
        c("queen_fusion_requests_total", "Requests submitted to a fusion lane.",
          fusion.requests, lane=name)
        c("queen_fusion_splits_total", "Fused calls split after a failure.", fusion.splits,
          lane=name)
        g("queen_fusion_waiting", "Requests waiting for the next fused call.", fusion.waiting,
          lane=name)

    _scalars(book, f, SPOOL_FAMILIES)

    g("queen_long_polls_parked", "Long polls parked right now.", f.long_poll_waiters)
    for queue, n in sorted(f.wakeups.waiting.items()):
        g("queen_long_poll_waiters", "Long polls parked right now, by queue.", n, queue=queue)
    _scalars(book, f, LISTENER_FAMILIES)

    for p in f.periodic:
        c("queen_maintenance_passes_total", "Maintenance passes run here.", p.passes,
          service=p.name)
        c("queen_maintenance_skipped_total", "Turns another broker held the lock.", p.skipped,
          service=p.name)
        c("queen_maintenance_failures_total", "Maintenance passes that failed.", p.failures,
          service=p.name)
        for kind, n in sorted(p.totals.items()):
            c("queen_maintenance_changes_total", "What maintenance changed, by kind.", n,
              service=p.name, kind=kind)
    g("queen_encryption_enabled", "1 when payloads of queues with encryptionEnabled are "
      "encrypted; 0 without a usable QUEEN_ENCRYPTION_KEY.", int(f.encryption.enabled))
    g("queen_encryption_key_malformed", "1 when QUEEN_ENCRYPTION_KEY is set but cannot be used "
      "(encryption is then off: queues with encryptionEnabled store plaintext).",
      int(f.encryption.malformed))
    if f.ephemeral is not None:
        _ephemeral_families(f.ephemeral, g, c)
    if f.kv is not None:
        _kv_families(f.kv, book)
    for outcome, n in sorted(f.streams_cycles.items()):
        c("queen_streams_cycles_total", "Streams cycles answered here, by outcome: committed, "
          "failed (success:false), replayed (answered with the first reply), refused (the "
          "body named an unknown op or status).", n, outcome=outcome)
    c("queen_streams_cycle_retries_total", "Streams cycle transactions retried after a "
      "deadlock or a serialization failure.", f.streams_retries)
    _timer_families(f, book)
    c("queen_stats_samples_total", "Samples this process wrote.", f.stats_samples)
    c("queen_stats_sample_failures_total", "Samples that could not be written.",
      f.stats_failures)
    return book.families()


def _timer_families(f: ProcessFigures, book: FamilyBook) -> None:
    """The timer ops applied here and what this process's sweeper fired."""
    c = book.counter
    if f.timers is not None:
        for verdict in ("scheduled", "rescheduled", "cancelled", "absent", "too_late"):
            c("queen_timer_ops_total", "Timer ops applied here, by their status.",
              getattr(f.timers, verdict), status=verdict)
    if f.sweeper is not None:
        sw = f.sweeper
        c("queen_timers_fired_total", "Timers this process fired (delivered as messages).",
          sw.fired)
        c("queen_timers_fired_duplicate_total", "Fired timers whose txn the queue already held "
          "(push dedup kept the first).", sw.duplicates)
        c("queen_timer_fire_failures_total", "Timer fires that failed and backed off.",
          sw.failures)
        c("queen_timer_claims_total", "Claims of due timers that found some.", sw.claims)
        c("queen_timer_claims_lapsed_total", "Claimed timers a fire no longer held (its lease "
          "lapsed first): pushed by nobody here.", sw.lapsed)
        c("queen_timer_probes_total", "Probes of the next due timer.", sw.probes)
        book.add("queen_timer_lateness_seconds", "histogram", "How late past deliverAt a fired "
                 "timer was taken to be pushed.",
                 HistogramSnapshot(LATENESS_BUCKETS, sw.lateness_counts, sw.lateness_sum,
                                   sum(sw.lateness_counts)))


def _kv_families(kv: KvStatistics, book: FamilyBook) -> None:
    g, c = book.gauge, book.counter
    for (op, verdict), n in sorted(kv.ops.items()):
        c("queen_kv_ops_total", "KV ops by op and verdict (POST /api/v1/kv).", n, op=op,
          verdict=verdict)
    for (op, verdict), n in sorted(kv.lock_ops.items()):
        c("queen_lock_ops_total", "Lock ops by op and verdict (POST /api/v1/locks).", n,
          op=op, verdict=verdict)
    c("queen_kv_calls_total", "KV and lock calls on the KV pool.", kv.calls)
    c("queen_kv_unavailable_total", "KV and lock calls answered 503 kv_unavailable.",
      kv.unavailable)
    g("queen_kv_gate_waiting", "KV calls waiting for a KV pool connection.", kv.gate_waiting)
    if kv.live_rows is not None:
        g("queen_kv_live_rows", "Live KV rows (lock permits included), at the last sweep.",
          kv.live_rows)
    if kv.permits is not None:
        g("queen_locks_held", "Live lock and semaphore permits, at the last sweep.",
          kv.permits)


async def cluster_families(db: Database, *, fresh_seconds: float) -> tuple[list[Family],
                                                                           list[Any]]:
    """The cluster's figures from PostgreSQL, and the other workers' latest families rows."""

    async def run(conn: asyncpg.Connection) -> tuple[Any, ...]:
        return (await Q.metrics_queues.fetch(conn),
                await Q.metrics_queue_rates.fetch(conn),
                await Q.groups_list.fetch(conn),
                await Q.worker_figures_fresh.fetch(conn, fresh_seconds=fresh_seconds),
                await Q.stream_figures.fetchrow(conn),
                await Q.timers_queues.fetch(conn))

    queues, rates, groups, workers, streams, timers = await db.call(run)
    book = FamilyBook()
    g = book.gauge
    totals = {k: sum(int(r[k]) for r in queues)
              for k in ("partitions", "total", "unconsumed", "processing", "dead_letters")}
    g("queen_cluster_queues", "Queues.", len(queues), scope="cluster")
    g("queen_cluster_partitions", "Partitions.", totals["partitions"], scope="cluster")
    g("queen_cluster_messages", "Messages held.", totals["total"], scope="cluster")
    g("queen_cluster_pending_messages", "Messages not consumed by the slowest group.",
      totals["unconsumed"], scope="cluster")
    g("queen_cluster_processing_messages", "Messages under a live lease.",
      totals["processing"], scope="cluster")
    g("queen_dlq_depth", "Dead letters.", totals["dead_letters"], scope="cluster")
    for r in queues:
        queue = r["name"]
        g("queen_queue_partitions", "Partitions of the queue.", r["partitions"], queue=queue)
        g("queen_queue_messages", "Messages the queue holds.", r["total"], queue=queue)
        g("queen_queue_depth", "Messages not consumed by the queue's slowest group.",
          r["unconsumed"], queue=queue)
        g("queen_queue_processing", "Messages of the queue under a live lease.",
          r["processing"], queue=queue)
        g("queen_dlq_depth_by_queue", "Dead letters of the queue.", r["dead_letters"],
          queue=queue)
    for r in rates:
        for column, name in (("pushed", "pushed"), ("popped", "popped"), ("acked", "acked")):
            g(f"queen_queue_{name}_per_minute", f"Messages {name} in the last minute, every "
              "worker.", r[column], queue=r["queue_name"])
    for r in groups:
        labels = {"queue": r["queue_name"], "consumer_group": r["consumer_group"]}
        g("queen_consumer_group_lag_messages", "Messages the group has not consumed.",
          r["total_lag"], **labels)
        g("queen_consumer_group_lag_seconds", "Age of the group's oldest unconsumed message.",
          r["max_time_lag"], **labels)
        g("queen_consumer_group_partitions_lagging", "Partitions where the group has a "
          "backlog.", r["partitions_with_lag"], **labels)
    g("queen_streams_queries", "Streams queries registered.", streams["queries"],
      scope="cluster")
    g("queen_streams_state_rows", "Rows of every streams query's state.",
      streams["state_rows"], scope="cluster")
    g("queen_streams_state_bytes", "Bytes of every streams query's state (keys and values).",
      streams["state_bytes"], scope="cluster")
    g("queen_timers_pending", "Timers scheduled and not fired yet.",
      sum(int(r["pending"]) for r in timers), scope="cluster")
    for r in timers:
        g("queen_timers_pending_by_queue", "Timers of the queue not fired yet.", r["pending"],
          queue=r["queue"])
    for r in workers:
        labels = {"worker_id": r["worker_id"], "hostname": r["hostname"], "pid": str(r["pid"])}
        g("queen_worker_last_sample_age_seconds", "Seconds since the worker's last sample.",
          r["age"], **labels)
    return book.families(), workers


async def prometheus(db: Database, figures: ProcessFigures, *, fresh_seconds: float) -> bytes:
    """GET /metrics/prometheus: this process's families from `figures`, the cluster's and
    every other live worker's from PostgreSQL. When the database does not answer, this
    process's own are still served (contract §10)."""
    families = worker_families(figures)
    try:
        cluster, workers = await cluster_families(db, fresh_seconds=fresh_seconds)
    except Exception as exc:
        log.warning("metrics: the database did not answer", extra={"error": str(exc)})
    else:
        families += cluster
        for row in workers:
            if row["worker_id"] != figures.identity.worker_id:
                families += [Family.from_json(f) for f in msgspec.json.decode(row["families"])]
    return render_prometheus(families)


def merge(families: Iterable[Family]) -> list[Family]:
    """One family per name (Prometheus wants each name once), samples in order."""
    merged: dict[str, Family] = {}
    for family in families:
        seen = merged.get(family.name)
        merged[family.name] = family if seen is None else attrs.evolve(
            seen, samples=seen.samples + family.samples)
    return list(merged.values())


class _Collector:
    def __init__(self, families: Sequence[Family]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            names = sorted({k for labels, _ in family.samples for k in labels})

            def values(labels: Labels, names: list[str] = names) -> list[str]:
                return [labels.get(k, "") for k in names]

            if family.kind == "histogram":
                histogram = HistogramMetricFamily(family.name, family.help, labels=names)
                for labels, value in family.samples:
                    assert isinstance(value, HistogramSnapshot)
                    histogram.add_metric(values(labels), _cumulative(value), value.total)
                yield histogram
                continue
            metric = (CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily)(
                family.name, family.help, labels=names)
            for labels, value in family.samples:
                assert isinstance(value, float)
                metric.add_metric(values(labels), value)
            yield metric


def _cumulative(h: HistogramSnapshot) -> list[tuple[str, float]]:
    running, out = 0, []
    for bound, n in zip((*h.buckets, float("inf")), h.counts, strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(running)))
    return out


def render_prometheus(families: Sequence[Family]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(merge(families)))
    return generate_latest(registry)


def metrics_json(f: ProcessFigures, *, requests_rate: float, messages_rate: float,
                 stats_age: int) -> dict[str, Any]:
    """GET /metrics: the reference's keys with real values, and every service's figures."""
    a = f.activity
    return {
        **f.identity.to_wire(),
        "uptime": round(f.uptime, 3),
        "requests": {"total": a.http_requests, "rate": round(requests_rate, 3)},
        "messages": {"total": a.push_messages, "rate": round(messages_rate, 3),
                     "popped": a.pop_messages, "acked": a.ack_messages},
        "database": {"poolSize": f.database.pool_size, "idleConnections": f.database.pool_idle,
                     "waitingRequests": f.pool_waiting, "activeConnections": f.pool_active,
                     "maxConnections": f.pool_max, "heldConnections": f.database.held,
                     "calls": f.database.calls,
                     "failures": f.database.failures,
                     "secondsInCalls": round(f.database.seconds_in_calls, 3)},
        "memory": {"rss": f.rss_bytes},
        "cpu": {"user": round(f.cpu_user, 3), "system": round(f.cpu_system, 3)},
        "eventLoopLag": {"avgMs": round(f.loop_lag.average * 1000, 3),
                         "maxMs": round(f.loop_lag.maximum * 1000, 3)},
        "lane": attrs.asdict(f.lane),
        "spool": attrs.asdict(f.spool),
        "fusion": {"claims": attrs.asdict(f.claims), "acks": attrs.asdict(f.acks)},
        "longPolls": {"waiting": f.long_poll_waiters, "byQueue": dict(f.wakeups.waiting),
                      "wakeups": f.wakeups.notifications,
                      "listenerConnected": f.listener.connected},
        "maintenance": [{"name": p.name, "passes": p.passes, "skipped": p.skipped,
                         "failures": p.failures, "lastError": p.last_error,
                         "totals": dict(p.totals)} for p in f.periodic],
        "statsAge": stats_age,
        "encryption": f.encryption.to_wire(),
        "streams": {"cycles": dict(f.streams_cycles), "retries": f.streams_retries},
        "ephemeral": None if f.ephemeral is None else {
            "owner": f.ephemeral.owner, "queues": f.ephemeral.queues,
            "messages": f.ephemeral.messages, "bytes": f.ephemeral.bytes,
            "pushed": f.ephemeral.pushed, "popped": f.ephemeral.popped,
            "acked": f.ephemeral.acked, "drops": dict(f.ephemeral.drops),
            "relayed": f.ephemeral.relayed, "relayFailures": f.ephemeral.relay_failures,
            "peerChannel": {"connects": f.ephemeral.channel_connects,
                            "idle": f.ephemeral.channel_idle,
                            "open": f.ephemeral.channel_open,
                            "served": f.ephemeral.channel_served,
                            "abandoned": f.ephemeral.channel_abandoned},
            "waiting": f.ephemeral.waiting},
    }


def _ephemeral_families(e: EphemeralStatistics, g: Any, c: Any) -> None:
    """The ephemeral queues' families: only the owner holds rings, so only its depth and
    bytes are non-zero; every process counts what it relayed."""
    g("queen_ephemeral_owner", "1 on the process that owns the ephemeral rings.", int(e.owner))
    c("queen_ephemeral_relayed_total", "Ephemeral requests relayed to the owner.", e.relayed)
    c("queen_ephemeral_relay_failures_total", "Relays that found no owner answering.",
      e.relay_failures)
    g("queen_ephemeral_waiting_pops", "Ephemeral pops parked here.", e.waiting)
    c("queen_ephemeral_peer_connects_total", "Peer-channel connections this process opened "
      "to the owner.", e.channel_connects)
    g("queen_ephemeral_peer_idle_connections", "Peer-channel connections idle in this "
      "process's pool.", e.channel_idle)
    g("queen_ephemeral_peer_open_connections", "Peer-channel connections open to this "
      "process (the owner's side).", e.channel_open)
    c("queen_ephemeral_peer_served_total", "Relayed requests this process answered over the "
      "peer channel.", e.channel_served)
    c("queen_ephemeral_peer_abandoned_total", "Relayed requests whose relaying process hung "
      "up before the answer.", e.channel_abandoned)
    for q in e.per_queue:
        g("queen_ephemeral_depth", "Messages an ephemeral queue holds.", q["depth"],
          queue=q["queue"])
        g("queen_ephemeral_bytes", "Payload bytes an ephemeral queue holds.", q["bytes"],
          queue=q["queue"])
        c("queen_ephemeral_pushed_total", "Messages pushed to an ephemeral queue.",
          q["pushed"], queue=q["queue"])
        c("queen_ephemeral_popped_total", "Messages popped from an ephemeral queue.",
          q["popped"], queue=q["queue"])
        for reason, n in sorted(q["drops"].items()):
            c("queen_ephemeral_dropped_total", "Messages an ephemeral queue dropped, by "
              "reason (bounds, ttl, retry).", n, queue=q["queue"], reason=reason)

