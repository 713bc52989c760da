"""Test brokers in this process, for Trio code: the PostgreSQL they run on, and the brokers.

`open_test_postgres` brings up the server: an embedded cluster copied from the template cache
(testing/cluster_cache.py), or a given server. Either way each broker gets a database of its
own, cloned from a migrated template database (`CREATE DATABASE ... TEMPLATE`), so brokers of
different settings, or of different xdist workers on one server, never share one.
`serve_test_broker` runs one broker on such a database, served by hypercorn on 127.0.0.1 and
an ephemeral port. `open_test_broker` is both at once, for one broker.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import Future
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import attrs
import msgspec
import trio

from ..broker import Broker, open_broker
from ..ops.traces import recorded_since
from ..settings import Settings
from ..storage.database import Database, open_database
from ..storage.embedded import EmbeddedPostgres
from ..storage.schema import apply_migrations
from ..storage.sql import Q
from ..web.auth import Authenticator
from ..web.listen import bind_listener
from ..web.routes import create_app
from ..web.server import connection_gate, hypercorn_config, serve_http
from . import cluster_cache
from .options import build_settings, normalise
from .server_admin import (
    create_database,
    database_exists,
    drop_database,
    rename_database,
)

log = logging.getLogger("queen_trio.testing")

# Serialises template creation and cloning on a shared server (xdist workers, other sessions):
# a database is cloned only while nobody is connected to its template.
TEMPLATE_LOCK_KEY = 0x51_75_65_65_6E_01
# reset() runs again when PostgreSQL picks it as a deadlock's victim, this many times at most.
RESET_ATTEMPTS = 5
_database_numbers = itertools.count(1)


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


@attrs.define
class TestPostgres:
    """The server of a session's test brokers; hands out databases cloned from the template."""

    __test__ = False

    admin_url: str
    template: str
    data_root: Path
    admin: Database
    cluster: EmbeddedPostgres | None = None
    # A clone made beforehand (the template cluster's), handed out first.
    spare: str | None = None

    @property
    def embedded(self) -> bool:
        return self.cluster is not None

    async def create_database(self) -> str:
        name = f"queen_test_{os.getpid()}_{next(_database_numbers)}"

        spare, self.spare = self.spare, None

        async def clone(conn: Any) -> None:
            await drop_database(conn, name)  # a left-over of a session that was killed
            if spare is not None:
                await rename_database(conn, spare, name)
            else:
                await create_database(conn, name, template=self.template)

        await self.under_template_lock(clone)
        return with_database(self.admin_url, name)

    async def drop_database(self, url: str) -> None:
        await self.admin.call(lambda conn: drop_database(conn, database_of(url)))

    async def under_template_lock(self, work: Callable[[Any], Awaitable[None]]) -> None:
        """`work(connection)` while holding the template lock: a session lock, so taken,
        used and released on that one connection."""

        async def locked(conn: Any) -> None:
            await Q.migration_lock.execute(conn, lock_key=TEMPLATE_LOCK_KEY)
            try:
                await work(conn)
            finally:
                await Q.migration_unlock.execute(conn, lock_key=TEMPLATE_LOCK_KEY)

        await self.admin.call(locked)


Early = Future[EmbeddedPostgres | cluster_cache.Build | None]


async def _start_embedded(data_root: Path, early: Early | None) -> EmbeddedPostgres:
    """The session's cluster: copied from the cached template (built first if there is none;
    built again if the cached one does not start). `early`: what a thread began meanwhile
    (child.py): the copy running, or a build under way."""
    template = None
    if early is not None:
        begun = await trio.to_thread.run_sync(early.result)
        if isinstance(begun, EmbeddedPostgres):
            return begun
        if isinstance(begun, cluster_cache.Build):
            try:
                template = await cluster_cache.finish_build(begun)
            except BaseException:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(begun.abandon)
                raise
    template = template or cluster_cache.find_template()
    data_dir = data_root / "cluster"
    if template is not None:
        try:
            return await trio.to_thread.run_sync(cluster_cache.start_copy, template, data_dir)
        except Exception as exc:
            log.warning("the cached template cluster does not start; building it again",
                        extra={"template": str(template), "error": str(exc)})
            cluster_cache.discard_template(template)
            shutil.rmtree(data_dir, ignore_errors=True)
    template = await cluster_cache.build_template()
    return await trio.to_thread.run_sync(cluster_cache.start_copy, template, data_dir)


@asynccontextmanager
async def open_test_postgres(*, data_root: Path, database_url: str | None = None,
                             early: Early | None = None,
                             ) -> AsyncIterator[TestPostgres]:
    """The server test brokers run on. `database_url`: a server that exists (its role needs
    CREATEDB); else an embedded cluster in `data_root`, stopped on the way out."""
    cluster: EmbeddedPostgres | None = None
    if database_url is None:
        cluster = await _start_embedded(data_root, early)
        admin_url, template = cluster.url(), cluster_cache.TEMPLATE_DATABASE
    else:
        admin_url = database_url
        template = f"queen_template_{cluster_cache.schema_version().replace('-', '_')}"
    try:
        async with open_database(admin_url, pool_size=2, apply_migrations=False) as admin:
            server = TestPostgres(admin_url, template, data_root, admin, cluster,
                                  spare=cluster_cache.SPARE_DATABASE if cluster else None)
            if cluster is None:
                await _ensure_template_database(server)
            yield server
    finally:
        if cluster is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(lambda: cluster.stop(mode="immediate"))


