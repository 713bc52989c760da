"""What a test broker may leave behind: processes and files under a directory."""

from __future__ import annotations

import os
from pathlib import Path


def processes_mentioning(text: str) -> list[str]:
    """The command lines of live processes that mention `text` (a data directory, say)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1]
                .splitlines()[0].lower())
    except (OSError, IndexError):
        return ""
