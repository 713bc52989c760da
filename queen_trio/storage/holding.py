"""A busy caller's connection hold: what the push shards and the fusion callers share.

A task that makes one database call after another keeps one pool connection between its calls
(`Database.holding` opens the hold; storage/database.py) and gives it back once idle: between
two calls it receives its next work through `receive_or_let_go`. Lanes and fusions take a
`HoldFactory`, so the unit tests run them on `no_hold`, without a database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, TypeVar

import trio

T = TypeVar("T")

# A holder that made no call for this long gives its connection back (see `Database.holding`).
HOLD_IDLE_SECONDS = 0.1


class Hold(Protocol):
    @property
    def holding(self) -> bool:
        """A connection is held now."""

    async def let_go(self) -> None:
        """Give the held connection back to the pool (nothing held: nothing to do)."""


class _NoHold:
    holding = False

    async def let_go(self) -> None:
        return None


@asynccontextmanager
async def no_hold() -> AsyncIterator[Hold]:
    """The hold of a lane or fusion that runs on no database (the unit tests' fakes)."""
    yield _NoHold()


# What opens a hold for the current task: `Database.holding`, or `no_hold`.
HoldFactory = Callable[[], AbstractAsyncContextManager[Hold]]


async def receive_or_let_go(receive: Callable[[], Awaitable[T]], hold: Hold) -> T:
    """`receive()` for a holder between its calls: if nothing comes within
    HOLD_IDLE_SECONDS, the held connection goes back to the pool before it blocks on."""
    if hold.holding:
        with trio.move_on_after(HOLD_IDLE_SECONDS):
            return await receive()
        await hold.let_go()
    return await receive()