async def _ensure_template_database(server: TestPostgres) -> None:
    """On a given server: the migrated template database, made once and shared."""
    template_url = with_database(server.admin_url, server.template)

    async def ensure(conn: Any) -> None:
        if not await database_exists(conn, server.template):
            await create_database(conn, server.template)
        # Up to date: one round trip. Half made (its maker was killed): finished here.
        migrating = await asyncpg.connect(template_url)
        try:
            await apply_migrations(migrating)
        finally:
            await migrating.close()

    await server.under_template_lock(ensure)


@attrs.define(eq=False)
class RunningBroker:
    """One test broker: `url` (http://127.0.0.1:PORT), its `settings`, the `broker` itself."""

    __test__ = False

    url: str
    settings: Settings
    broker: Broker
    database_url: str

    async def reset(self) -> None:
        """Empty every queue, group and trace, and forget every cache that remembers them;
        the broker keeps running. Call it while no request of the test is in flight."""
        b = self.broker
        await b.spool.discard()  # first: nothing spooled may land in the emptied database
        # TRUNCATE locks every table in one order, the broker's own background writes (the
        # stats sampler, maintenance) lock theirs in another: PostgreSQL may pick the reset
        # as a deadlock's victim. Nothing of it happened then; do it again.
        for attempt in itertools.count(1):
            try:
                await b.db.execute(Q.reset_all)
                break
            except asyncpg.DeadlockDetectedError:
                if attempt == RESET_ATTEMPTS:
                    raise
        b.queues.forget_all()
        b.consumer.forget_joined_groups()
        b.wakeups.forget_all()
        b.publisher.forget_warnings()

    async def now(self) -> datetime.datetime:
        """The database's clock, to ask what happened since."""
        return await self.broker.db.fetchval(Q.database_clock)  # type: ignore[no-any-return]

    async def recorded_since(self, since: datetime.datetime, *, limit: int = 200,
                             ) -> dict[str, Any]:
        """Trace timelines and pushed messages from `since` on (ops/traces.py), as plain
        JSON values (payloads decoded)."""
        recorded = await recorded_since(self.broker.db, self.broker.cipher, since, limit=limit)
        return msgspec.json.decode(msgspec.json.encode(recorded))  # type: ignore[no-any-return]


@asynccontextmanager
async def serve_test_broker(server: TestPostgres, overrides: Mapping[str, Any], *,
                            spool_dir: Path, keep_data: bool = False,
                            ) -> AsyncIterator[RunningBroker]:
    """One broker on a fresh database of `server`, served on 127.0.0.1 (an ephemeral port);
    its database is dropped on the way out (unless `keep_data`)."""
    database_url = await server.create_database()
    try:
        listener = bind_listener(Settings(host="127.0.0.1", port=0))  # an ephemeral port
        try:
            settings = build_settings(overrides, host="127.0.0.1",
                                      port=listener.getsockname()[1],
                                      data_dir=server.data_root, spool_dir=spool_dir,
                                      database_url=database_url)
            auth = Authenticator(settings.auth)
            await auth.start()
            async with open_broker(settings, database_url) as broker:
                # As `queen-trio serve` serves it (web/server.py); hypercorn takes the bound
                # socket over and closes it when it stops.
                config = hypercorn_config(settings, [listener])
                gate = connection_gate(settings)
                app = create_app(broker, auth)
                gate.attach(app)
                stop = trio.Event()
                async with trio.open_nursery() as nursery:
                    await nursery.start(partial(serve_http, app, config, gate, stop, broker))
                    try:
                        yield RunningBroker(f"http://127.0.0.1:{settings.port}", settings,
                                            broker, database_url)
                    finally:
                        # As at a server's shutdown: parked long polls answer 204 at once.
                        stop.set()
        finally:
            if listener.fileno() != -1:  # not handed to hypercorn
                listener.close()
    finally:
        if not keep_data:
            with trio.CancelScope(shield=True):
                await server.drop_database(database_url)


@asynccontextmanager
async def open_test_broker(*, database_url: str | None = None, keep_data: bool = False,
                           **settings: Any) -> AsyncIterator[RunningBroker]:
    """A broker in this process, for Trio code. `settings`: any `Settings` field, or
    `encryption=True`. `database_url`: run on that server (a database of its own is
    created there and dropped after); else on an embedded cluster. `keep_data`: leave the
    data directory (and the database) behind, to look at after."""
    overrides = normalise(settings)
    data_root = Path(tempfile.mkdtemp(prefix="queen-trio-test-"))
    try:
        async with open_test_postgres(data_root=data_root, database_url=database_url) as server:
            async with serve_test_broker(server, overrides, spool_dir=data_root / "spool-1",
                                         keep_data=keep_data) as running:
                yield running
    finally:
        if keep_data:
            log.warning("test broker data kept", extra={"data_dir": str(data_root)})
        else:
            shutil.rmtree(data_root, ignore_errors=True)
