"""Wake-ups for long polls: commits on this broker wake waiters at once; other brokers' commits
arrive through PostgreSQL LISTEN/NOTIFY (channel 'queen_push', payload: the queue name).

A notification is only a hint. Waiters re-check on a bounded backoff as well, so a lost one
costs latency, never a message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import asyncpg
import attrs
import trio
import trio_asyncio

log = logging.getLogger("queen_trio.wakeups")

CHANNEL = "queen_push"


@attrs.frozen
class WakeStatistics:
    watched_queues: int  # queues that a waiter is watching right now
    notifications: int   # wake-ups delivered (local commits and NOTIFY)
    # Long polls parked right now, per queue; namespace/task pops under ANY_QUEUE.
    waiting: Mapping[str, int]


ANY_QUEUE = "*"


@attrs.frozen
class ListenerStatistics:
    connected: bool
    notifications: int  # NOTIFY messages received from other brokers
    reconnects: int


class WakeRegistry:
    """One event per queue that someone is waiting on (and one for any queue); `notify` sets
    it and the next waiter arms a fresh one. An event lives only while someone watches it."""

    def __init__(self) -> None:
        self._events: dict[str, trio.Event] = {}
        self._watchers: dict[str, int] = {}
        self._any = trio.Event()
        self._notifications = 0
        self._parked: dict[str, int] = {}

    def statistics(self) -> WakeStatistics:
        return WakeStatistics(watched_queues=len(self._events), notifications=self._notifications,
                              waiting=dict(self._parked))

    @contextmanager
    def parked(self, queue: str | None) -> Iterator[None]:
        """Counts a long poll as parked on its queue (None: any queue) while the block runs:
        from its first empty look until it answers, its re-checks included (a count taken while
        it re-checks would otherwise miss it)."""
        key = ANY_QUEUE if queue is None else queue
        self._parked[key] = self._parked.get(key, 0) + 1
        try:
            yield
        finally:
            left = self._parked[key] - 1
            if left:
                self._parked[key] = left
            else:
                del self._parked[key]

    @contextmanager
    def watch(self, queue: str | None) -> Iterator[trio.Event]:
        """The event a waiter should capture before it looks (None: any queue), held for as
        long as the block runs."""
        if queue is None:
            yield self._any
            return
        event = self._events.get(queue)
        if event is None:
            event = self._events[queue] = trio.Event()
        self._watchers[queue] = self._watchers.get(queue, 0) + 1
        try:
            yield event
        finally:
            left = self._watchers[queue] - 1
            if left:
                self._watchers[queue] = left
            else:
                del self._watchers[queue]
                self._events.pop(queue, None)

    def forget_all(self) -> None:
        """Wake every waiter (to re-check) and drop every queue's event (a test broker's
        reset: the queues are gone)."""
        for event in self._events.values():
            event.set()
        self._events.clear()
        self._any.set()
        self._any = trio.Event()

    def notify(self, queue: str) -> None:
        self._notifications += 1
        event = self._events.pop(queue, None)
        if event is not None:
            event.set()
        self._any.set()
        self._any = trio.Event()


class NotifyListener:
    """Holds one LISTEN connection and feeds notifications into the registry; reconnects."""

    def __init__(self, registry: WakeRegistry, url: str, *, retry_seconds: float = 1.0) -> None:
        self._registry = registry
        self._url = url
        self._retry = retry_seconds
        self._connected = False
        self._received = 0
        self._connections = 0

    def statistics(self) -> ListenerStatistics:
        return ListenerStatistics(connected=self._connected, notifications=self._received,
                                  reconnects=max(self._connections - 1, 0))

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        # Runs as an asyncio callback on trio-asyncio's loop, in trio's thread.
        self._received += 1
        self._registry.notify(payload)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            conn = None
            lost = trio.Event()
            try:
                conn = await trio_asyncio.aio_as_trio(asyncpg.connect)(
                    self._url, server_settings={"application_name": "queen-trio-listen"})
                conn.add_termination_listener(lambda _conn, lost=lost: lost.set())
                await trio_asyncio.aio_as_trio(conn.add_listener)(CHANNEL, self._on_notify)
                self._connected = True
                self._connections += 1
                if not started:
                    task_status.started()
                    started = True
                await lost.wait()
                log.warning("LISTEN connection lost; long polls rely on re-checks until it is back")
            except Exception as exc:
                # Logged once at boot and when the connection drops, not once per retry; a
                # server that cannot be reached at all is said by the database's own line.
                quiet = started or isinstance(exc, (OSError, asyncio.TimeoutError, TimeoutError))
                log.log(logging.DEBUG if quiet else logging.WARNING,
                        "LISTEN connection unavailable; long polls rely on re-checks",
                        extra={"error": str(exc)})
                if not started:
                    # Boot does not wait for it: the backoff re-checks cover the gap.
                    task_status.started()
                    started = True
            finally:
                self._connected = False
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            await trio.sleep(self._retry)
