"""Whole databases on a server: create one (from a template), rename one, drop one, ask
for one.

These statements take no parameters and run outside any transaction, so PostgreSQL builds
each one (quoting the names: `format('%I')`) from a named query, and it runs on its own.
Each function takes a connection (`db.call(lambda conn: ...)`), so a caller can run several
under one session lock. Used by the template cache and the test broker.
"""

from __future__ import annotations

from typing import Any

from ..storage.sql import Q


async def create_database(conn: Any, name: str, *, template: str = "template1",
                          strategy: str | None = None) -> None:
    """`strategy` "file_copy": copy the files, not every block through the WAL (a
    throwaway cluster's template: less WAL to keep and copy)."""
    statement = await Q.create_database_statement.fetchval(conn, database=name,
                                                           template=template,
                                                           strategy=strategy)
    await conn.execute(statement)


async def rename_database(conn: Any, name: str, new_name: str) -> None:
    statement = await Q.rename_database_statement.fetchval(conn, database=name,
                                                           new_name=new_name)
    await conn.execute(statement)


async def drop_database(conn: Any, name: str) -> None:
    """Drop it, closing its sessions first; nothing if it does not exist."""
    statement = await Q.drop_database_statement.fetchval(conn, database=name)
    await conn.execute(statement)


async def database_exists(conn: Any, name: str) -> bool:
    return bool(await Q.database_exists.fetchval(conn, database=name))
