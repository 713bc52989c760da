"""The broker's tree of tasks: database, push lane, services. The web layer goes on top.

Nesting encodes shutdown order: leaving `open_broker` closes the lane and waits until every
accepted group is flushed, then stops the services, then closes the pool.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from . import wire
from .consume.acks import AckLane
from .consume.pop import Consumer
from .consume.wakeups import NotifyListener, WakeRegistry
from .ephemeral.service import Ephemeral
from .kv.store import KvStore
from .ops.activity import Activity
from .ops.kv_sweep import KvSweeper
from .ops.maintenance import PartitionReclaimer, RetentionService
from .ops.metrics import ProcessFigures, WorkerIdentity, cpu_seconds, rss_bytes
from .ops.stats import StatsMaintenance, StatsSampler
from .push.bundle import Segment, run_bundle
from .push.lane import PushLane
from .push.publisher import Publisher
from .push.spool import Spool
from .push.spool_root import ORPHAN_WAIT_SECONDS, worker_directories
from .push.transactions import TransactionRunner
from .queues.queues import Queues
from .reads.fetch import OffsetReader
from .settings import Settings
from .storage.database import Database, open_database
from .storage.encryption import PayloadCipher
from .streams.service import Streams
from .timers.service import TimerService, TransactionTimers
from .timers.sweeper import CHANNEL as TIMER_CHANNEL
from .timers.sweeper import TimerSweeper

log = logging.getLogger("queen_trio.broker")

# At shutdown, how long the push lane may take to flush what it holds.
FLUSH_DEADLINE_SECONDS = 5.0
SERVICES_DEADLINE_SECONDS = 5.0


@attrs.define(kw_only=True)
class Broker:
    """Every service of one broker process; the web layer reaches them through this."""

    settings: Settings
    db: Database
    cipher: PayloadCipher
    queues: Queues
    wakeups: WakeRegistry
    listener: NotifyListener
    lane: PushLane
    spool: Spool
    publisher: Publisher
    consumer: Consumer
    ack_lane: AckLane
    transactions: TransactionRunner
    streams: Streams
    reclaimer: PartitionReclaimer
    retention: RetentionService
    identity: WorkerIdentity
    activity: Activity
    sampler: StatsSampler
    stats_maintenance: StatsMaintenance
    ephemeral: Ephemeral
    kv: KvStore
    kv_sweeper: KvSweeper
    timers: TimerService
    sweeper: TimerSweeper
    reader: OffsetReader
    started: float = attrs.field(factory=time.monotonic)

    def figures(self) -> ProcessFigures:
        """One reading of every service's statistics (ops/metrics.py)."""
        user, system = cpu_seconds()
        sampler = self.sampler.statistics()
        return ProcessFigures(
            identity=self.identity, taken_at=wire.utc_now(),
            uptime=time.monotonic() - self.started, cpu_user=user, cpu_system=system,
            rss_bytes=rss_bytes(), loop_lag=self.sampler.loop_lag(),
            activity=self.activity.statistics(), database=self.db.statistics(),
            pool_max=self.settings.db_pool_size, lane=self.lane.statistics(),
            spool=self.spool.statistics(), claims=self.consumer.statistics().claims,
            acks=self.ack_lane.statistics(), wakeups=self.wakeups.statistics(),
            listener=self.listener.statistics(),
            periodic=[self.reclaimer.statistics(), self.retention.statistics(),
                      self.stats_maintenance.statistics(), self.kv_sweeper.statistics()],
            stats_samples=sampler.samples, stats_failures=sampler.failures,
            encryption=self.cipher.status, kv=self.kv.statistics(),
            streams_cycles=self.streams.statistics().cycles,
            streams_retries=self.streams.statistics().retries,
            timers=self.timers.statistics(), sweeper=self.sweeper.statistics(),
            ephemeral=self.ephemeral.statistics())

    def stats_age(self) -> int:
        return self.sampler.stats_age()

    async def refresh_stats(self) -> dict[str, Any]:
        """POST /api/v1/stats/refresh: sample this process now and snapshot the cluster."""
        await self.stats_maintenance.snapshot_now()
        sampled_at = await self.sampler.sample_now()
        return {"success": True, **self.identity.to_wire(),
                "sampledAt": wire.format_millis(sampled_at), "statsAge": self.stats_age()}


