"""Reads side by side: a route's reply waits for the slowest read, not for their sum.

A read that fails cancels the others, and trio reports what failed as an ExceptionGroup. When
every failure is a domain error (the database unavailable, the broker overloaded), the first
is raised on its own, so the web layer answers it as it answers that error anywhere else (a
503, not a 500 for an ExceptionGroup). Anything else, cancellation included, passes as is.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ..errors import QueenError

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup


async def concurrently(*reads: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Each read's result, in the order given."""
    results: list[Any] = [None] * len(reads)

    async def run(index: int) -> None:
        results[index] = await reads[index]()

    try:
        async with trio.open_nursery() as nursery:
            for index in range(len(reads)):
                nursery.start_soon(run, index)
    except BaseExceptionGroup as group:
        errors, rest = group.split(QueenError)
        if errors is None or rest is not None:
            raise
        raise _first(errors) from None
    return results


def _first(group: BaseExceptionGroup[QueenError]) -> QueenError:
    error = group.exceptions[0]
    return _first(error) if isinstance(error, BaseExceptionGroup) else error
