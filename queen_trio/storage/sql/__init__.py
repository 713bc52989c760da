"""SQL lives in .sql files beside this module: numbered migrations, named queries, and the
schema's functions, views and triggers (one file each, listed in `objects.txt`).

A named query is `queries/<name>.sql`. Its parameters are written `:name` in the text, which is
the one place they are named; callers bind them by keyword, and binding checks that every name
is given exactly once. The loader turns them into asyncpg's `$n` placeholders, once, at import.

A query whose file has the line `-- plan: for its values` runs planned for the values of each
call. asyncpg prepares every statement, and PostgreSQL plans a prepared statement generically
from its sixth run on; for a catch-all filter (`:x IS NULL OR col = :x`, `LIMIT :limit`) that
plan can be tens of times slower than one made for the values.

A query may hold a `{slot}` where SQL that a module builds from its own constants goes (the
column list of the worker series, from the one list of figures in ops/analytics.py). The
module fills it once, at import (`Q.analytics_workers.filled(figures=...)`); never with a
request's values, which are always parameters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from typing import Any, Protocol, TypeVar

import asyncpg
import attrs

# `:name`, but not the second colon of a `::type` cast.
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_SLOT = re.compile(r"\{([a-z_]+)\}")
T = TypeVar("T")
PLAN_FOR_VALUES_MARK = "-- plan: for its values"
# Run first, in the query's own transaction (a savepoint inside the caller's).
_PLAN_FOR_VALUES = "SET LOCAL plan_cache_mode = force_custom_plan"


class Row(Protocol):
    """A result row read by column name: an asyncpg Record, or a plain dict (unit tests build
    those). Its columns are as the query names them; what they hold, the query's file says."""

    def __getitem__(self, key: str, /) -> Any: ...


