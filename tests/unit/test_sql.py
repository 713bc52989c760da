"""Named queries and migrations (storage/sql): `:param` compiles to `$n`, binding is checked,
every shipped file loads."""

from __future__ import annotations

import re
from typing import Any

import pytest

from queen_trio.ops.analytics import SYSTEM_FIGURES, WORKER_COUNTS
from queen_trio.queues import options
from queen_trio.storage.sql import Q, Query, compile_query, migrations


def test_parameters_are_numbered_in_order_of_first_use():
    query = compile_query("q", "SELECT :b, :a, :b FROM t WHERE x = :c")
    assert query.text == "SELECT $1, $2, $1 FROM t WHERE x = $3"
    assert query.params == ("b", "a", "c")


def test_a_cast_is_not_a_parameter():
    query = compile_query("q", "SELECT :value::text, '{}'::jsonb, x::int FROM t")
    assert query.text == "SELECT $1::text, '{}'::jsonb, x::int FROM t"
    assert query.params == ("value",)


def test_a_colon_inside_a_word_or_a_time_literal_is_not_a_parameter():
    query = compile_query("q", "SELECT 'a:b', '12:30', :p")
    assert query.text == "SELECT 'a:b', '12:30', $1"


def test_comment_lines_name_no_parameters():
    query = compile_query("q", "-- Call with :queue and :nothing_else\n  -- :indented too\n"
                               "SELECT * FROM f(:queue)")
    assert query.params == ("queue",)
    assert query.text == "SELECT * FROM f($1)"


def test_binding_takes_every_parameter_exactly_once_by_keyword():
    query = compile_query("q", "SELECT :a, :b")
    assert query.args({"b": 2, "a": 1}) == (1, 2)
    with pytest.raises(TypeError, match=r"query q: missing \['b'\], unexpected \['c'\]"):
        query.args({"a": 1, "c": 3})
    with pytest.raises(TypeError, match=r"missing \[\], unexpected \['z'\]"):
        query.args({"a": 1, "b": 2, "z": 0})


class RecordingConnection:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[Any, ...]]] = []

    def __getattr__(self, method: str) -> Any:
        async def call(text: str, *args: Any) -> str:
            self.calls.append((method, text, args))
            return method

        return call


async def test_each_call_passes_the_compiled_text_and_positional_arguments():
    query = compile_query("q", "UPDATE t SET a = :a WHERE id = :id")
    conn = RecordingConnection()
    assert await query.fetch(conn, id=7, a="x") == "fetch"
    assert await query.fetchrow(conn, id=7, a="x") == "fetchrow"
    assert await query.fetchval(conn, id=7, a="x") == "fetchval"
    assert await query.execute(conn, id=7, a="x") == "execute"
    assert conn.calls == [(method, "UPDATE t SET a = $1 WHERE id = $2", ("x", 7))
                          for method in ("fetch", "fetchrow", "fetchval", "execute")]
    with pytest.raises(TypeError):
        await query.execute(conn, a="x")
    assert len(conn.calls) == 4


class TransactionalConnection(RecordingConnection):
    def transaction(self) -> Any:
        calls = self.calls

        class Transaction:
            async def __aenter__(self) -> None:
                calls.append(("begin", "", ()))

            async def __aexit__(self, *exc: Any) -> None:
                calls.append(("end", "", ()))

        return Transaction()


async def test_a_query_marked_plan_for_its_values_runs_planned_for_them_in_its_transaction():
    marked = compile_query("q", "-- plan: for its values\nSELECT * FROM t WHERE :a IS NULL")
    assert marked.plan_for_values and not compile_query("q", "SELECT :a").plan_for_values
    conn = TransactionalConnection()
    assert await marked.fetch(conn, a=None) == "fetch"
    assert conn.calls == [("begin", "", ()),
                          ("execute", "SET LOCAL plan_cache_mode = force_custom_plan", ()),
                          ("fetch", "SELECT * FROM t WHERE $1 IS NULL", (None,)),
                          ("end", "", ())]
    assert Q.resources_queues.plan_for_values


def test_the_query_book_loads_every_file_and_names_a_missing_query():
    assert "push_bundle" in Q.names()
    assert Q.names() == sorted(Q.names())
    assert isinstance(Q.push_bundle, Query)
    with pytest.raises(AttributeError, match="no query named 'nope' in queen_trio/storage/sql/queries"):
        Q.nope  # noqa: B018


@pytest.mark.parametrize("name", Q.names())
def test_every_shipped_query_compiles_to_contiguous_placeholders(name):
    query = getattr(Q, name)
    numbers = {int(n) for n in re.findall(r"\$(\d+)", query.text)}
    assert numbers == set(range(1, len(query.params) + 1))
    # No `:name` left behind (outside casts).
    assert not re.search(r"(?<![:\w]):[A-Za-z_]", query.text)


def test_push_bundle_binds_the_arguments_of_the_function():
    assert Q.push_bundle.params == ("queues", "partitions", "encrypted", "dedup", "counts",
                                    "frames", "frame_ends", "transaction_ids", "check_max_size")


def test_configure_write_names_every_option_column():
    text = " ".join(Q.configure_write.text.split())
    for number, name in enumerate(Q.configure_write.params, start=1):
        if name in options.FIELDS:
            assert f"{name} = ${number}" in text
    assert set(Q.configure_write.params) == {*options.FIELDS, "queue_id", "namespace", "task",
                                             "explicit_options"}


def test_a_slot_is_filled_once_with_sql_that_names_no_parameter():
    query = compile_query("q", "SELECT {columns} FROM t WHERE a = :a AND b = '{}'")
    filled = query.filled(columns="sum(x) AS x, max(y) AS y")
    assert filled.text == "SELECT sum(x) AS x, max(y) AS y FROM t WHERE a = $1 AND b = '{}'"
    assert filled.params == ("a",) and query.text.startswith("SELECT {columns}")
    with pytest.raises(TypeError, match=r"slots \['columns'\], given \[\]"):
        query.filled()
    with pytest.raises(TypeError, match="given \\['columns', 'more'\\]"):
        query.filled(columns="x", more="y")
    with pytest.raises(ValueError, match="names a parameter"):
        query.filled(columns=":b")


def test_the_worker_series_fold_columns_the_samples_hold_once_each():
    columns = [column for _, column, _, _ in SYSTEM_FIGURES + WORKER_COUNTS]
    assert len(columns) == len(set(columns))
    assert set(columns) <= set(Q.stats_insert_worker_sample.params)
    assert {fold for _, _, fold, _ in SYSTEM_FIGURES + WORKER_COUNTS} == {"avg", "max", "sum"}


def test_migrations_are_numbered_once_each_in_order():
    versions = [version for version, _ in migrations()]
    assert versions[0] == "0001_baseline"
    numbers = [int(version.split("_", 1)[0]) for version in versions]
    assert numbers == list(range(1, len(versions) + 1))
    assert all(re.fullmatch(r"\d{4}_[a-z0-9_]+", version) for version in versions)
    assert all(text.strip() for _, text in migrations())


def test_migrations_hold_no_functions_views_or_triggers():
    """Those have one file each (storage/sql/functions|views|triggers); a migration holds only
    what cannot be re-run."""
    for version, text in migrations():
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
        assert not re.search(r"\b(CREATE|DROP|ALTER)\s+(OR\s+REPLACE\s+)?(FUNCTION|VIEW|TRIGGER)\b",
                             code, re.I), version
