"""queen-trio is on no package index: nothing in the tree tells a reader to install it by name
alone, which fails ("No matching distribution"). docs/testing.md#installing says how, from a
checkout or a git URL, and the other places point there (issue 25, point 6)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCANNED = ("queen_trio", "docs", "examples", ".ci")
SUFFIXES = {".py", ".md", ".toml", ".ini", ".cfg", ".yaml", ".yml", ".txt", ""}
# `queen-trio` or `queen-trio[extra]` quoted as a whole requirement: no `@ URL`, no path.
BY_NAME = re.compile(r"""['"]queen-trio(\[[\w,]+\])?['"]""")
# Where a requirement is one: a pip command, a tox deps list, a pyproject's extras.
INSTALL = re.compile(r"pip install|deps\s*=|dependencies\s*=|^\s*test\s*=|requirements")


def places() -> list[Path]:
    found = [ROOT / "README.md"]
    for top in SCANNED:
        found += [p for p in sorted((ROOT / top).rglob("*"))
                  if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts]
    return found


def test_nothing_installs_queen_trio_by_name_from_an_index() -> None:
    by_name = []
    for path in places():
        lines = path.read_text(errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            context = " ".join(lines[max(number - 3, 0):number])
            # The one place says that it fails, in those words.
            if (INSTALL.search(context) and BY_NAME.search(line)
                    and "finds nothing" not in line):
                by_name.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert by_name == []


def test_the_one_place_gives_a_checkout_and_a_git_url() -> None:
    page = (ROOT / "docs" / "testing.md").read_text()
    section = page.split("## Installing", 1)[1].split("\n## ", 1)[0]
    assert "pip install '/path/to/queen-trio[pytest]'" in section
    assert re.search(r"pip install 'queen-trio\[pytest\] @ git\+https://\S+'", section)
    assert "docs/testing.md#installing" in (ROOT / "README.md").read_text()
