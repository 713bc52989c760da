"""SQL lives in .sql files next to this module: numbered migrations, and named queries."""

from __future__ import annotations

import functools
from importlib import resources


def migrations() -> list[tuple[str, str]]:
    """(version, text) of every migration, in order of its number."""
    folder = resources.files(__name__) / "migrations"
    files = sorted(
        (f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name
    )
    return [(f.name.removesuffix(".sql"), f.read_text(encoding="utf-8")) for f in files]


@functools.cache
def query(name: str) -> str:
    """The text of `queries/<name>.sql`... kept flat: `<name>.sql` in this package."""
    return (resources.files(__name__) / f"{name}.sql").read_text(encoding="utf-8")
