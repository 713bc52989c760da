"""A connection hold (storage/holding.py `Hold`) without a database, for the lane and fusion
tests: the fake call takes the connection (`take`), and `let_go` records when it went back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import trio

from queen_trio.storage.holding import Hold


class FakeHold:
    def __init__(self) -> None:
        self.holding = False
        self.given_back_at: list[float] = []
        self.opened = self.closed = 0

    def take(self) -> None:
        self.holding = True

    async def let_go(self) -> None:
        if self.holding:
            self.given_back_at.append(trio.current_time())
        self.holding = False

    def factory(self) -> AbstractAsyncContextManager[Hold]:
        """What `Database.holding` is to the lane: one hold per task, let go at its end."""
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Hold]:
        self.opened += 1
        try:
            yield self
        finally:
            await self.let_go()
            self.closed += 1
