"""Every file the package reads at run time ships in the wheel: a non-editable install (as CI's
`pip install .`) that lacked storage/sql/objects.txt could not start a broker."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

import queen_trio

PACKAGE = Path(queen_trio.__file__).parent
ROOT = PACKAGE.parent


def package_data_globs() -> list[str]:
    # The list under [tool.setuptools.package-data] (tomllib is 3.11+; we support 3.10).
    table = (ROOT / "pyproject.toml").read_text().split("[tool.setuptools.package-data]")[1]
    return re.findall(r'"([^"]+)"', table.split("]", 1)[0])


def test_every_file_that_is_not_python_is_package_data() -> None:
    globs = package_data_globs()
    files = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert "storage/sql/objects.txt" in files and len(files) > 150
    # setuptools' globs: "*" stops at "/", as fnmatch's does not; count the segments too.
    unshipped = [f for f in files if not any(
        fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert unshipped == []
