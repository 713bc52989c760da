"""Every database call goes through here: the asyncpg pool, the trio-asyncio crossing; the
schema brought up to date at start (storage/schema.py).

asyncpg is asyncio code; the broker is trio. One trio-asyncio loop is opened for the broker's
lifetime and each logical operation crosses the bridge exactly once (`Database.call`), so the
cost of the bridge is visible in `statistics()` and batched by the callers (the push lane sends
one call per bundle).

A call checks a connection out of the pool and back, which costs the broker more CPU than the
crossing itself (asyncpg makes a task for the checkout's timeout, another for the shielded
release, and timers; on trio-asyncio each is a trip through trio). The tasks that make one call
after another (a push shard, a fusion caller) therefore hold one connection while they are busy
(`Database.holding`) and give it back once idle.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, urlsplit

import asyncpg
import attrs
import trio
import trio_asyncio
from asyncpg.pool import PoolConnectionProxy

from ..errors import ConfigError, DatabaseUnavailable, Overloaded
from ..logs import Throttle
from .holding import Hold
from .schema import migrate
from .sql import Q, Query

log = logging.getLogger("queen_trio.database")

T = TypeVar("T")

# Pool connections that are never held, so every other call (a first pop, maintenance, the
# operations routes) still finds one while every holder is busy.
UNHELD_CONNECTIONS = 2


# SQLSTATE classes and codes that mean "the server is unreachable or going away", not "your
# statement is wrong" (docs/decisions.md#what-spools).
_UNAVAILABLE_SQLSTATES = ("08", "53", "57P01", "57P02", "57P03")


# SQLSTATEs that say "not now" rather than "never": a lock or statement timeout, a deadlock,
# a serialization failure. Worth trying again later.
_TRANSIENT_SQLSTATES = ("55P03", "57014", "40P01", "40001")


def is_transient(exc: BaseException) -> bool:
    """A failure that a later attempt may not meet: the connection, the broker's own bounds,
    or a SQLSTATE that means "not now"."""
    if is_connection_failure(exc) or is_overload(exc):
        return True
    return (isinstance(exc, asyncpg.PostgresError)
            and (getattr(exc, "sqlstate", "") or "") in _TRANSIENT_SQLSTATES)


def is_overload(exc: BaseException) -> bool:
    """The broker's own bounds refused the call (the pool had no connection free)."""
    return isinstance(exc, Overloaded)


def is_connection_failure(exc: BaseException) -> bool:
    if isinstance(exc, DatabaseUnavailable):
        return True
    if isinstance(exc, (OSError, asyncio.TimeoutError, TimeoutError, asyncpg.InterfaceError,
                        asyncpg.InternalClientError)):
        # InternalClientError: asyncpg's protocol lost track of a connection that died.
        return True
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", "") or ""
        return any(state.startswith(prefix) for prefix in _UNAVAILABLE_SQLSTATES)
    return False


# While the database does not answer, one line says so at most this often.
UNREACHABLE_LOG_SECONDS = 30.0


def database_address(url: str) -> str:
    """`host:port` of a database URL, for messages (no user, no password)."""
    try:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        host = parts.hostname or query.get("host") or "localhost"
        port = parts.port or int(query.get("port") or 5432)
    except ValueError:
        return "(unparsable URL)"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def describe_failure(exc: BaseException) -> str:
    """What went wrong, in the words an operator can act on."""
    cause = exc.__cause__ if isinstance(exc, DatabaseUnavailable) and exc.__cause__ else exc
    if isinstance(cause, socket.gaierror):
        return f"host name does not resolve ({cause.strerror})"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused (nothing listens on that port)"
    if isinstance(cause, (asyncio.TimeoutError, TimeoutError)):
        return "no answer within the connection timeout"
    text = str(cause) or type(cause).__name__
    return text.removeprefix(DatabaseUnavailable.prefix)


class Reachability:
    """Whether the database answers, and why not. While it does not, one warning line at most
    every UNREACHABLE_LOG_SECONDS names the host, the port and the error (never a traceback:
    an outage is expected, the broker spools through it); one line says when it is back."""

    def __init__(self, url: str) -> None:
        self.address = database_address(url)
        self.reason: str | None = None
        self._throttle = Throttle(UNREACHABLE_LOG_SECONDS)

    def line(self, exc: BaseException) -> str:
        return f"database unreachable at {self.address}: {describe_failure(exc)}"

    def failed(self, exc: BaseException) -> None:
        self.reason = self.line(exc)
        held = self._throttle.admit()
        if held is not None:
            log.warning(self.reason, extra={"address": self.address,
                                            "error": describe_failure(exc),
                                            "failures_held_back": held})

    def answered(self) -> None:
        if self.reason is not None:
            self.reason = None
            self._throttle = Throttle(UNREACHABLE_LOG_SECONDS)
            log.info("database reachable again", extra={"address": self.address})


