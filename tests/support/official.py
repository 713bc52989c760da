"""Running the official client (queen-mq 2.6.0, asyncio) from trio tests: each flow is a script
under tests/support/clients/ that prints one JSON report as its last line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

CLIENTS = Path(__file__).parent / "clients"


async def run_flow(script: str, *args: str, within: float = 55) -> Any:
    """Run `clients/<script>` with `args`; its report (the last stdout line, as JSON)."""
    with trio.fail_after(within):
        done = await trio.run_process([sys.executable, str(CLIENTS / script), *args],
                                      capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])
