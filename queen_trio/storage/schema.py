"""The schema a broker needs: its migrations, then its functions, views and triggers.

`migrate` runs at every start, under one advisory lock, so brokers that start together take
turns (the second finds nothing to do). Inside the lock:

1. the migrations ledger (`queen.schema_migrations`) is read and each migration not applied
   yet runs in its own transaction. Migrations hold what cannot be re-run: tables, columns,
   indexes, types, data moves. 0001 is the baseline that squashed 0001 to 0017; a database
   whose ledger holds 0017 is recorded as at the baseline without running it, and one at an
   older migration is refused;
2. the functions, views and triggers whose file changed are installed, in one transaction
   (`install_objects`), and those whose file is gone, or that objects.txt retires, are
   dropped. Each object's digest is
   kept in `queen.schema_objects`, so an unchanged file costs nothing. A broker whose set is
   of a lower generation than the installed one refuses to start: during a rolling upgrade
   an older broker never puts back what a newer one replaced.
"""

from __future__ import annotations

import logging

import asyncpg
import attrs
import trio_asyncio

from ..errors import SchemaError
from .sql import OBJECT_KINDS, ObjectSet, Q, SqlObject, migrations, sql_objects

log = logging.getLogger("queen_trio.database")

MIGRATION_LOCK_KEY = 0x51_75_65_65_6E_00  # "Queen\0": serialises migrations across brokers
BASELINE = "0001_baseline"
# The migrations squashed into the baseline, as their ledger rows name them. They stay in the
# ledger of a database that ran them (brokers older than the squash read them there).
SQUASHED = (
    "0001_schema", "0002_consumers", "0003_push_bundle", "0004_consumption", "0005_pop_many",
    "0006_traces", "0007_retention", "0008_spool", "0009_claim_row", "0010_claim_delivery",
    "0011_duplicate_ids", "0012_message_frame", "0013_push_bundle_fast_path",
    "0014_operations", "0015_message_delete_and_retry", "0016_retry_and_delete_fixes",
    "0017_push_bundle_generic_plans",
)
# The last commit whose broker carries those migrations: it upgrades an older database to 0017.
SQUASHED_AT_COMMIT = "52efb6a"

# What CREATE OR REPLACE cannot change in place: a function's result type or parameter names
# (42P13), a view's columns (42P16). Those are installed by DROP, then CREATE.
_NOT_REPLACEABLE = (asyncpg.InvalidFunctionDefinitionError, asyncpg.InvalidTableDefinitionError)
_DROP = {"function": "DROP FUNCTION", "view": "DROP VIEW", "trigger": "DROP TRIGGER"}


async def migrate(url: str) -> list[str]:
    """Bring the database at `url` to this broker's schema; the migrations applied."""

    async def run() -> list[str]:
        conn = await asyncpg.connect(url, timeout=5)
        try:
            return await apply_migrations(conn)
        finally:
            await conn.close()

    applied: list[str] = await trio_asyncio.aio_as_trio(run)()  # trio-asyncio has no types
    return applied


async def apply_migrations(conn: asyncpg.Connection, *,
                           objects: ObjectSet | None = None) -> list[str]:
    """The migrations not applied yet, then the objects whose text changed (`objects`: this
    broker's set unless a test gives another); the migrations applied."""
    await Q.migration_lock.execute(conn, lock_key=MIGRATION_LOCK_KEY)
    try:
        await Q.migration_bootstrap.execute(conn)
        applied: list[str] = []
        for version, text in await _pending(conn):
            async with conn.transaction():
                await conn.execute(text)
                await Q.migration_record.execute(conn, version=version)
            applied.append(version)
        change = await install_objects(conn, objects or sql_objects())
        if change.installed or change.dropped:
            log.info("schema objects installed", extra={
                "generation": change.generation, "installed": change.installed,
                "dropped": change.dropped})
        return applied
    finally:
        await Q.migration_unlock.execute(conn, lock_key=MIGRATION_LOCK_KEY)


async def _pending(conn: asyncpg.Connection) -> list[tuple[str, str]]:
    """This broker's migrations that the ledger does not hold; a SchemaError for a database
    this broker cannot serve (older than 0017, or migrated by a newer broker)."""
    done = {row["version"] for row in await Q.migrations_applied.fetch(conn)}
    ours = migrations()
    if done and BASELINE not in done:
        if SQUASHED[-1] not in done:
            raise SchemaError(
                f"the database's schema is at migration {max(done)}, older than {SQUASHED[-1]},"
                f" the oldest this broker upgrades: start queen-trio {SQUASHED_AT_COMMIT} on it "
                "once (it migrates to 0017), then this broker")
        async with conn.transaction():  # the squashed migrations are the baseline
            await Q.migration_record.execute(conn, version=BASELINE)
        done.add(BASELINE)
    newer = sorted(done - {version for version, _ in ours} - set(SQUASHED))
    if newer:
        raise SchemaError(f"the database's schema is at migration {newer[-1]}, newer than this "
                          f"broker's {ours[-1][0]}: run the newer queen-trio")
    return [(version, text) for version, text in ours if version not in done]


