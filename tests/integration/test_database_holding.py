"""A task that holds its pool connection between calls (storage/database.py, `holding`)."""

from __future__ import annotations

from functools import partial

import asyncpg
import pytest
import trio

from queen_trio.errors import DatabaseUnavailable
from queen_trio.storage.database import UNHELD_CONNECTIONS, Database, open_database


async def backend_pid(db: Database) -> int:
    return int(await db.call(lambda conn: conn.fetchval("SELECT pg_backend_pid()")))


async def test_a_holder_makes_every_call_on_one_connection_and_gives_it_back(database_url):
    async with open_database(database_url, pool_size=4) as db:
        async with db.holding() as hold:
            pids = {await backend_pid(db) for _ in range(5)}
            assert len(pids) == 1
            assert hold.holding and db.statistics().held == 1
            # Held, it is not idle in the pool.
            assert db.statistics().pool_idle == db.statistics().pool_size - 1
            await hold.let_go()
            assert not hold.holding and db.statistics().held == 0
            assert db.statistics().pool_idle == db.statistics().pool_size
            # The next call takes one again.
            await backend_pid(db)
            assert hold.holding
        # Leaving the block gives it back.
        assert db.statistics().held == 0
        assert db.statistics().pool_idle == db.statistics().pool_size


async def test_holders_leave_unheld_connections_for_every_other_call(database_url):
    async with open_database(database_url, pool_size=UNHELD_CONNECTIONS + 1) as db:
        first_holds = trio.Event()
        done = trio.Event()
        seen: dict[str, bool] = {}

        async def holder(name: str, *, stay: bool) -> None:
            async with db.holding() as hold:
                await backend_pid(db)
                seen[name] = hold.holding
                if stay:
                    first_holds.set()
                    await done.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(holder, "first", stay=True))
            await first_holds.wait()
            # Over the budget, a second holder's calls check out one by one.
            await holder("second", stay=False)
            assert db.statistics().held == 1
            # And plain calls still find a connection at once.
            with trio.fail_after(5):
                await backend_pid(db)
            done.set()
        assert seen == {"first": True, "second": False}
        assert db.statistics().held == 0


async def test_a_failed_call_gives_the_held_connection_back(database_url):
    async with open_database(database_url, pool_size=4) as db:
        async with db.holding() as hold:
            await backend_pid(db)
            with pytest.raises(asyncpg.UndefinedTableError):
                await db.call(lambda conn: conn.fetch("SELECT * FROM no_such_table"))
            assert not hold.holding and db.statistics().held == 0
            assert await db.call(lambda conn: conn.fetchval("SELECT 1")) == 1
            assert hold.holding


async def test_a_held_connection_whose_backend_went_away_is_replaced(database_url):
    async with open_database(database_url, pool_size=4) as db:
        async with db.holding():
            first = await backend_pid(db)
        async with db.holding():
            held = await backend_pid(db)
            async with open_database(database_url, pool_size=2,
                                     apply_migrations=False) as other:
                await other.call(lambda conn: conn.execute(
                    "SELECT pg_terminate_backend($1)", held))
            # The held connection sees its end of file; the next call takes another one.
            with trio.fail_after(10):
                while True:
                    try:
                        if await backend_pid(db) != held:
                            break
                    except DatabaseUnavailable:
                        pass  # the call raced the close: it fails as any call would
                    await trio.sleep(0.05)
        assert first > 0
        assert db.statistics().held == 0


async def test_tasks_started_by_a_holder_never_share_its_connection(database_url):
    async with open_database(database_url, pool_size=6) as db:
        async with db.holding():
            mine = await backend_pid(db)
            theirs: list[int] = []

            async def child() -> None:
                # Two at once on one connection would fail ("another operation is in
                # progress"): each child checks its own out.
                theirs.append(int(await db.call(
                    lambda conn: conn.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.2)"))))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(child)
                nursery.start_soon(child)
            assert len(set(theirs)) == 2 and mine not in theirs
