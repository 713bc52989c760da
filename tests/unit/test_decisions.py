"""docs/decisions.md is the one record of where the broker departs from the reference: every
citation of it in the tree names one of its headings, and nothing cites a document the
repository does not hold (shipped migrations, never edited, keep the words they shipped
with)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "decisions.md"
CITATION = re.compile(r"(?:docs/)?decisions\.md#([\w-]+)")
SCANNED = ("queen_trio", "tests", "bench", "docs", "examples")
SUFFIXES = {".py", ".sql", ".md", ".js", ".html", ".toml", ".ini", ".cfg", ".yaml", ".yml"}


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub spells it: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors() -> list[str]:
    return [anchor(line.lstrip("#")) for line in PAGE.read_text().splitlines()
            if line.startswith("#")]


# Texts never edited once written: shipped migrations, and the tests' copies of old ones.
FROZEN = (ROOT / "queen_trio" / "storage" / "sql" / "migrations", ROOT / "tests" / "fixtures")


def sources() -> list[Path]:
    found = [ROOT / "README.md"]
    for top in SCANNED:
        found += [p for p in sorted((ROOT / top).rglob("*"))
                  if p.suffix in SUFFIXES and p.is_file() and p != Path(__file__)
                  and not any(p.is_relative_to(frozen) for frozen in FROZEN)]
    return found


def test_every_heading_has_its_own_anchor():
    listed = anchors()
    assert len(listed) == len(set(listed)), "two headings of docs/decisions.md share an anchor"


def test_every_citation_names_a_heading():
    known = set(anchors())
    broken = [f"{path.relative_to(ROOT)}: #{name}"
              for path in sources()
              for name in CITATION.findall(path.read_text(errors="replace"))
              if name not in known]
    assert broken == []


def test_the_tree_cites_no_document_outside_it():
    outside = [f"{path.relative_to(ROOT)}:{number}"
               for path in sources()
               for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
               if re.search(r"\bDECISIONS\b", line)]
    assert outside == []
