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