async def require_reachable(url: str, *, connect_seconds: float, source: str) -> None:
    """`--require-database`: one connection now, or ConfigError with the line an unreachable
    database logs (so the start exits 2 instead of spooling)."""
    async with trio_asyncio.open_loop():
        try:
            conn = await trio_asyncio.aio_as_trio(asyncpg.connect)(url, timeout=connect_seconds)
        except Exception as exc:
            if not is_connection_failure(exc):
                raise
            raise ConfigError(f"{Reachability(url).line(exc)} ({source} refuses to start "
                              "without it)") from None
        await trio_asyncio.aio_as_trio(conn.close)()


@attrs.frozen
class DatabaseStatistics:
    calls: int
    failures: int
    in_flight: int
    seconds_in_calls: float
    pool_size: int
    pool_idle: int
    held: int  # connections kept by busy holders between their calls (counted as not idle)


class ConnectionHold:
    """A pool connection one task keeps between its calls; see `Database.holding`."""

    def __init__(self, db: Database, owner: trio.lowlevel.Task) -> None:
        self.db = db
        self.owner = owner
        self.conn: PoolConnectionProxy | None = None
        # Counted against the budget of held connections (from the reservation on).
        self.reserved = False

    @property
    def holding(self) -> bool:
        return self.conn is not None

    async def let_go(self) -> None:
        await self.db._let_go(self)


# The hold of the task running now, if it opened one (only its owner uses it, and only on its
# own database: a task it starts inherits the variable, and must not share the connection).
_HOLDING: ContextVar[ConnectionHold | None] = ContextVar("queen_trio_hold", default=None)


@attrs.define
class _Counters:
    calls: int = 0
    failures: int = 0
    in_flight: int = 0
    seconds: float = 0.0


