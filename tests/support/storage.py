"""Read what a push stored, straight from the storage layer."""

from __future__ import annotations

import datetime as dt
import uuid

import attrs

from queen_trio.storage.database import Database
from tests.support.db import db_fetch, db_fetchval
from tests.support.segments import Frame, unpack


@attrs.frozen
class StoredMessage:
    offset: int
    created_at: dt.datetime
    frame: Frame


async def partition_id(db: Database, queue: str, name: str) -> uuid.UUID | None:
    """The id of `queue`'s partition `name` (None: there is none)."""
    return await db_fetchval(db,
        "SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id "
        "WHERE q.name = $1 AND p.name = $2", queue, name)


async def stored_messages(db: Database, queue: str, partition: str = "Default") -> list[StoredMessage]:
    rows = await db_fetch(db,
        """SELECT s.first_offset, s.created_at, s.frames
             FROM queen.segments s
             JOIN queen.partitions p ON p.id = s.partition_id
             JOIN queen.queues q ON q.id = p.queue_id
            WHERE q.name = $1 AND p.name = $2
            ORDER BY s.first_offset""",
        queue, partition,
    )
    out: list[StoredMessage] = []
    for row in rows:
        for i, frame in enumerate(unpack(row["frames"])):
            out.append(StoredMessage(row["first_offset"] + i, row["created_at"], frame))
    return out


async def stored_at(url: str, queue: str) -> list[tuple[str, str, bool, bytes]]:
    """(partition, transaction id, encrypted, payload) of every stored message of `queue`,
    by partition in offset order, read on a connection of its own (no broker needed)."""
    import asyncpg
    import trio_asyncio

    async def run() -> list:
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetch(
                "SELECT p.name, s.frames FROM queen.segments s "
                "JOIN queen.partitions p ON p.id = s.partition_id "
                "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1 "
                "ORDER BY p.name, s.first_offset", queue)
        finally:
            await conn.close()

    async with trio_asyncio.open_loop():
        rows = await trio_asyncio.aio_as_trio(run)()
    return [(r["name"], f.transaction_id, f.encrypted, f.payload)
            for r in rows for f in unpack(r["frames"])]


def push_body(*items: dict) -> dict:
    return {"items": list(items)}


# A trigger that makes every segment of the partition named 'poison' fail to insert.
POISON_TRIGGER = """
CREATE FUNCTION queen.test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT name FROM queen.partitions WHERE id = NEW.partition_id) = 'poison' THEN
        RAISE EXCEPTION 'poisoned partition';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_poison BEFORE INSERT ON queen.segments
    FOR EACH ROW EXECUTE FUNCTION queen.test_poison();
"""
