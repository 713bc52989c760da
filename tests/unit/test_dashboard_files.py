"""The dashboard's files: our scripts never build markup
from text, never evaluate text, and load nothing from another host."""

from __future__ import annotations

import re
from pathlib import Path

import queen_trio

PACKAGE = Path(queen_trio.__file__).parent
STATIC = PACKAGE / "web" / "static"
# What turns text into markup or code: none of it in our own scripts (dom.js builds nodes).
FORBIDDEN = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|"
                       r"new Function|setAttribute\(\s*['\"](style|on\w+)")


def ours() -> list[Path]:
    return [p for p in STATIC.rglob("*") if p.is_file() and "vendor" not in p.parts]


def test_our_scripts_never_turn_text_into_markup_or_code() -> None:
    scripts = [p for p in ours() if p.suffix == ".js"]
    assert len(scripts) > 10
    found = [f"{p.relative_to(STATIC)}:{n}: {line.strip()}" for p in scripts
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if FORBIDDEN.search(line) and not line.startswith("const REFUSED")]
    assert found == []


def test_nothing_is_loaded_from_another_host() -> None:
    for path in ours():
        text = path.read_text()
        # The SVG namespace is a name, not a request.
        urls = [u for u in re.findall(r"https?://[^\s\"'`)]+", text)
                if u != "http://www.w3.org/2000/svg"]
        assert urls == [], path
    page = (STATIC / "index.html").read_text()
    assert re.findall(r'(?:src|href)="([^"]+)"', page) and all(
        ref.startswith(("/dashboard/", "#")) for ref in re.findall(r'(?:src|href)="([^"]+)"', page))
