"""Ad-hoc SQL from tests, through the broker's own pool (one bridge crossing per call)."""

from __future__ import annotations

from typing import Any

from queen_trio.storage.database import Database


async def db_fetch(db: Database, text: str, *args: Any) -> list[Any]:
    return await db.call(lambda conn: conn.fetch(text, *args))


async def db_fetchrow(db: Database, text: str, *args: Any) -> Any:
    return await db.call(lambda conn: conn.fetchrow(text, *args))


async def db_fetchval(db: Database, text: str, *args: Any) -> Any:
    return await db.call(lambda conn: conn.fetchval(text, *args))


async def db_execute(db: Database, text: str, *args: Any) -> str:
    return await db.call(lambda conn: conn.execute(text, *args))


def query_once(url: str, query: str = "SELECT current_user") -> Any:
    """One query on a fresh connection, no password file consulted (asyncio.run: call it from
    a sync test or a worker thread)."""
    import asyncio

    import asyncpg

    async def run() -> Any:
        conn = await asyncpg.connect(url, passfile="/nonexistent")
        try:
            return await conn.fetchval(query)
        finally:
            await conn.close()

    return asyncio.run(run())
