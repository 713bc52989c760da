"""The wake registry's count of parked long polls: a poll counts from its first empty look
until it answers, also while it re-checks (when it is not blocked on the event)."""

from __future__ import annotations

import trio
import trio.testing

from queen_trio.consume.wakeups import ANY_QUEUE, WakeRegistry


def test_a_parked_poll_counts_while_it_rechecks() -> None:
    registry = WakeRegistry()
    with registry.parked("orders"), registry.parked("orders"), registry.parked(None):
        # Nobody is blocked on an event here: both polls are between two looks.
        assert registry.statistics().waiting == {"orders": 2, ANY_QUEUE: 1}
    assert registry.statistics().waiting == {}


async def test_a_notification_reaches_a_parked_poll_and_the_count_follows_it() -> None:
    registry = WakeRegistry()
    woken = trio.Event()

    async def poll() -> None:
        with registry.parked("orders"), registry.watch("orders") as wake:
            await wake.wait()
        woken.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        await trio.testing.wait_all_tasks_blocked()
        assert registry.statistics().waiting == {"orders": 1}
        registry.notify("orders")
        await woken.wait()
    assert registry.statistics().waiting == {}