class Database:
    """An open pool. Use `open_database`; every method must run inside its trio-asyncio loop."""

    def __init__(self, pool: asyncpg.Pool, url: str, loop: trio_asyncio.TrioEventLoop, *,
                 acquire_timeout: float | None = None) -> None:
        self._pool = pool
        self._acquire_timeout = acquire_timeout
        # Kept explicitly (not taken from the context), so any task of the trio run may call.
        self._loop = loop
        self.url = url
        self.reachability = Reachability(url)
        self._counters = _Counters()
        self._held = 0
        self._hold_budget = max(pool.get_max_size() - UNHELD_CONNECTIONS, 0)
        # Set once the schema is migrated; calls before that raise DatabaseUnavailable.
        self.ready = trio.Event()
        # Set by `abort`: what fails from then on failed because the broker cut its own
        # connections, which says nothing about the database's reachability.
        self._aborted = False

    async def _ensure_schema(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                             retry_seconds: float = 1.0) -> None:
        """Migrate now if the database answers; otherwise let the broker start and keep trying."""
        started = False
        while True:
            try:
                applied = await migrate(self.url)
            except Exception as exc:
                if not is_connection_failure(exc):
                    raise
                self.reachability.failed(exc)  # pushes spool meanwhile
                if not started:
                    task_status.started()
                    started = True
                await trio.sleep(retry_seconds)
                continue
            self.reachability.answered()
            if applied:
                log.info("migrations applied", extra={"versions": applied})
            self.ready.set()
            if not started:
                task_status.started()
            return

    def statistics(self) -> DatabaseStatistics:
        c = self._counters
        return DatabaseStatistics(
            calls=c.calls,
            failures=c.failures,
            in_flight=c.in_flight,
            seconds_in_calls=c.seconds,
            pool_size=self._pool.get_size(),
            pool_idle=self._pool.get_idle_size(),
            held=self._held,
        )

    @asynccontextmanager
    async def holding(self) -> AsyncIterator[Hold]:
        """While open, the current task's calls share one pool connection, checked out at the
        first call and kept until `let_go` (its owner calls that once idle for
        HOLD_IDLE_SECONDS), a failed call, or the end of the block. Past the budget (the pool
        less UNHELD_CONNECTIONS) a holder's calls check out one by one, as any other call."""
        hold = ConnectionHold(self, trio.lowlevel.current_task())
        token = _HOLDING.set(hold)
        try:
            yield hold
        finally:
            _HOLDING.reset(token)
            with trio.CancelScope(shield=True):
                await hold.let_go()

    def _held_by_caller(self) -> ConnectionHold | None:
        """The current task's hold, if it has or may take a held connection."""
        hold = _HOLDING.get()
        if (hold is None or hold.db is not self
                or hold.owner is not trio.lowlevel.current_task()):
            return None
        if not hold.reserved:
            if self._held >= self._hold_budget:
                return None
            self._held += 1
            hold.reserved = True
        return hold

    async def _let_go(self, hold: ConnectionHold) -> None:
        conn, hold.conn = hold.conn, None
        if conn is not None:
            try:
                await self._loop.run_aio_coroutine(self._pool.release(conn))
            except Exception:  # the pool is closing or the connection is broken: drop it
                _terminate(conn)
        if hold.reserved:
            hold.reserved = False
            self._held -= 1

    async def call(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """Run `work(connection)` on the asyncio side: one bridge crossing, and one pool
        checkout unless the task holds a connection (`holding`).

        Connection-level failures are raised as DatabaseUnavailable; anything else as is.
        """
        if not self.ready.is_set():
            raise DatabaseUnavailable(self.reachability.reason
                                      or "the schema is not applied yet (database unreachable)")
        c = self._counters
        c.calls += 1
        c.in_flight += 1
        started = time.perf_counter()
        hold = self._held_by_caller()
        try:
            # trio-asyncio has no types: its crossing returns what `work` returned.
            result: T
            if hold is not None:
                result = await self._loop.run_aio_coroutine(self._with_held(hold, work))
            else:
                result = await self._loop.run_aio_coroutine(self._with_connection(work))
        except BaseException as exc:
            if isinstance(exc, Exception):
                c.failures += 1
                if is_connection_failure(exc) and not isinstance(exc, Overloaded):
                    if not self._aborted:
                        self.reachability.failed(exc)
                    if not isinstance(exc, DatabaseUnavailable):
                        raise DatabaseUnavailable(exc) from exc
            raise
        finally:
            c.in_flight -= 1
            c.seconds += time.perf_counter() - started
        if self.reachability.reason is not None:
            self.reachability.answered()
        return result

    async def _with_held(self, hold: ConnectionHold,
                         work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        if hold.conn is not None and not _usable(hold.conn):
            # Its backend went away while it was held (a restart, say): as the pool would.
            stale, hold.conn = hold.conn, None
            try:
                await self._pool.release(stale)
            except asyncpg.InterfaceError:
                pass  # the pool is closed (an abort): the checkout below says so
        if hold.conn is None:
            try:
                hold.conn = await self._acquire()
            except BaseException:
                hold.reserved = False
                self._held -= 1
                raise
        conn = hold.conn
        try:
            return await work(_as_connection(conn))
        except BaseException as exc:
            # After a failure the connection's state is not known: back to the pool with it
            # (as after any call), and the next call checks one out again.
            hold.conn = None
            hold.reserved = False
            self._held -= 1
            if isinstance(exc, (asyncpg.InternalClientError, asyncpg.InterfaceError)):
                _terminate(conn)
            await self._pool.release(conn)
            raise

    async def _with_connection(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        conn = await self._acquire()
        try:
            return await work(_as_connection(conn))
        except (asyncpg.InternalClientError, asyncpg.InterfaceError):
            # The connection's protocol state is unusable (its backend was terminated under
            # it, say): never hand it out again.
            _terminate(conn)
            raise
        finally:
            await self._pool.release(conn)

    async def _acquire(self) -> PoolConnectionProxy:
        try:
            return await self._pool.acquire(timeout=self._acquire_timeout)
        except asyncio.TimeoutError as exc:
            pool = self._pool
            if pool.get_size() >= pool.get_max_size() and pool.get_idle_size() == 0:
                # Every connection is busy: the broker is behind, the database is fine.
                raise Overloaded(f"no database connection free within {self._acquire_timeout} s "
                                 f"(DB_POOL_SIZE {pool.get_max_size()})") from exc
            raise DatabaseUnavailable(exc) from exc
        except Exception as exc:
            # Whatever stops us from getting a connection (refused, shutting down, not
            # accepting connections) means the database is unavailable, not a bad statement.
            raise DatabaseUnavailable(exc) from exc

    @asynccontextmanager
    async def sibling(self, *, pool_size: int, statement_timeout_ms: int, lock_timeout_ms: int,
                      connect_timeout_ms: int, name: str) -> AsyncIterator[Database]:
        """A second pool on the same database and loop (the KV pool): its own connections and
        timeouts, this one's readiness and reachability. Closed at the end of the block."""
        pool = await self._loop.run_aio_coroutine(_create_pool(
            self.url, pool_size=pool_size, statement_timeout_ms=statement_timeout_ms,
            lock_timeout_ms=lock_timeout_ms, connect_timeout_ms=connect_timeout_ms,
            application_name=f"queen-trio {name}"))
        db = Database(pool, self.url, self._loop, acquire_timeout=connect_timeout_ms / 1000)
        db.ready = self.ready
        db.reachability = self.reachability
        try:
            yield db
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(10):
                    await self._loop.run_aio_coroutine(pool.close())
                pool.terminate()

    async def abort(self) -> None:
        """Cut every pool connection now: the calls in flight fail at once, and later calls
        find the pool closed. For a shutdown past its deadline (a frozen server). Those
        failures are not reported as the database being unreachable."""
        self._aborted = True

        async def terminate() -> None:
            self._pool.terminate()

        await self._loop.run_aio_coroutine(terminate())

    async def fetch(self, query: Query, **params: Any) -> list[asyncpg.Record]:
        return await self.call(lambda conn: query.fetch(conn, **params))

    async def fetchrow(self, query: Query, **params: Any) -> asyncpg.Record | None:
        return await self.call(lambda conn: query.fetchrow(conn, **params))

    async def fetchval(self, query: Query, **params: Any) -> Any:
        return await self.call(lambda conn: query.fetchval(conn, **params))

    async def execute(self, query: Query, **params: Any) -> str:
        return await self.call(lambda conn: query.execute(conn, **params))

    async def in_transaction(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        async def run(conn: asyncpg.Connection) -> T:
            async with conn.transaction():
                return await work(conn)

        return await self.call(run)

    async def ping(self, within: float = 2.0) -> bool:
        return await self.unhealthy(within) is None

    async def unhealthy(self, within: float = 2.0) -> str | None:
        """None when `SELECT 1` answers within `within` seconds; else why not (one line)."""
        with trio.move_on_after(within):
            try:
                await self.fetchval(Q.ping)
                return None
            except Exception as exc:
                if is_connection_failure(exc):
                    return self.reachability.reason or self.reachability.line(exc)
                return f"database check failed: {describe_failure(exc)}"
        return f"database at {self.reachability.address} gave no answer within {within:g} s"


def _as_connection(conn: PoolConnectionProxy) -> asyncpg.Connection:
    """The pool's proxy, as the Connection every caller takes: asyncpg's ConnectionMeta makes
    the proxy an instance of Connection (`isinstance` says so), which its stubs do not model."""
    return cast(asyncpg.Connection, conn)


def _usable(conn: PoolConnectionProxy) -> bool:
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:
        # asyncpg gave it back to its pool already: its backend went away.
        return False


def _terminate(conn: PoolConnectionProxy) -> None:
    try:
        conn.terminate()
    except asyncpg.InterfaceError:
        pass  # given back to its pool already, when its backend went away


async def _keep_session(conn: asyncpg.Connection) -> None:
    return None


async def _create_pool(url: str, *, pool_size: int, statement_timeout_ms: int,
                       lock_timeout_ms: int, connect_timeout_ms: int,
                       application_name: str = "queen-trio") -> asyncpg.Pool:
    return await asyncpg.create_pool(
        url,
        min_size=0,
        max_size=pool_size,
        # The broker never leaves session state behind (no SET, no session locks, no
        # LISTEN on pool connections; transactions are always closed), so the default
        # reset query would only cost a round trip per checkout. asyncpg still rolls
        # back a transaction left open.
        reset=_keep_session,
        timeout=connect_timeout_ms / 1000,
        command_timeout=None,
        server_settings={
            "application_name": application_name,
            "statement_timeout": str(statement_timeout_ms),
            "lock_timeout": str(lock_timeout_ms),
            "timezone": "UTC",
        },
    )


@asynccontextmanager
async def open_database(
    url: str,
    *,
    pool_size: int = 20,
    statement_timeout_ms: int = 30_000,
    lock_timeout_ms: int = 10_000,
    connect_timeout_ms: int = 2_000,
    apply_migrations: bool = True,
) -> AsyncIterator[Database]:
    """Open the trio-asyncio loop and the pool; apply migrations; close both on exit.

    A database that cannot be reached does not stop the broker from starting (pushes spool
    meanwhile): the pool connects lazily, and migrations are retried in the background; until
    they are applied every call raises DatabaseUnavailable.
    """
    async with trio_asyncio.open_loop() as loop:
        pool = await trio_asyncio.aio_as_trio(_create_pool)(
            url, pool_size=pool_size, statement_timeout_ms=statement_timeout_ms,
            lock_timeout_ms=lock_timeout_ms, connect_timeout_ms=connect_timeout_ms)
        # Waiting for a free connection is bounded like opening one (DB_CONNECTION_TIMEOUT).
        db = Database(pool, url, loop, acquire_timeout=connect_timeout_ms / 1000)
        try:
            async with trio.open_nursery() as nursery:
                if apply_migrations:
                    await nursery.start(db._ensure_schema)
                else:
                    db.ready.set()
                yield db
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(10):
                    await trio_asyncio.aio_as_trio(pool.close)()
                pool.terminate()
