"""The package's rooms point one way (across rooms only through a door), and no module
imports a circle back to itself.

The graph is built from the source (ast), counting every import wherever it is written:
module level, inside functions, and under `if TYPE_CHECKING:`. A naive "import everything"
test would miss a circle closed by a function-level import; this one does not.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import queen_trio

PACKAGE = Path(queen_trio.__file__).parent

# Each room, and the rooms it may import from (besides itself). Lower rooms never import
# higher ones; docs/architecture.md draws the same map.
FOUNDATION = "foundation"
MAY_IMPORT: dict[str, set[str]] = {
    FOUNDATION: set(),
    "storage": {FOUNDATION},
    "queues": {"storage", FOUNDATION},
    "consume": {"queues", "storage", FOUNDATION},
    # KV and locks: the rows, the lock permits in them, the transaction rider's apply.
    "kv": {"storage", FOUNDATION},
    "push": {"kv", "consume", "queues", "storage", FOUNDATION},
    # Timers fire through the push path; offset reads only read storage.
    "timers": {"push", "consume", "queues", "storage", FOUNDATION},
    "reads": {"storage", FOUNDATION},
    # Ephemeral queues: rings in RAM, their declarations and owner in PostgreSQL.
    "ephemeral": {"storage", FOUNDATION},
    "ops": {"timers", "reads", "ephemeral", "kv", "push", "consume", "queues", "storage",
            FOUNDATION},
    "streams": {"push", "consume", "queues", "storage", FOUNDATION},
    "broker": {"streams", "ops", "timers", "reads", "ephemeral", "kv", "push", "consume",
               "queues", "storage", FOUNDATION},
    "web": {"broker", "streams", "ops", "timers", "reads", "ephemeral", "kv", "push", "consume",
            "queues", "storage",
            FOUNDATION},
    # The command line is a client of the HTTP API: it imports the foundation only (and the
    # server through DOORS).
    "cli": {FOUNDATION},
    "entry": {"cli", "web", "broker", "streams", "ops", "timers", "reads", "ephemeral", "kv",
              "push", "consume", "queues", "storage", FOUNDATION},
}
# `queen-trio serve` and `spool retry` (which works on the data directory itself) are the
# command line's doors into the server's code, opened inside the command's function so that
# no other command loads it.
DOORS = {("queen_trio.cli.serve", "queen_trio.web.server"),
         ("queen_trio.cli.serve", "queen_trio.web.supervisor"),
         ("queen_trio.cli.spool", "queen_trio.push.spool_cli"),
         # `status` with no broker answering: an embedded cluster left running without one.
         ("queen_trio.cli.probes", "queen_trio.storage.datadir"),
         ("queen_trio.cli.probes", "queen_trio.storage.embedded")}
# Top-level modules that are not a folder of their own.
TOP_LEVEL_ROOM = {
    "queen_trio": FOUNDATION, "errors": FOUNDATION, "wire": FOUNDATION,
    "settings": FOUNDATION, "ids": FOUNDATION, "logs": FOUNDATION, "exits": FOUNDATION,
    "broker": "broker", "__main__": "entry", "testing": "entry",
    "pytest_plugin": "entry",
}


def module_name(path: Path) -> str:
    parts = ["queen_trio", *path.relative_to(PACKAGE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


FOLDERS = {"storage", "queues", "kv", "consume", "push", "timers", "reads", "ephemeral", "ops",
           "streams", "web", "cli"}


def room_of(module: str) -> str:
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else "queen_trio"
    if head in FOLDERS:
        return head
    if head not in TOP_LEVEL_ROOM:
        raise AssertionError(f"{module} is in no room: add it to TOP_LEVEL_ROOM or a folder "
                             "(tests/unit/test_layers.py, docs/architecture.md)")
    return TOP_LEVEL_ROOM[head]


def imports(module: str, path: Path, known: set[str]) -> Iterator[tuple[str, str, int]]:
    """(imported module, imported name or "", line) for every import in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "queen_trio":
                    yield alias.name, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "queen_trio":
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                # `from . import wire` imports a module; `from .wire import name` a name.
                if submodule in known:
                    yield submodule, "", node.lineno
                else:
                    yield target, alias.name, node.lineno


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for target, _name, _line in imports(module, path, set(known)):
            if target != module:
                assert target in known, f"{module} imports {target}, which does not exist"
                edges[module].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_queen_trio_modules() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_point_down_the_rooms_or_through_a_door() -> None:
    wrong = []
    for module, targets in graph().items():
        room = room_of(module)
        for target in targets:
            other = room_of(target)
            if (module, target) in DOORS:
                continue
            if other != room and other not in MAY_IMPORT[room]:
                wrong.append(f"{module} ({room}) imports {target} ({other})")
    assert wrong == []


def test_the_command_lines_doors_open_inside_the_commands_only() -> None:
    for module, target in DOORS:
        path = modules()[module]
        lines = {line for t, _n, line in imports(module, path, set(modules())) if t == target}
        assert lines, f"{module} no longer imports {target}: update DOORS"
        module_level = {node.lineno for node in ast.parse(path.read_text()).body}
        assert not lines & module_level


def test_no_module_imports_another_modules_private_names() -> None:
    known = modules()
    private = []
    for module, path in known.items():
        for target, name, line in imports(module, path, set(known)):
            if target != module and name.startswith("_") and not name.startswith("__"):
                private.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}.{name}")
    assert private == []


def test_function_level_and_type_checking_imports_count(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from queen_trio.broker import Broker\n"
                      "def f():\n    from queen_trio.web import routes\n")
    found = {t for t, _n, _l in imports("queen_trio.probe", source, set(modules()))}
    assert found == {"queen_trio.broker", "queen_trio.web.routes"}


def test_the_architecture_page_names_every_module_and_only_real_ones() -> None:
    page = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`(queen_trio/[\w/]+\.py)`", page))
    actual = {f"queen_trio/{p.relative_to(PACKAGE).as_posix()}" for p in PACKAGE.rglob("*.py")
              if p.name != "__init__.py" or p.parent == PACKAGE or p.parent.name == "sql"}
    assert sorted(actual - named) == [], "add these modules to docs/architecture.md"
    assert sorted(named - actual) == [], "docs/architecture.md names modules that do not exist"
