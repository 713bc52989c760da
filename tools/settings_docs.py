"""Rewrite the settings tables of docs/operations.md and docs/self-hosting.md from their
declarations in queen_trio/settings.py: `python tools/settings_docs.py`.
tests/unit/test_settings_docs.py fails while a committed table differs from them."""

from __future__ import annotations

from pathlib import Path

from queen_trio.settings import with_tables

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = ("operations.md", "self-hosting.md")

if __name__ == "__main__":
    for name in PAGES:
        page = DOCS / name
        text = page.read_text()
        if with_tables(text) != text:
            page.write_text(with_tables(text))
            print(f"rewrote the settings tables of docs/{name}")
