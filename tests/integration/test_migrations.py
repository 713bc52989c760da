"""Upgrades in place. A database built by the 17 migrations shipped before the squash
(tests/fixtures/migrations-0017, kept unchanged), holding data, is recorded as at the baseline,
gets this broker's functions, views and triggers, has the schema of a fresh build
(`pg_dump --schema-only`), keeps its data, and works. A database at an older migration, or at
one this broker does not know, is refused with one line.
"""

from __future__ import annotations

import asyncio
import difflib
import subprocess
import uuid
from pathlib import Path

import asyncpg
import pytest

from queen_trio.errors import SchemaError
from queen_trio.push.bundle import Segment, bundle_arguments
from queen_trio.storage.embedded import find_bin_dir
from queen_trio.storage.schema import BASELINE, SQUASHED, apply_migrations
from queen_trio.storage.sql import Q, migrations
from tests.support import segments
from tests.support.lanes import packed_group

SHIPPED = sorted((Path(__file__).parent.parent / "fixtures" / "migrations-0017").glob("*.sql"))
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


async def run_shipped(conn: asyncpg.Connection, files: list[Path]) -> None:
    """What a broker of that version did at its start: each migration and its ledger row."""
    await Q.migration_bootstrap.execute(conn)
    for path in files:
        async with conn.transaction():
            await conn.execute(path.read_text(encoding="utf-8"))
            await Q.migration_record.execute(conn, version=path.stem)


async def build_0017_and_fill(url: str) -> dict[str, list[tuple[str, bytes]]]:
    """A database at 0017, holding what a broker of that version stored; what was pushed."""
    conn = await asyncpg.connect(url)
    try:
        await run_shipped(conn, SHIPPED)
        rows = await Q.push_bundle.fetch(conn, **bundle(
            packed_group("order-1", "order-2", queue=QUEUE, partition="p1"),
            packed_group("order-3", queue=QUEUE, partition="p2")))
        assert sorted(r["outcome"] for r in rows) == ["queued", "queued"]
        await conn.execute("UPDATE queen.queues SET lease_time = 120, configured = true, "
                           "explicit_options = '{\"leaseTime\": 120}' WHERE name = $1", QUEUE)
        # A consumer group holding a lease on p1's first message.
        # The claim as that version's broker called it (its pop_claim had nine parameters).
        claimed = await conn.fetch(
            "SELECT * FROM queen.pop_claim($1, 'p1', 'g1', 1, 1, $2, false, 'all', NULL)",
            QUEUE, LEASE)
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


async def upgrade_and_check(url: str, before: dict) -> None:
    conn = await asyncpg.connect(url)
    try:
        later = [v for v, _ in migrations() if v != BASELINE]
        assert await apply_migrations(conn) == later  # the baseline is recorded, not run
        assert await apply_migrations(conn) == []
        ledger = {r["version"] for r in await conn.fetch(
            "SELECT version FROM queen.schema_migrations")}
        assert ledger == {*SQUASHED, *(v for v, _ in migrations())}
        # The data survived ...
        assert await stored(conn) == before == {
            "p1": [("order-1", b"order-1"), ("order-2", b"order-2")],
            "p2": [("order-3", b"order-3")]}
        queue = await conn.fetchrow("SELECT lease_time, explicit_options::text AS explicit "
                                    "FROM queen.queues WHERE name = $1", QUEUE)
        assert (queue["lease_time"], queue["explicit"]) == (120, '{"leaseTime": 120}')
        lease = await conn.fetchrow(
            "SELECT cs.lease_id, cs.cursor_offset, cs.delivered_until "
            "FROM queen.consumer_state cs JOIN queen.partitions p ON p.id = cs.partition_id "
            "WHERE p.name = 'p1' AND cs.consumer_group = 'g1'")
        assert tuple(lease) == (LEASE, 0, 1)
        # Its partitions are named (migration 0013, filled by triggers/partitions_named).
        named = await conn.fetch(
            "SELECT p.name FROM queen.partitions p JOIN queen.partition_names n "
            "ON (n.id, n.queue_id, n.name) = (p.id, p.queue_id, p.name) ORDER BY p.name")
        assert [r["name"] for r in named] == ["p1", "p2"]
        # ... and the upgraded schema serves it: the dedup index still knows the ids, and a
        # new group gets every message.
        rows = await Q.push_bundle.fetch(conn, **bundle(
            packed_group("order-1", "order-4", queue=QUEUE, partition="p1")))
        assert sorted((r["outcome"], r["ref_offset"]) for r in rows) == [
            ("duplicate", 0), ("queued", 2)]
        claimed = await Q.pop_claim.fetch(
            conn, queue=QUEUE, partition=None, consumer_group="g2", batch=10,
            max_partitions=10, lease_id=uuid.uuid4(), auto_ack=True, start_mode="all",
            start_from=None, conflation=None)
        delivered = sorted(f.transaction_id for r in claimed
                           for f in segments.unpack(r["frames"]))
        assert delivered == ["order-1", "order-2", "order-3", "order-4"]
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def fresh_schema(module_database_url: str) -> str:
    schema = schema_of(module_database_url)
    assert "CREATE FUNCTION queen.push_bundle(" in schema and "CREATE TYPE queen.claim_row" in schema
    assert "CREATE TRIGGER consumer_state_consumed" in schema
    return schema


def test_the_shipped_migrations_are_the_squashed_ones():
    assert tuple(path.stem for path in SHIPPED) == SQUASHED


def test_a_database_at_0017_upgrades_to_the_fresh_schema_and_keeps_its_data(
        empty_database_url, fresh_schema):
    before = asyncio.run(build_0017_and_fill(empty_database_url))
    asyncio.run(upgrade_and_check(empty_database_url, before))
    assert_same_schema(schema_of(empty_database_url), fresh_schema)


def test_a_database_older_than_0017_is_refused_untouched(empty_database_url):
    async def check() -> None:
        conn = await asyncpg.connect(empty_database_url)
        try:
            await run_shipped(conn, SHIPPED[:12])
            with pytest.raises(SchemaError) as refused:
                await apply_migrations(conn)
            assert str(refused.value) == (
                "the database's schema is at migration 0012_message_frame, older than "
                "0017_push_bundle_generic_plans, the oldest this broker upgrades: start "
                "queen-trio 52efb6a on it once (it migrates to 0017), then this broker")
            assert "\n" not in str(refused.value)
            assert await conn.fetchval("SELECT count(*) FROM queen.schema_migrations") == 12
            assert await conn.fetchval("SELECT count(*) FROM queen.schema_objects") == 0
            # The database is as that broker left it (0014's count_consumption is not there yet).
            assert await conn.fetchval(
                "SELECT count(*) FROM pg_proc WHERE proname = 'count_consumption'") == 0
        finally:
            await conn.close()

    asyncio.run(check())


def test_a_database_migrated_by_a_newer_broker_is_refused(empty_database_url):
    async def check() -> None:
        conn = await asyncpg.connect(empty_database_url)
        try:
            await apply_migrations(conn)
            await Q.migration_record.execute(conn, version="9999_from_the_future")
            with pytest.raises(SchemaError, match=r"at migration 9999_from_the_future, newer "
                                                  r"than this broker's \d{4}_\w+: run the newer"):
                await apply_migrations(conn)
        finally:
            await conn.close()

    asyncio.run(check())


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