@asynccontextmanager
async def open_broker(settings: Settings, database_url: str, *,
                      migrate: bool = True,
                      peer_address: str | None = None) -> AsyncIterator[Broker]:
    """`migrate` False: the schema is known to be current (a supervisor migrated it).
    `peer_address` (host:port): where the other broker processes reach this one's peer
    listener (the ephemeral owner's relays); None when it has none."""
    # Before anything else: a spool directory another broker holds refuses to start.
    if settings.worker_index is None:
        # A single broker takes over what workers of an earlier supervisor left.
        spool = Spool(settings.spool_root, records_per_file=settings.spool_records_per_file,
                      adopt_from=worker_directories(settings.spool_root))
    else:
        # A restarted worker may find its predecessor's lock still being let go.
        spool = Spool(settings.spool_directory, root=settings.spool_root,
                      records_per_file=settings.spool_records_per_file, wait=ORPHAN_WAIT_SECONDS)
    await spool.open()
    try:
        async with open_database(
            database_url,
            pool_size=settings.pool_per_worker,
            statement_timeout_ms=settings.db_statement_timeout_ms,
            lock_timeout_ms=settings.db_lock_timeout_ms,
            connect_timeout_ms=settings.db_connection_timeout_ms,
            apply_migrations=migrate,
        ) as db, db.sibling(
            pool_size=settings.kv_pool_size,
            statement_timeout_ms=settings.kv_statement_timeout_ms,
            lock_timeout_ms=min(settings.db_lock_timeout_ms, settings.kv_statement_timeout_ms),
            connect_timeout_ms=settings.db_connection_timeout_ms, name="kv",
        ) as kv_db:
            async with _broker_tree(settings, database_url, db, kv_db, spool,
                                    peer_address) as broker:
                yield broker
    finally:
        with trio.CancelScope(shield=True):
            await spool.close()


def _services(settings: Settings, database_url: str, db: Database, kv_db: Database,
              spool: Spool, peer_address: str | None = None) -> Broker:
    cipher = PayloadCipher(settings.encryption_key)
    wakeups = WakeRegistry()
    queues = Queues(db)
    activity = Activity()

    async def commit(segments: list[Segment]) -> list[Any]:
        activity.record_bundle([len(segment.frames) for segment in segments])
        return await db.call(lambda conn: run_bundle(conn, segments))

    lane = PushLane(commit, shards=settings.lane_shards,
                    tick_seconds=settings.fusion_hold_ms / 1000,
                    idle_seconds=settings.flush_idle_seconds, on_commit=wakeups.notify,
                    deadline_seconds=settings.call_deadline_seconds, hold=db.holding)
    publisher = Publisher(lane, queues, cipher, spool,
                          max_pending_bytes=settings.max_pending_bytes)
    identity = WorkerIdentity.of_this_process(settings.worker_id, settings.worker_index)
    # KV and locks on a pool of their own, behind a first-come-first-served gate.
    kv = KvStore(kv_db, gate_size=settings.kv_pool_size,
                 gate_timeout=settings.db_connection_timeout_ms / 1000)
    timers = TimerService(db, cipher)
    sweeper = TimerSweeper(db, queues, cipher, wakeups,
                           lease_seconds=settings.timer_claim_lease_seconds,
                           batch=settings.timer_batch_size,
                           deadline_seconds=settings.call_deadline_seconds)
    listener = NotifyListener(wakeups, database_url)
    listener.listen(TIMER_CHANNEL, sweeper.on_notify)
    broker = Broker(
        settings=settings, db=db, cipher=cipher, queues=queues, wakeups=wakeups,
        listener=listener, lane=lane, spool=spool,
        publisher=publisher,
        # Acks and claims fuse their database calls like the push lane (consume/fusion.py).
        consumer=Consumer(db, cipher, wakeups, settings),
        ack_lane=AckLane(db, wakeups, deadline_seconds=settings.call_deadline_seconds),
        transactions=TransactionRunner(db, publisher, queues, wakeups,
                                       TransactionTimers(timers, settings.max_body_bytes)),
        streams=Streams(db, publisher, queues, wakeups),
        reclaimer=PartitionReclaimer(db, idle_days=settings.partition_cleanup_days,
                                     interval=settings.partition_cleanup_interval_seconds),
        retention=RetentionService(db, interval=settings.retention_interval_seconds,
                                   batch=settings.retention_batch_size),
        identity=identity, activity=activity,
        sampler=StatsSampler(db, identity, interval=settings.stats_interval_seconds),
        stats_maintenance=StatsMaintenance(db, retention_days=settings.metrics_retention_days),
        ephemeral=Ephemeral(db, database_url,
                            member_id=f"{identity.worker_id}/{secrets.token_hex(3)}",
                            address=peer_address, max_bytes=settings.ephemeral_max_bytes,
                            interval=settings.ephemeral_heartbeat_seconds),
        kv=kv, kv_sweeper=KvSweeper(kv, interval=settings.kv_sweep_interval_seconds),
        timers=timers, sweeper=sweeper, reader=OffsetReader(db, cipher),
    )
    broker.sampler.source = broker.figures
    broker.sampler.forget_queues = activity.forget_queues
    return broker


