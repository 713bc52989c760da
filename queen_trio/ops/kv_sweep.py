"""The KV expiry sweeper: elected maintenance (one broker at a time, `run_exclusive`) that
deletes expired rows in small SKIP LOCKED batches, with its clock as a SQL parameter (the
database's). Correctness never depends on it: an expired row counts as absent everywhere.
Each pass also reads the live rows and permits for the metrics, whoever swept."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import asyncpg

from ..kv.store import KvStore
from ..storage.sql import Q
from .maintenance import PeriodicService, run_exclusive

KV_SWEEP_LOCK_KEY = 0x51_75_65_65_6E_4B
SWEEP_BATCH = 500
# Batches per pass at most: a pass stays short; what is left waits for the next one.
SWEEP_BATCHES = 20


async def sweep_expired(store: KvStore, *, now: dt.datetime | None = None,
                        wait: bool = False) -> int | None:
    """Delete rows expired at `now` (the database's clock when None); the number deleted,
    None when another broker had the turn."""
    async def work(conn: asyncpg.Connection) -> int:
        at = now if now is not None else await Q.database_clock.fetchval(conn)
        return int(await Q.kv_sweep.fetchval(conn, now=at, batch=SWEEP_BATCH))

    total = 0
    for _ in range(SWEEP_BATCHES):
        swept = await run_exclusive(store.db, KV_SWEEP_LOCK_KEY, work, wait=wait)
        if swept is None:
            return None if total == 0 else total
        total += swept
        if swept < SWEEP_BATCH:
            break
    return total


class KvSweeper(PeriodicService):
    name = "kv sweep"

    def __init__(self, store: KvStore, *, interval: float) -> None:
        super().__init__(interval)
        self._store = store

    async def pass_once(self) -> Mapping[str, int] | None:
        swept = await sweep_expired(self._store)
        await self._store.read_figures()
        return None if swept is None else {"kv_rows_expired": swept}
