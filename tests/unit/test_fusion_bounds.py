"""A fusion's channel is bounded: past it a request is refused as overload, not queued."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from queen_trio.consume.fusion import CallFusion, Fusable
from queen_trio.errors import Overloaded


async def test_requests_past_the_bound_are_refused(nursery):
    gate = trio.Event()

    async def call(batch):
        await gate.wait()

    fusion = CallFusion[Fusable](call, callers=1, max_waiting=1)
    await nursery.start(fusion.run)
    in_flight, waiting = Fusable(), Fusable()
    nursery.start_soon(fusion.submit, in_flight)
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(fusion.submit, waiting)
    await trio.testing.wait_all_tasks_blocked()
    with pytest.raises(Overloaded, match="broker overloaded"):
        await fusion.submit(Fusable())
    gate.set()
    await waiting.done.wait()
    assert fusion.statistics().requests == 2
