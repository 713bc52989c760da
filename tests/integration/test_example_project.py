"""examples/tox-matrix: its tests pass on this Python, against the plugin as installed, so
the example cannot rot (its tox.ini runs the same tests on Python 3.10 to 3.13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "tox-matrix"


def test_the_example_projects_tests_pass() -> None:
    # With pytest-asyncio, as the example's test extra has it (issue 25, point 12: the
    # plugin and pytest-asyncio no longer fight under the example's filterwarnings=error),
    # and its asyncio test drives the official client through queen_client.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=EXAMPLE, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed" in done.stdout
