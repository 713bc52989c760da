"""A gate for fake database calls: while it is held, calls wait in flight."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio


class Gate:
    def __init__(self) -> None:
        self._closed: trio.Event | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        """Calls that pass through the gate inside the block wait until the block ends."""
        closed = self._closed = trio.Event()
        try:
            yield
        finally:
            self._closed = None
            closed.set()

    async def pass_through(self) -> None:
        if self._closed is not None:
            await self._closed.wait()