@attrs.frozen
class Query:
    name: str
    text: str  # with $n placeholders
    params: tuple[str, ...]

    def args(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional arguments for `values`, which must name every parameter once."""
        if values.keys() != set(self.params):
            missing = sorted(set(self.params) - values.keys())
            extra = sorted(values.keys() - set(self.params))
            raise TypeError(f"query {self.name}: missing {missing}, unexpected {extra}")
        return tuple(values[p] for p in self.params)

    plan_for_values: bool = False

    def filled(self, **slots: str) -> Query:
        """This query with its `{slot}`s filled with SQL text, every slot once; the text
        names no parameter (the query's are numbered already)."""
        if set(_SLOT.findall(self.text)) != slots.keys():
            raise TypeError(f"query {self.name}: slots {sorted(set(_SLOT.findall(self.text)))}"
                            f", given {sorted(slots)}")
        if any(_PARAM.search(text) for text in slots.values()):
            raise ValueError(f"query {self.name}: a slot's text names a parameter")
        return attrs.evolve(self, text=_SLOT.sub(lambda m: slots[m.group(1)], self.text))

    async def fetch(self, conn: asyncpg.Connection, **values: Any) -> list[asyncpg.Record]:
        return await self._run(conn, conn.fetch, values)

    async def fetchrow(self, conn: asyncpg.Connection, **values: Any) -> asyncpg.Record | None:
        return await self._run(conn, conn.fetchrow, values)

    async def fetchval(self, conn: asyncpg.Connection, **values: Any) -> Any:
        return await self._run(conn, conn.fetchval, values)

    async def execute(self, conn: asyncpg.Connection, **values: Any) -> str:
        return await self._run(conn, conn.execute, values)

    async def _run(self, conn: asyncpg.Connection, run: Callable[..., Awaitable[T]],
                   values: Mapping[str, Any]) -> T:
        args = self.args(values)
        if not self.plan_for_values:
            return await run(self.text, *args)
        async with conn.transaction():
            await conn.execute(_PLAN_FOR_VALUES)
            return await run(self.text, *args)


def compile_query(name: str, source: str) -> Query:
    params: list[str] = []

    def number(match: re.Match[str]) -> str:
        param = match.group(1)
        if param not in params:
            params.append(param)
        return f"${params.index(param) + 1}"

    # Comments may mention parameters; only the statement defines them.
    lines = source.splitlines()
    body = "\n".join(line for line in lines if not line.lstrip().startswith("--"))
    planned = any(line.strip() == PLAN_FOR_VALUES_MARK for line in lines)
    return Query(name, _PARAM.sub(number, body), tuple(params), plan_for_values=planned)


class QueryBook:
    """Every named query, loaded once: `Q.push_bundle`."""

    def __init__(self) -> None:
        folder = resources.files(__name__) / "queries"
        self._queries = {
            f.name.removesuffix(".sql"): compile_query(f.name.removesuffix(".sql"),
                                                       f.read_text(encoding="utf-8"))
            for f in folder.iterdir() if f.name.endswith(".sql")
        }

    def __getattr__(self, name: str) -> Query:
        try:
            return self._queries[name]
        except KeyError:
            raise AttributeError(f"no query named {name!r} in queen_trio/storage/sql/queries"
                                 ) from None

    def names(self) -> list[str]:
        return sorted(self._queries)


Q = QueryBook()


# The kinds of schema object with a file of their own: the folder of their files.
OBJECT_KINDS = {"functions": "function", "views": "view", "triggers": "trigger"}


@attrs.frozen
class SqlObject:
    """One function, view or trigger: `functions/pop_claim` and its current definition."""

    name: str  # its file, without `.sql`: "functions/pop_claim"
    text: str

    @property
    def kind(self) -> str:
        return OBJECT_KINDS[self.name.split("/", 1)[0]]

    @property
    def object_name(self) -> str:
        """The name the definition gives it: the file's stem (a test checks they agree)."""
        return self.name.split("/", 1)[1]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@attrs.frozen
class ObjectSet:
    """Every function, view and trigger, in the manifest's order (each after what it depends
    on), and the set's generation: a number raised whenever any of them changes, so that a
    broker never replaces the objects of a newer one (storage/schema.py)."""

    generation: int
    objects: tuple[SqlObject, ...]
    # What the manifest says the set's digest is: a test fails when the files changed and
    # nobody raised the generation.
    pinned_digest: str = ""
    # Objects an older set had and this one does not (`functions/ack_cursor`): dropped wherever
    # they are left, recorded or not (a database upgraded from 0017 holds its objects
    # without a record in queen.schema_objects, so their files' going is not enough).
    retired: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        whole = hashlib.sha256()
        for obj in self.objects:
            whole.update(obj.name.encode() + b"\0" + obj.text.encode() + b"\0")
        for name in self.retired:
            whole.update(b"retired\0" + name.encode() + b"\0")
        return whole.hexdigest()


def parse_manifest(manifest: str, read: Callable[[str], str]) -> ObjectSet:
    """The set `manifest` (the text of objects.txt) lists; `read(name)` gives a file's text."""
    generation, pinned, names, retired = None, "", [], []
    for raw in manifest.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, value = line.partition(" ")
        if key == "generation":
            generation = int(value)
        elif key == "digest":
            pinned = value.strip()
        elif key == "retired":
            retired.append(value.strip())
        else:
            names.append(line)
    if generation is None:
        raise ValueError("objects.txt: no `generation N` line")
    return ObjectSet(generation, tuple(SqlObject(n, read(n)) for n in names), pinned,
                     tuple(retired))


def sql_objects() -> ObjectSet:
    """The schema's functions, views and triggers, as objects.txt lists them."""
    folder = resources.files(__name__)
    return parse_manifest((folder / "objects.txt").read_text(encoding="utf-8"),
                          lambda name: (folder / f"{name}.sql").read_text(encoding="utf-8"))


def migrations() -> list[tuple[str, str]]:
    """(version, text) of every migration, in order of its number."""
    folder = resources.files(__name__) / "migrations"
    files = sorted(
        (f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name
    )
    return [(f.name.removesuffix(".sql"), f.read_text(encoding="utf-8")) for f in files]