@asynccontextmanager
async def _broker_tree(settings: Settings, database_url: str, db: Database, kv_db: Database,
                       spool: Spool, peer_address: str | None = None) -> AsyncIterator[Broker]:
    broker = _services(settings, database_url, db, kv_db, spool, peer_address)
    # A service cancelled inside a shielded database call (the timer sweeper's step, a
    # maintenance pass) on a frozen server would hold the exit for its call deadline: past
    # SERVICES_DEADLINE_SECONDS the connections are cut, as for the lane.
    cutting = trio.CancelScope()

    async def cut_connections_when_stuck() -> None:
        with cutting:
            await trio.sleep(SERVICES_DEADLINE_SECONDS)
            log.warning("services did not stop in time; cutting the database connections",
                        extra={"seconds": SERVICES_DEADLINE_SECONDS})
            await db.abort()
            await kv_db.abort()

    async with trio.open_nursery() as nursery:
        await nursery.start(broker.lane.run)
        try:
            async with trio.open_nursery() as services:
                await services.start(broker.reclaimer.run)
                await services.start(broker.retention.run)
                await services.start(broker.stats_maintenance.run)
                await services.start(broker.kv_sweeper.run)
                await services.start(broker.sampler.run)
                await services.start(broker.listener.run)
                await services.start(broker.ack_lane.run)
                await services.start(broker.consumer.run)
                await services.start(broker.sweeper.run)
                await services.start(broker.ephemeral.run)
                await services.start(spool.run_replay, db, broker.queues, broker.cipher)
                try:
                    yield broker
                finally:
                    # Flush every accepted group first, then stop the services. A database that
                    # stopped answering cannot hold the exit: past the deadline its connections
                    # are cut, and what was not flushed fails (nobody waits for an answer now).
                    broker.lane.close()
                    with trio.move_on_after(FLUSH_DEADLINE_SECONDS) as flushing:
                        await broker.lane.wait_closed()
                    if flushing.cancelled_caught:
                        log.warning("the push lane did not flush in time; cutting the database "
                                    "connections", extra={"seconds": FLUSH_DEADLINE_SECONDS})
                        await db.abort()
                        await broker.lane.wait_closed()
                    services.cancel_scope.cancel()
                    nursery.start_soon(cut_connections_when_stuck)
        finally:
            cutting.cancel()
