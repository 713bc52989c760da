"""Call fusion: requests that arrive while a database call is in flight share the next call.

The push lane's rule, for the other hot paths (acks, pops): a call dispatches at once when
none is in flight, so a lone request costs one crossing and one round trip; under load, one
crossing serves many requests. A fused call that fails for a reason other than the
connection is split, so only the bad request fails. A busy caller holds its database
connection from one call to the next (storage/holding.py), and gives it back once idle.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import attrs
import trio

from ..errors import DatabaseUnavailable, Overloaded
from ..storage.database import is_connection_failure, is_overload
from ..storage.holding import Hold, HoldFactory, no_hold, receive_or_let_go

# Requests that may wait for the next call of one fusion; past it a request is refused (503).
MAX_WAITING = 10_000


@attrs.define(eq=False)
class Fusable:
    """A request: `done` is set once its outcome (or `failure`) is known."""

    done: trio.Event = attrs.field(factory=trio.Event, kw_only=True)
    failure: BaseException | None = attrs.field(default=None, kw_only=True)


R = TypeVar("R", bound=Fusable)


@attrs.frozen
class FusionStatistics:
    calls: int         # database calls that succeeded
    requests: int      # requests submitted
    splits: int        # fused calls that failed and were retried request by request
    waiting: int       # requests queued for the next call


@attrs.define
class _Counters:
    calls: int = 0
    requests: int = 0
    splits: int = 0


class CallFusion(Generic[R]):
    def __init__(self, call: Callable[[list[R]], Awaitable[None]], *, callers: int = 2,
                 max_waiting: int = MAX_WAITING, deadline_seconds: float = math.inf,
                 hold: HoldFactory = no_hold) -> None:
        """`call(batch)` runs one database call for the batch and fills in every request's
        outcome; it raises when the call failed. A started call is shielded from
        cancellation but not from `deadline_seconds`. `hold`: how a caller keeps its
        connection between calls (`Database.holding`)."""
        self._call = call
        self._hold = hold
        self._callers = callers
        self._deadline = deadline_seconds
        self._send, self._receive = trio.open_memory_channel[R](max_waiting)
        self._counters = _Counters()

    def statistics(self) -> FusionStatistics:
        c = self._counters
        return FusionStatistics(calls=c.calls, requests=c.requests, splits=c.splits,
                                waiting=self._receive.statistics().current_buffer_used)

    async def submit(self, request: R) -> None:
        try:
            self._send.send_nowait(request)
        except trio.WouldBlock:
            raise Overloaded("too many requests waiting for the database") from None
        self._counters.requests += 1
        # Once queued, the request is answered whatever happens to its caller: its call is
        # bounded by the deadline, and leaving early would orphan what the call does.
        with trio.CancelScope(shield=True):
            await request.done.wait()
        if request.failure is not None:
            raise request.failure

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(self._callers):
                nursery.start_soon(self._caller)
            task_status.started()

    async def _caller(self) -> None:
        async with self._hold() as hold:
            while True:
                await self._call_next(hold)

    async def _call_next(self, hold: Hold) -> None:
        # An idle caller lets its connection go before it blocks.
        batch = [await receive_or_let_go(self._receive.receive, hold)]
        while True:
            try:
                batch.append(self._receive.receive_nowait())
            except trio.WouldBlock:
                break
        # A started call is never cancelled: it lands or fails whole, within its deadline.
        with trio.move_on_after(self._deadline, shield=True) as scope:
            await self.dispatch(batch)
        if scope.cancelled_caught:
            for request in batch:
                if not request.done.is_set():
                    request.failure = DatabaseUnavailable("the call took longer than its "
                                                          "deadline")
                    request.done.set()

    async def dispatch(self, batch: list[R]) -> None:
        try:
            await self._call(batch)
            self._counters.calls += 1
        except Exception as exc:
            if len(batch) > 1 and not (is_connection_failure(exc) or is_overload(exc)):
                self._counters.splits += 1
                for request in batch:
                    await self.dispatch([request])
                return
            for request in batch:
                request.failure = exc
        for request in batch:
            request.done.set()
