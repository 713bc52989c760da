"""The tests keep to their tiers: they share helpers only through tests/support, use only
queen_trio's public names, and the unit tier never reaches for a PostgreSQL."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# namedtuple's public methods carry an underscore so as not to clash with field names.
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make"}
# What a test that needs no PostgreSQL never imports.
NEEDS_POSTGRESQL = ("asyncpg", "queen_trio.storage.embedded", "tests.support.db",
                    "tests.support.outage", "tests.support.storage", "tests.support.clusters")


def parsed_modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(TESTS.rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def imports(tree: ast.Module) -> Iterator[tuple[str, list[str], int]]:
    """(module, names imported from it, line) for every import, wherever it is written."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            yield ("." * node.level) + (node.module or ""), [a.name for a in node.names], node.lineno


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def test_tests_import_no_other_test_module_only_the_support_package():
    wrong = [f"{path.relative_to(TESTS)}:{line} imports {module}"
             for path, tree in parsed_modules() for module, _, line in imports(tree)
             if module.startswith(".")
             or (module.split(".")[0] == "tests" and not module.startswith("tests.support"))
             or (module == "tests" and path.parent != TESTS)]
    assert wrong == []


def test_tests_use_no_private_name_of_queen_trio():
    wrong = []
    for path, tree in parsed_modules():
        for module, names, line in imports(tree):
            if module.split(".")[0] == "queen_trio":
                if any(is_private(part) for part in module.split(".")):
                    wrong.append(f"{path.relative_to(TESTS)}:{line} imports {module}")
                wrong += [f"{path.relative_to(TESTS)}:{line} imports {module}.{name}"
                          for name in names if is_private(name)]
        for node in ast.walk(tree):
            # A test's own classes may keep private state (`self._x`); nothing else is read.
            if (isinstance(node, ast.Attribute) and is_private(node.attr)
                    and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
                wrong.append(f"{path.relative_to(TESTS)}:{node.lineno} uses .{node.attr}")
    assert wrong == []


def test_the_unit_tier_imports_nothing_that_needs_postgresql():
    unit = TESTS / "unit"
    wrong = [f"{path.relative_to(TESTS)}:{line} imports {module}"
             for path, tree in parsed_modules() if path.is_relative_to(unit)
             for module, _, line in imports(tree)
             if module.startswith(NEEDS_POSTGRESQL)]
    assert wrong == []
