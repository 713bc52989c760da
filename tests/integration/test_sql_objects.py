"""Functions, views and triggers installed from their files (storage/schema.py): only what
changed, in place where PostgreSQL allows it, by DROP then CREATE (dependents included) where
it does not, what is gone dropped, all in one transaction under the migration lock; a broker
whose set is older than the installed one refuses to start.

Each test plays broker versions with object sets: this broker's own, plus probe objects whose
text a test changes from one "version" to the next.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import attrs
import pytest

from queen_trio.errors import SchemaError
from queen_trio.storage.schema import apply_migrations
from queen_trio.storage.sql import ObjectSet, SqlObject, migrations, sql_objects
from tests.support.processes import free_port, refused_start

OURS = sql_objects()

VALUE = "CREATE OR REPLACE FUNCTION queen.probe_value() RETURNS integer LANGUAGE sql AS $$ {} $$"
VIEW = "CREATE OR REPLACE VIEW queen.probe_view AS SELECT queen.probe_value() AS {}"
OUTER = "CREATE OR REPLACE VIEW queen.probe_outer AS SELECT {} FROM queen.probe_view"
STAMP = ("CREATE OR REPLACE FUNCTION queen.probe_stamp() RETURNS trigger LANGUAGE plpgsql AS "
         "$$ BEGIN NEW.replayed_at := '{}'; RETURN NEW; END $$")
TRIGGER = ("CREATE OR REPLACE TRIGGER probe_stamped BEFORE INSERT ON queen.spool_replayed "
           "FOR EACH ROW EXECUTE FUNCTION queen.probe_stamp()")


def version(generation: int, **texts: str | None) -> ObjectSet:
    """This broker's objects plus the probes (`functions__probe_value=...`; None leaves one
    out), as a broker of `generation` would carry them."""
    probes = {"functions/probe_value": VALUE.format("SELECT 1"),
              "views/probe_view": VIEW.format("v"),
              "views/probe_outer": OUTER.format("v"),
              "functions/probe_stamp": STAMP.format("2001-01-01"),
              "triggers/probe_stamped": TRIGGER}
    probes.update({name.replace("__", "/"): text for name, text in texts.items()})
    objects = [*OURS.objects,
               *(SqlObject(name, text) for name, text in probes.items() if text is not None)]
    return ObjectSet(OURS.generation + generation, tuple(objects))


async def install(url: str, objects: ObjectSet) -> None:
    conn = await asyncpg.connect(url)
    try:
        await apply_migrations(conn, objects=objects)
    finally:
        await conn.close()


async def query(url: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


def installed_log(caplog: pytest.LogCaptureFixture) -> list[dict]:
    return [{"installed": r.installed, "dropped": r.dropped} for r in caplog.records
            if r.getMessage() == "schema objects installed"]


OIDS = ("SELECT proname AS name, oid FROM pg_proc WHERE proname LIKE 'probe%' UNION ALL "
        "SELECT relname, oid FROM pg_class WHERE relname LIKE 'probe%' ORDER BY 1")


def test_a_start_with_nothing_changed_installs_nothing(database_url, caplog):
    caplog.set_level(logging.INFO, "queen_trio.database")
    # The template was built by this broker: every object is recorded with its digest.
    rows = asyncio.run(query(database_url, "SELECT name, digest FROM queen.schema_objects"))
    assert {r["name"]: r["digest"] for r in rows} == {o.name: o.digest for o in OURS.objects}
    asyncio.run(install(database_url, OURS))
    assert installed_log(caplog) == []


def test_a_changed_body_replaces_that_object_alone_in_place(database_url, caplog):
    caplog.set_level(logging.INFO, "queen_trio.database")
    asyncio.run(install(database_url, version(1)))
    assert installed_log(caplog)[-1]["installed"] == [
        "functions/probe_value", "views/probe_view", "views/probe_outer",
        "functions/probe_stamp", "triggers/probe_stamped"]
    before = asyncio.run(query(database_url, OIDS))
    asyncio.run(install(database_url, version(2, functions__probe_value=VALUE.format("SELECT 2"))))
    assert installed_log(caplog)[-1] == {"installed": ["functions/probe_value"], "dropped": []}
    assert asyncio.run(query(database_url, OIDS)) == before
    assert asyncio.run(query(database_url, "SELECT v FROM queen.probe_outer"))[0]["v"] == 2


def test_a_changed_result_type_is_dropped_and_created_with_its_dependents(database_url, caplog):
    caplog.set_level(logging.INFO, "queen_trio.database")
    asyncio.run(install(database_url, version(1)))
    bigint = ("CREATE OR REPLACE FUNCTION queen.probe_value() RETURNS bigint LANGUAGE sql AS "
              "$$ SELECT 3::bigint $$")
    asyncio.run(install(database_url, version(2, functions__probe_value=bigint)))
    assert installed_log(caplog)[-1] == {
        "installed": ["functions/probe_value", "views/probe_view", "views/probe_outer"],
        "dropped": ["queen.probe_outer", "queen.probe_view", "queen.probe_value()"]}
    row = asyncio.run(query(database_url, "SELECT v, pg_typeof(v)::text AS t FROM queen.probe_outer"))
    assert (row[0]["v"], row[0]["t"]) == (3, "bigint")


def test_a_changed_signature_leaves_no_old_overload(database_url, caplog):
    caplog.set_level(logging.INFO, "queen_trio.database")
    asyncio.run(install(database_url, version(1)))
    with_argument = ("CREATE OR REPLACE FUNCTION queen.probe_value(p integer DEFAULT 4) "
                     "RETURNS integer LANGUAGE sql AS $$ SELECT p $$")
    asyncio.run(install(database_url, version(2, functions__probe_value=with_argument)))
    assert "queen.probe_value()" in installed_log(caplog)[-1]["dropped"]
    rows = asyncio.run(query(database_url, "SELECT pg_get_function_identity_arguments(oid) AS a "
                                           "FROM pg_proc WHERE proname = 'probe_value'"))
    assert [r["a"] for r in rows] == ["p integer"]
    identity = asyncio.run(query(database_url, "SELECT identity FROM queen.schema_objects "
                                               "WHERE name = 'functions/probe_value'"))
    assert identity[0]["identity"] == "queen.probe_value(p integer)"
    assert asyncio.run(query(database_url, "SELECT v FROM queen.probe_outer"))[0]["v"] == 4


def test_a_new_argument_beside_a_named_one_leaves_no_old_overload(database_url, caplog):
    # The stale overload's identity names its arguments ("p integer"): its dependents are
    # found by that spelling (regprocedure cannot parse it).
    caplog.set_level(logging.INFO, "queen_trio.database")
    one = ("CREATE OR REPLACE FUNCTION queen.probe_value(p integer DEFAULT 4) "
           "RETURNS integer LANGUAGE sql AS $$ SELECT p $$")
    two = ("CREATE OR REPLACE FUNCTION queen.probe_value(p integer DEFAULT 4, "
           "q integer DEFAULT 1) RETURNS integer LANGUAGE sql AS $$ SELECT p + q $$")
    asyncio.run(install(database_url, version(1, functions__probe_value=one)))
    asyncio.run(install(database_url, version(2, functions__probe_value=two)))
    assert "queen.probe_value(p integer)" in installed_log(caplog)[-1]["dropped"]
    rows = asyncio.run(query(database_url, "SELECT pg_get_function_identity_arguments(oid) AS a "
                                           "FROM pg_proc WHERE proname = 'probe_value'"))
    assert [r["a"] for r in rows] == ["p integer, q integer"]
    assert asyncio.run(query(database_url, "SELECT v FROM queen.probe_outer"))[0]["v"] == 5


def test_a_changed_view_column_list_drops_and_creates_in_manifest_order(database_url, caplog):
    caplog.set_level(logging.INFO, "queen_trio.database")
    asyncio.run(install(database_url, version(1)))
    asyncio.run(install(database_url, version(2, views__probe_view=VIEW.format("w"),
                                              views__probe_outer=OUTER.format("w"))))
    assert installed_log(caplog)[-1] == {"installed": ["views/probe_view", "views/probe_outer"],
                                         "dropped": ["queen.probe_outer", "queen.probe_view"]}
    assert asyncio.run(query(database_url, "SELECT w FROM queen.probe_outer"))[0]["w"] == 1


def test_a_changed_trigger_function_keeps_its_trigger_firing(database_url):
    asyncio.run(install(database_url, version(1)))
    asyncio.run(install(database_url, version(2, functions__probe_stamp=STAMP.format("2002-02-02"))))
    rows = asyncio.run(query(database_url, "INSERT INTO queen.spool_replayed (message_id) "
                                           "VALUES (gen_random_uuid()) RETURNING replayed_at::date::text AS d"))
    assert rows[0]["d"] == "2002-02-02"


def test_an_object_whose_file_is_gone_is_dropped(database_url, caplog):
    caplog.set_level(logging.INFO, "queen_trio.database")
    asyncio.run(install(database_url, version(1)))
    asyncio.run(install(database_url, version(2, views__probe_outer=None,
                                              triggers__probe_stamped=None,
                                              functions__probe_stamp=None)))
    assert sorted(installed_log(caplog)[-1]["dropped"]) == [
        "probe_stamped ON queen.spool_replayed", "queen.probe_outer", "queen.probe_stamp()"]
    names = asyncio.run(query(database_url, "SELECT name FROM queen.schema_objects "
                                            "WHERE name LIKE '%probe%' ORDER BY 1"))
    assert [r["name"] for r in names] == ["functions/probe_value", "views/probe_view"]
    assert asyncio.run(query(database_url, "SELECT to_regclass('queen.probe_outer') AS r"))[0]["r"] is None


def test_a_gone_function_with_named_arguments_is_dropped(database_url, caplog):
    # Its recorded identity names its arguments, as DROP takes it (and to_regprocedure does not).
    caplog.set_level(logging.INFO, "queen_trio.database")
    named = ("CREATE OR REPLACE FUNCTION queen.probe_named(p_a integer, p_b text[]) "
             "RETURNS integer LANGUAGE sql AS $$ SELECT p_a $$")
    asyncio.run(install(database_url, version(1, functions__probe_named=named)))
    asyncio.run(install(database_url, version(2)))
    assert installed_log(caplog)[-1]["dropped"] == ["queen.probe_named(p_a integer, p_b text[])"]
    rows = asyncio.run(query(database_url, "SELECT 1 FROM pg_proc WHERE proname = 'probe_named'"))
    assert rows == []


def test_a_retired_object_is_dropped_without_a_record(database_url, caplog):
    # As a database upgraded from 0017 holds the old migrations' functions.
    caplog.set_level(logging.INFO, "queen_trio.database")
    asyncio.run(install(database_url, version(1)))
    asyncio.run(query(database_url, "CREATE FUNCTION queen.probe_old(p_a integer) RETURNS "
                                    "integer LANGUAGE sql AS $$ SELECT p_a $$"))
    retiring = attrs.evolve(version(2), retired=("functions/probe_old",))
    asyncio.run(install(database_url, retiring))
    assert installed_log(caplog)[-1]["dropped"] == ["queen.probe_old(p_a integer)"]
    assert asyncio.run(query(database_url, "SELECT 1 FROM pg_proc WHERE proname = 'probe_old'")) == []


def test_an_older_broker_never_replaces_a_newer_set(database_url):
    newer, older = version(2, functions__probe_value=VALUE.format("SELECT 22")), version(1)
    asyncio.run(install(database_url, newer))
    with pytest.raises(SchemaError) as refused:
        asyncio.run(install(database_url, older))
    assert str(refused.value) == (
        f"the database's functions, views and triggers are of generation {newer.generation}, "
        f"newer than this broker's {older.generation}: a newer queen-trio installed them; run "
        "that version")
    assert asyncio.run(query(database_url, "SELECT queen.probe_value() AS v"))[0]["v"] == 22


def test_an_object_we_do_not_own_stops_the_install_and_nothing_changes(database_url):
    asyncio.run(install(database_url, version(1)))
    asyncio.run(query(database_url, "CREATE VIEW public.mine AS SELECT v FROM queen.probe_view"))
    with pytest.raises(SchemaError, match=r"^cannot replace queen\.probe_view: view "
                                          r"public\.mine depends on it$"):
        asyncio.run(install(database_url, version(2, views__probe_view=VIEW.format("w"),
                                                  views__probe_outer=OUTER.format("w"))))
    generation = asyncio.run(query(database_url, "SELECT generation FROM queen.schema_object_set"))
    assert generation[0]["generation"] == OURS.generation + 1
    assert asyncio.run(query(database_url, "SELECT v FROM queen.probe_outer"))[0]["v"] == 1


def test_two_brokers_starting_together_take_turns(empty_database_url):
    async def both() -> list[list[str]]:
        return list(await asyncio.gather(install_returning(empty_database_url),
                                         install_returning(empty_database_url)))

    results = asyncio.run(both())
    assert sorted(results) == [[], [version for version, _ in migrations()]]
    rows = asyncio.run(query(empty_database_url, "SELECT count(*) AS n FROM queen.schema_objects"))
    assert rows[0]["n"] == len(OURS.objects)


async def install_returning(url: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        return await apply_migrations(conn)
    finally:
        await conn.close()


async def test_serve_refuses_a_database_whose_objects_are_newer(database_url, tmp_path, workers):
    await trio_query(database_url, "UPDATE queen.schema_object_set SET generation = generation + 1")
    done = await refused_start({"DATABASE_URL": database_url,
                                "QUEEN_DATA_DIR": str(tmp_path / "data")},
                               ["--host", "127.0.0.1", "--port", str(free_port())],
                               workers=workers)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [
        f"queen-trio: schema error: the database's functions, views and triggers are of "
        f"generation {OURS.generation + 1}, newer than this broker's {OURS.generation}: a newer "
        "queen-trio installed them; run that version"]


async def trio_query(url: str, sql: str) -> None:
    import trio

    await trio.to_thread.run_sync(lambda: asyncio.run(query(url, sql)))
