"""SQL lives in .sql files beside this module: numbered migrations, and named queries.

A named query is `queries/<name>.sql`. Its parameters are written `:name` in the text, which is
the one place they are named; callers bind them by keyword, and binding checks that every name
is given exactly once. The loader turns them into asyncpg's `$n` placeholders, once, at import.

A query whose file has the line `-- plan: for its values` runs planned for the values of each
call. asyncpg prepares every statement, and PostgreSQL plans a prepared statement generically
from its sixth run on; for a catch-all filter (`:x IS NULL OR col = :x`, `LIMIT :limit`) that
plan can be tens of times slower than one made for the values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

import attrs

# `:name`, but not the second colon of a `::type` cast.
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
PLAN_FOR_VALUES_MARK = "-- plan: for its values"
# Run first, in the query's own transaction (a savepoint inside the caller's).
_PLAN_FOR_VALUES = "SET LOCAL plan_cache_mode = force_custom_plan"


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

    async def fetch(self, conn: Any, **values: Any) -> list[Any]:
        return await self._run(conn, conn.fetch, values)  # type: ignore[no-any-return]

    async def fetchrow(self, conn: Any, **values: Any) -> Any:
        return await self._run(conn, conn.fetchrow, values)

    async def fetchval(self, conn: Any, **values: Any) -> Any:
        return await self._run(conn, conn.fetchval, values)

    async def execute(self, conn: Any, **values: Any) -> str:
        return await self._run(conn, conn.execute, values)  # type: ignore[no-any-return]

    async def _run(self, conn: Any, run: Any, values: Mapping[str, Any]) -> Any:
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


def migrations() -> list[tuple[str, str]]:
    """(version, text) of every migration, in order of its number."""
    folder = resources.files(__name__) / "migrations"
    files = sorted(
        (f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name
    )
    return [(f.name.removesuffix(".sql"), f.read_text(encoding="utf-8")) for f in files]