@attrs.frozen
class ObjectChange:
    """What `install_objects` did: the objects (re)created and the identities dropped."""

    generation: int
    installed: list[str]
    dropped: list[str]


async def install_objects(conn: asyncpg.Connection, objects: ObjectSet) -> ObjectChange:
    """Install the objects of `objects` whose text differs from the installed one's, and drop
    those it no longer lists, in one transaction; the caller holds the migration lock."""
    async with conn.transaction():
        current = await Q.schema_object_set.fetchrow(conn)
        if current is not None:
            if current["generation"] > objects.generation:
                raise SchemaError(
                    f"the database's functions, views and triggers are of generation "
                    f"{current['generation']}, newer than this broker's {objects.generation}: "
                    "a newer queen-trio installed them; run that version")
            if current["digest"] == objects.digest:
                return ObjectChange(objects.generation, [], [])
        recorded = {row["name"]: row for row in await Q.schema_objects_recorded.fetch(conn)}
        installer = _Installer(conn, recorded, {obj.name for obj in objects.objects})
        await installer.apply(objects)
        await Q.schema_object_set_record.execute(conn, generation=objects.generation,
                                                 digest=objects.digest)
        return ObjectChange(objects.generation, installer.installed, installer.dropped)


@attrs.define
class _Installer:
    """One install: drops before creates, dependents dropped with what they depend on and
    created again after it (the manifest lists every object after its dependencies)."""

    conn: asyncpg.Connection
    recorded: dict[str, asyncpg.Record]
    listed: set[str]
    installed: list[str] = attrs.Factory(list)
    dropped: list[str] = attrs.Factory(list)
    # Names whose object this install dropped: created again even if their text is the same.
    missing: set[str] = attrs.Factory(set)
    # Identities dropped and not created again (yet).
    gone: set[str] = attrs.Factory(set)

    async def apply(self, objects: ObjectSet) -> None:
        # Objects whose file is gone (whatever depends on one goes first, in `_drop`).
        for name in sorted(self.recorded):
            if name not in self.listed:
                gone = self.recorded[name]
                await self._drop(gone["kind"], gone["identity"])
                await Q.schema_object_forget.execute(self.conn, name=name)
        for name in objects.retired:
            if name not in self.listed:
                kind, object_name = OBJECT_KINDS[name.split("/", 1)[0]], name.split("/", 1)[1]
                for identity in await self._identities(kind, object_name):
                    await self._drop(kind, identity)
        for obj in objects.objects:
            row = self.recorded.get(obj.name)
            if row is None or row["digest"] != obj.digest or obj.name in self.missing:
                await self._install(obj)

    async def _install(self, obj: SqlObject) -> None:
        before = await self._identities(obj.kind, obj.object_name)
        try:
            async with self.conn.transaction():  # a savepoint: the fallback below goes on
                await self.conn.execute(obj.text)
        except _NOT_REPLACEABLE:
            for identity in before:
                await self._drop(obj.kind, identity)
            await self.conn.execute(obj.text)
        after = await self._identities(obj.kind, obj.object_name)
        created = [identity for identity in after if identity not in before] or after
        if len(created) != 1:
            raise SchemaError(f"{obj.name}.sql: expected one {obj.kind} "
                              f"{obj.object_name} after installing it, found {created}")
        identity = created[0]
        # A changed signature (or a trigger moved to another table) leaves the old one.
        for stale in after:
            if stale != identity:
                await self._drop(obj.kind, stale)
        await Q.schema_object_record.execute(self.conn, name=obj.name, kind=obj.kind,
                                             identity=identity, digest=obj.digest)
        self.missing.discard(obj.name)
        self.gone.discard(identity)
        self.installed.append(obj.name)

    async def _identities(self, kind: str, name: str) -> list[str]:
        rows = await Q.schema_object_identities.fetch(self.conn, kind=kind, name=name)
        return [row[0] for row in rows]

    async def _drop(self, kind: str, identity: str) -> None:
        """Drop `identity`, after the views and triggers that depend on it (deepest first);
        each of ours among them is created again later in the install."""
        if identity in self.gone:
            return  # went already, as a dependent of something dropped before it
        if kind != "trigger":
            for dependent in await Q.schema_object_dependents.fetch(
                    self.conn, kind=kind, identity=identity):
                name = f"{dependent['kind']}s/{dependent['name']}"
                if name not in self.listed and name not in self.recorded:
                    # Not ours: never dropped behind its owner's back.
                    raise SchemaError(f"cannot replace {identity}: {dependent['kind']} "
                                      f"{dependent['identity']} depends on it")
                await self._drop(dependent["kind"], dependent["identity"])
                if name in self.listed:
                    self.missing.add(name)
        try:
            async with self.conn.transaction():
                await self.conn.execute(f"{_DROP[kind]} IF EXISTS {identity}")
        except asyncpg.DependentObjectsStillExistError as exc:
            raise SchemaError(f"cannot replace {identity}: {exc.detail or exc}") from None
        self.gone.add(identity)
        self.dropped.append(identity)
