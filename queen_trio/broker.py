"""The broker's tree of tasks: database, push lane, services; the HTTP server goes on top.

Nesting encodes shutdown order: leaving `open_broker` closes the lane and waits until every
accepted group is flushed, then stops the services, then closes the pool.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

from .acks import AckLane
from .auth import Authenticator, AuthSettings
from .consume import Consumer
from .database import Database, open_database
from .encryption import PayloadCipher
from .lane import PushLane
from .maintenance import PartitionReclaimer, RetentionService
from .publisher import Publisher
from .queues import QueueDirectory
from .settings import Settings
from .spool import Spool
from .transactions import TransactionRunner
from .wakeups import NotifyListener, WakeRegistry

log = logging.getLogger("queen_trio.broker")


@attrs.define
class Broker:
    settings: Settings
    db: Database
    lane: PushLane
    directory: QueueDirectory
    cipher: PayloadCipher
    publisher: Publisher
    reclaimer: PartitionReclaimer
    wakeups: WakeRegistry
    listener: NotifyListener
    consumer: Consumer
    ack_lane: AckLane
    transactions: TransactionRunner
    auth: Authenticator
    spool: Spool


@asynccontextmanager
async def open_broker(settings: Settings, database_url: str) -> AsyncIterator[Broker]:
    # Before anything else: a JWKS that cannot be read, or a spool directory another broker
    # holds, refuses to start (ConfigError).
    auth = Authenticator(settings.auth or AuthSettings())
    await auth.start()
    spool = Spool(settings.spool_directory, records_per_file=settings.spool_records_per_file)
    spool.open()
    try:
        async with open_database(
            database_url,
            pool_size=settings.db_pool_size,
            statement_timeout_ms=settings.db_statement_timeout_ms,
            lock_timeout_ms=settings.db_lock_timeout_ms,
            connect_timeout_ms=settings.db_connection_timeout_ms,
        ) as db:
            async with _broker_tree(settings, database_url, db, auth, spool) as broker:
                yield broker
    finally:
        spool.close()


@asynccontextmanager
async def _broker_tree(settings: Settings, database_url: str, db: Database, auth: Authenticator,
                       spool: Spool) -> AsyncIterator[Broker]:
    cipher = PayloadCipher(settings.encryption_key)
    wakeups = WakeRegistry()
    lane = PushLane(db, shards=settings.push_shards,
                    tick_seconds=settings.fusion_hold_ms / 1000,
                    idle_seconds=settings.flush_idle_seconds,
                    on_commit=wakeups.notify)
    directory = QueueDirectory(db)
    reclaimer = PartitionReclaimer(db, idle_days=settings.partition_cleanup_days,
                                   interval=settings.partition_cleanup_interval_seconds)
    listener = NotifyListener(wakeups, database_url)
    publisher = Publisher(lane, directory, cipher, spool)
    # Acks and claims fuse their database calls like the push lane (queen_trio/fusion.py).
    broker = Broker(settings, db, lane, directory, cipher, publisher, reclaimer, wakeups,
                    listener, Consumer(db, cipher, wakeups, settings), AckLane(db, wakeups),
                    TransactionRunner(db, publisher, directory, wakeups), auth, spool)
    async with trio.open_nursery() as nursery:
        await nursery.start(lane.run)
        async with trio.open_nursery() as services:
            await services.start(reclaimer.run)
            await services.start(RetentionService(
                db, interval=settings.retention_interval_seconds,
                batch=settings.retention_batch_size).run)
            await services.start(listener.run)
            await services.start(broker.ack_lane.run)
            await services.start(broker.consumer.run)
            await services.start(spool.run_replay, db, directory, cipher)
            try:
                yield broker
            finally:
                # Flush every accepted group first, then stop the services.
                lane.close()
                await lane.wait_closed()
                services.cancel_scope.cancel()
