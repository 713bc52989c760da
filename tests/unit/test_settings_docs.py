"""The settings tables of the docs are the declarations' own: every setting with its variable,
flag, default and line, as queen_trio/settings.py declares them."""

from __future__ import annotations

from pathlib import Path

import pytest

from queen_trio.settings import AuthSettings, Settings, declarations, with_tables

DOCS = Path(__file__).parents[2] / "docs"


@pytest.mark.parametrize("page", ["operations.md", "self-hosting.md"])
def test_the_committed_tables_are_the_ones_the_declarations_make(page: str) -> None:
    text = (DOCS / page).read_text()
    assert "<!-- settings: " in text
    assert with_tables(text) == text, f"run `python tools/settings_docs.py` to rewrite docs/{page}"


@pytest.mark.parametrize(("cls", "page"), [(Settings, "operations.md"),
                                           (AuthSettings, "self-hosting.md")])
def test_every_setting_has_a_row_with_its_variable_flag_and_line(cls: type, page: str) -> None:
    rows = [line for line in (DOCS / page).read_text().splitlines() if line.startswith("| ")]
    for field, declared in declarations(cls):
        row = next((r for r in rows if declared.doc in r), None)
        assert row is not None, field.name
        for name in (declared.env, *declared.also, declared.flag):
            assert name is None or f"`{name}" in row, (field.name, name)
