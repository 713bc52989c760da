"""Upgrades in place: a database built by migrations 1..k, holding data, upgraded to the latest,
has the schema of a fresh build (`pg_dump --schema-only`), keeps its data, and works.

Shipped migrations are never edited, so every k is an upgrade path some data directory takes.
"""

from __future__ import annotations

import asyncio
import difflib
import subprocess
import uuid

import asyncpg
import pytest

from queen_trio.push.bundle import Segment, bundle_arguments
from queen_trio.storage.database import apply_migrations
from queen_trio.storage.embedded import find_bin_dir
from queen_trio.storage.sql import Q, migrations
from tests.support import segments
from tests.support.lanes import packed_group

VERSIONS = [version for version, _ in migrations()]
# From the first migration that can take a push (0003, queen.push_bundle) to the last but one.
EARLIER = [v for v in VERSIONS[:-1] if v >= "0003"]
QUEUE = "shop.orders"
LEASE = uuid.UUID("0190a8f2-8b7c-7def-8123-456789abcdef")


def schema_of(url: str) -> str:
    """The schema as pg_dump prints it, without the per-run `\\restrict` keys."""
    done = subprocess.run(
        [str(find_bin_dir() / "pg_dump"), "--schema-only", "--no-owner", "--no-privileges",
         "--dbname", url], check=True, capture_output=True, text=True, timeout=60)
    return "".join(line for line in done.stdout.splitlines(keepends=True)
                   if not line.startswith(("\\restrict", "\\unrestrict")))


def assert_same_schema(upgraded: str, fresh: str) -> None:
    diff = "".join(difflib.unified_diff(fresh.splitlines(keepends=True),
                                        upgraded.splitlines(keepends=True),
                                        "fresh build", "upgraded"))
    assert not diff, diff


def bundle(*groups) -> dict:
    return bundle_arguments([Segment.fuse([g]) for g in groups], check_max_size=True)


async def build_and_fill(url: str, up_to: str) -> dict[str, list[tuple[str, bytes]]]:
    """Migrations 1..up_to, then what a broker of that version stores; what was pushed."""
    conn = await asyncpg.connect(url)
    try:
        assert await apply_migrations(conn, up_to=up_to) == VERSIONS[:VERSIONS.index(up_to) + 1]
        rows = await Q.push_bundle.fetch(conn, **bundle(
            packed_group("order-1", "order-2", queue=QUEUE, partition="p1"),
            packed_group("order-3", queue=QUEUE, partition="p2")))
        assert sorted(r["outcome"] for r in rows) == ["queued", "queued"]
        await conn.execute("UPDATE queen.queues SET lease_time = 120, configured = true, "
                           "explicit_options = '{\"leaseTime\": 120}' WHERE name = $1", QUEUE)
        if up_to >= "0004":
            # A consumer group holding a lease on p1's first message.
            claimed = await Q.pop_claim.fetch(
                conn, queue=QUEUE, partition="p1", consumer_group="g1", batch=1,
                max_partitions=1, lease_id=LEASE, auto_ack=False, start_mode="all",
                start_from=None)
            assert [r["take_frames"] for r in claimed] == [1]
        return await stored(conn)
    finally:
        await conn.close()


async def stored(conn: asyncpg.Connection) -> dict[str, list[tuple[str, bytes]]]:
    rows = await conn.fetch(
        "SELECT p.name, s.frames FROM queen.segments s "
        "JOIN queen.partitions p ON p.id = s.partition_id "
        "JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1 "
        "ORDER BY p.name, s.first_offset", QUEUE)
    messages: dict[str, list[tuple[str, bytes]]] = {}
    for row in rows:
        messages.setdefault(row["name"], []).extend(
            (f.transaction_id, f.payload) for f in segments.unpack(row["frames"]))
    return messages


async def upgrade_and_check(url: str, up_to: str, before: dict) -> None:
    conn = await asyncpg.connect(url)
    try:
        later = VERSIONS[VERSIONS.index(up_to) + 1:]
        assert await apply_migrations(conn) == later
        assert await apply_migrations(conn) == []
        # The data survived ...
        assert await stored(conn) == before == {
            "p1": [("order-1", b"order-1"), ("order-2", b"order-2")],
            "p2": [("order-3", b"order-3")]}
        queue = await conn.fetchrow("SELECT lease_time, explicit_options::text AS explicit "
                                    "FROM queen.queues WHERE name = $1", QUEUE)
        assert (queue["lease_time"], queue["explicit"]) == (120, '{"leaseTime": 120}')
        if up_to >= "0004":
            lease = await conn.fetchrow(
                "SELECT cs.lease_id, cs.cursor_offset, cs.delivered_until "
                "FROM queen.consumer_state cs JOIN queen.partitions p ON p.id = cs.partition_id "
                "WHERE p.name = 'p1' AND cs.consumer_group = 'g1'")
            assert tuple(lease) == (LEASE, 0, 1)
        # ... and the upgraded schema serves it: the dedup index still knows the ids, and a
        # new group gets every message.
        rows = await Q.push_bundle.fetch(conn, **bundle(
            packed_group("order-1", "order-4", queue=QUEUE, partition="p1")))
        assert sorted((r["outcome"], r["ref_offset"]) for r in rows) == [
            ("duplicate", 0), ("queued", 2)]
        claimed = await Q.pop_claim.fetch(
            conn, queue=QUEUE, partition=None, consumer_group="g2", batch=10,
            max_partitions=10, lease_id=uuid.uuid4(), auto_ack=True, start_mode="all",
            start_from=None)
        delivered = sorted(f.transaction_id for r in claimed
                           for f in segments.unpack(r["frames"]))
        assert delivered == ["order-1", "order-2", "order-3", "order-4"]
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def fresh_schema(module_database_url: str) -> str:
    schema = schema_of(module_database_url)
    assert "CREATE FUNCTION queen.push_bundle(" in schema and "CREATE TYPE queen.claim_row" in schema
    return schema


@pytest.mark.parametrize("up_to", EARLIER)
def test_an_upgraded_database_has_the_fresh_schema_and_keeps_its_data(
        empty_database_url, fresh_schema, up_to):
    before = asyncio.run(build_and_fill(empty_database_url, up_to))
    asyncio.run(upgrade_and_check(empty_database_url, up_to, before))
    assert_same_schema(schema_of(empty_database_url), fresh_schema)


def test_the_schema_comparison_sees_a_difference(empty_database_url, fresh_schema):
    async def almost() -> None:
        conn = await asyncpg.connect(empty_database_url)
        try:
            await apply_migrations(conn)
            await conn.execute("CREATE INDEX stray ON queen.segments (created_at)")
        finally:
            await conn.close()

    asyncio.run(almost())
    with pytest.raises(AssertionError, match=r"\+CREATE INDEX stray"):
        assert_same_schema(schema_of(empty_database_url), fresh_schema)
