"""Cut a test database off, as an outage would, and bring it back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import trio_asyncio


async def execute_statements(url: str, *statements: str) -> None:
    """Run statements on one connection (asyncio: asyncio.run it, or cross from trio)."""
    conn = await asyncpg.connect(url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def admin_execute(admin_url: str, *statements: str) -> None:
    """Run statements on the server's admin database (needs a trio-asyncio loop)."""
    await trio_asyncio.aio_as_trio(execute_statements)(admin_url, *statements)


@asynccontextmanager
async def database_cut_off(admin_url: str, database_url: str) -> AsyncIterator[None]:
    """While inside, the database refuses connections and its sessions are terminated."""
    name = database_url.rsplit("/", 1)[1]
    async with trio_asyncio.open_loop():
        await admin_execute(
            admin_url, f"ALTER DATABASE {name} ALLOW_CONNECTIONS false",
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
        try:
            yield
        finally:
            await admin_execute(admin_url, f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
