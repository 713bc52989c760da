"""Who owns the rings: one broker process per database (docs/decisions.md#ephemeral-owner).

Every process is a member: it keeps one PostgreSQL session of its own, on which it writes a
heartbeat (its id, the address its peers reach it at, a secret its forwards carry) and tries
the owner's advisory lock. The process whose session holds the lock owns every ephemeral
ring; the others forward to it. When the owner dies, its session ends, the lock is free, and
the next member to try takes it: a new incarnation with empty rings.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import attrs
import trio
import trio_asyncio

from ..storage.sql import Q

log = logging.getLogger("queen_trio.ephemeral")

# pg_try_advisory_lock's key: "QEPHEMER" read as a big-endian number.
LOCK_KEY = 0x5145_5048_454D_4552
# A member silent this long is forgotten (its forwards are refused from then on).
FORGET_SECONDS = 60.0


@attrs.frozen
class OwnerInfo:
    member_id: str
    address: str | None
    incarnation: str
    since: Any


class Ownership:
    """The member's session: heartbeats, the owner's lock, and who owns the rings now."""

    def __init__(self, url: str, member_id: str, address: str | None, *,
                 interval: float, on_gain: Callable[[str], Awaitable[None]],
                 on_loss: Callable[[], None]) -> None:
        self.url = url
        self.member_id = member_id
        self.address = address
        self.secret = secrets.token_hex(16)
        self.interval = interval
        self.owner = False
        self.incarnation = ""
        self._on_gain = on_gain
        self._on_loss = on_loss
        self._poke = trio.Event()
        self._beat = trio.Event()  # set after each heartbeat
        self.gains = 0
        self.losses = 0

    def poke(self) -> None:
        """Try the lock now (a forward found the owner gone)."""
        self._poke.set()

    async def next_beat(self) -> None:
        await self._beat.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        started = False
        while True:
            conn = None
            try:
                conn = await trio_asyncio.aio_as_trio(asyncpg.connect)(
                    self.url, server_settings={"application_name": "queen-trio-ephemeral"})
                # A session that ends has let the lock go: say so now, not at the next beat.
                lost = trio.Event()

                def ended(_conn: object, lost: trio.Event = lost) -> None:
                    lost.set()
                    self.poke()

                conn.add_termination_listener(ended)
                while True:
                    if lost.is_set():
                        raise ConnectionError("the membership session ended")
                    await self._beat_once(conn)
                    if not started:
                        task_status.started()
                        started = True
                    with trio.move_on_after(self.interval):
                        await self._poke.wait()
                    self._poke = trio.Event()
                    if lost.is_set():
                        raise ConnectionError("the membership session ended")
            except Exception as exc:
                # An unreachable database is said once by the database's own line
                # (docs/decisions.md#a-database-that-cannot-be-reached); anything else at
                # start is a warning.
                quiet = started or isinstance(exc, OSError)
                log.log(logging.DEBUG if quiet else logging.WARNING,
                        "ephemeral membership session unavailable", extra={"error": str(exc)})
                if not started:
                    task_status.started()
                    started = True
            except trio.Cancelled:
                self.owner = False  # stopping: the session's end frees the lock
                raise
            finally:
                if self.owner:
                    self._lose()
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            await trio.sleep(self.interval)

    async def _beat_once(self, conn: asyncpg.Connection) -> None:
        async def beat() -> bool:
            await Q.ephemeral_heartbeat.execute(
                conn, member_id=self.member_id, address=self.address, secret=self.secret,
                forget_seconds=FORGET_SECONDS)
            if self.owner:
                await self._claim(conn)
                return False
            got = bool(await Q.ephemeral_try_own.fetchval(conn, lock_key=LOCK_KEY))
            if got:
                self.incarnation = secrets.token_hex(8)
                await self._claim(conn)
            return got

        gained = await trio_asyncio.aio_as_trio(beat)()
        if gained:
            self.owner = True
            self.gains += 1
            log.info("this process now owns the ephemeral queues",
                     extra={"member": self.member_id, "incarnation": self.incarnation})
            await self._on_gain(self.incarnation)
        self._beat.set()
        self._beat = trio.Event()

    async def _claim(self, conn: asyncpg.Connection) -> None:
        # Written again every beat: a row emptied by a reset comes back.
        await Q.ephemeral_claim.execute(conn, member_id=self.member_id, address=self.address,
                                        incarnation=self.incarnation)

    def _lose(self) -> None:
        self.owner = False
        self.losses += 1
        log.warning("this process lost the ephemeral owner's lock; its rings are dropped",
                    extra={"member": self.member_id})
        self._on_loss()

    async def leave(self, db_execute: Callable[[], Awaitable[Any]]) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            try:
                await db_execute()
            except Exception:
                log.debug("could not remove this member's row", exc_info=True)
