"""The push lane's rules (push/lane.py) on a fake push_bundle, under trio's MockClock.

The autojump clock runs every timer at once in virtual time, so "the clock did not move" means
"nothing waited on a timer", and the idle and backstop timers are tested without sleeping.
"""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from queen_trio.push.lane import LaneClosed, LaneStatistics, PushLane
from queen_trio.push.outcome import Outcome
from queen_trio.storage.holding import HOLD_IDLE_SECONDS
from tests.support.holds import FakeHold
from tests.support.lanes import FakePushBundle, packed_group, running_lane


async def settled(*groups):
    """The groups' outcomes once all are known. Under the autojump clock, a group that would
    never settle fails the test at once (the clock jumps to the deadline)."""
    with trio.fail_after(3600):
        for packed in groups:
            await packed.done.wait()
    return [packed.outcome for packed in groups]


async def push(lane, *groups):
    """Submit the groups; their outcomes once settled."""
    for packed in groups:
        lane.submit_nowait(packed)
    return await settled(*groups)


async def submit_during_a_flush(lane, store, first, *waiting):
    """Submit `first`, then `waiting` while first's bundle is in flight; let it land once every
    flusher has handed the shard what it could."""
    with store.held():
        lane.submit_nowait(first)
        await store.wait_for_calls(1)
        for packed in waiting:
            lane.submit_nowait(packed)
        await trio.testing.wait_all_tasks_blocked()


async def test_a_lone_group_dispatches_on_arrival(autojump_clock):
    store = FakePushBundle()
    # A 60 s backstop tick and a 600 s idle timeout: neither may delay the push.
    async with running_lane(store, tick_seconds=60, idle_seconds=600) as lane:
        started = trio.current_time()
        packed = packed_group("a")
        assert await push(lane, packed) == [Outcome.QUEUED]
        assert trio.current_time() == started
        assert store.calls == [[("p", ["a"])]]
        assert packed.writers[0].outcome is Outcome.QUEUED


async def test_a_group_arriving_while_the_shard_waits_for_its_tick_goes_at_once(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store, tick_seconds=60) as lane:
        first = packed_group("a")
        await push(lane, first)
        # The shard now waits up to its tick for more; a group in the middle is not held.
        await trio.sleep(10)
        arrived = trio.current_time()
        second = packed_group("b")
        await push(lane, second)
        assert trio.current_time() == arrived
        # Long after the tick found nothing (the shard idles): still no wait.
        await trio.sleep(1000)
        arrived = trio.current_time()
        third = packed_group("c")
        await push(lane, third)
        assert trio.current_time() == arrived
    assert store.committed() == ["a", "b", "c"]


async def test_groups_arriving_during_a_flush_are_fused_into_the_next_segment_in_order(
        autojump_clock):
    store = FakePushBundle()
    async with running_lane(store) as lane:
        first = packed_group("a")
        waiting = [packed_group("b", "c"), packed_group("d"), packed_group("e")]
        await submit_during_a_flush(lane, store, first, *waiting)
        assert await settled(first, *waiting) == [Outcome.QUEUED] * 4
        assert store.calls == [[("p", ["a"])], [("p", ["b", "c", "d", "e"])]]
        assert lane.statistics().fused_groups == 3
    assert store.committed() == ["a", "b", "c", "d", "e"]


async def test_groups_packed_under_other_assumptions_are_not_fused(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store) as lane:
        first = packed_group("a")
        waiting = [packed_group("b"), packed_group("c", dedup=False), packed_group("d")]
        await submit_during_a_flush(lane, store, first, *waiting)
        await settled(first, *waiting)
    # Consecutive groups of the same assumptions fuse; the order is kept across the runs.
    assert store.calls == [[("p", ["a"])], [("p", ["b"])], [("p", ["c"])], [("p", ["d"])]]


async def test_a_fused_segment_resolves_a_repeated_transaction_id_first_wins(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store) as lane:
        first, earlier, later = packed_group("a"), packed_group("x"), packed_group("x", "y")
        await submit_during_a_flush(lane, store, first, earlier, later)
        await settled(first, earlier, later)
    assert store.calls[1] == [("p", ["x", "y"])]
    winner, repeat = earlier.group.items[0], later.group.items[0]
    assert repeat.answer() == (Outcome.DUPLICATE, str(winner.message_id))
    assert later.group.items[1].answer()[0] is Outcome.QUEUED


async def test_at_most_one_flush_is_in_flight_per_partition(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store, shards=2) as lane:
        groups = []
        for round_ in range(20):
            for partition in ("p0", "p1", "p2"):
                packed = packed_group(f"{partition}-{round_}", partition=partition)
                lane.submit_nowait(packed)
                groups.append(packed)
            await trio.lowlevel.checkpoint()
        assert set(await settled(*groups)) == {Outcome.QUEUED}
    assert max(store.most_in_flight.values()) == 1
    for bundle in store.calls:
        partitions = [partition for partition, _ in bundle]
        assert len(partitions) == len(set(partitions))
    for partition in ("p0", "p1", "p2"):
        assert store.committed(partition) == [f"{partition}-{n}" for n in range(20)]


async def test_a_shard_bundles_every_ready_segment(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store, shards=1) as lane:
        first = packed_group("a", partition="p0")
        waiting = [packed_group(f"b{n}", partition=f"p{n}") for n in (1, 2, 3)]
        await submit_during_a_flush(lane, store, first, *waiting)
        await settled(first, *waiting)
        # One bundle for the three ready segments (flushers run in no set order).
        assert [sorted(call) for call in store.calls] == [
            [("p0", ["a"])], [("p1", ["b1"]), ("p2", ["b2"]), ("p3", ["b3"])]]
        stats = lane.statistics()
        assert (stats.bundles, stats.segments) == (2, 4)


class ShardSteps(trio.abc.Instrument):
    """When the shard committer's task runs (virtual time)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("ShardCommitter.run"):
            self.times.append(trio.current_time())


async def test_the_backstop_tick_rechecks_once_after_activity_then_the_shard_blocks(
        autojump_clock):
    store = FakePushBundle()
    async with running_lane(store, tick_seconds=5, idle_seconds=10_000) as lane:
        packed = packed_group("a")
        await push(lane, packed)
        committed_at = trio.current_time()
        steps = ShardSteps()
        trio.lowlevel.add_instrument(steps)
        try:
            await trio.sleep(1000)
        finally:
            trio.lowlevel.remove_instrument(steps)
    # One re-check when the tick after the commit expires, and none while the shard is idle.
    assert steps.times == [committed_at + 5]


async def test_an_idle_flusher_retires_and_is_recreated(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store, idle_seconds=5) as lane:
        first = packed_group("a")
        await push(lane, first)
        assert lane.statistics().active_flushers == 1
        await trio.sleep(4)
        assert lane.statistics().active_flushers == 1
        await trio.sleep(2)
        assert lane.statistics().active_flushers == 0
        second = packed_group("b")
        lane.submit_nowait(second)
        assert lane.statistics().active_flushers == 1
        assert await settled(second) == [Outcome.QUEUED]
    assert store.committed() == ["a", "b"]


async def test_a_failed_bundle_is_split_and_only_the_bad_segment_fails(autojump_clock):
    store = FakePushBundle()
    store.poison = {"bad"}
    async with running_lane(store, shards=1) as lane:
        first = packed_group("a", partition="p0")
        good1 = packed_group("g1", partition="p1")
        bad = packed_group("bad", partition="p2")
        good2 = packed_group("g2", partition="p3")
        await submit_during_a_flush(lane, store, first, good1, bad, good2)
        outcomes = await settled(good1, bad, good2)
        assert outcomes == [Outcome.QUEUED, Outcome.FAILED, Outcome.QUEUED]
        split_bundle, *alone = store.calls[1:]
        assert sorted(split_bundle) == [("p1", ["g1"]), ("p2", ["bad"]), ("p3", ["g2"])]
        assert alone == [[segment] for segment in split_bundle]
        (item,) = bad.group.items
        assert item.outcome is Outcome.FAILED
        assert item.error == "PoisonedSegment: poisoned transaction id"
        stats = lane.statistics()
        assert (stats.bundle_splits, stats.failed_segments) == (1, 1)


async def test_a_failed_fused_segment_is_retried_group_by_group(autojump_clock):
    store = FakePushBundle()
    store.poison = {"bad"}
    async with running_lane(store) as lane:
        first = packed_group("a")
        waiting = [packed_group("g1"), packed_group("bad", "g2"), packed_group("g3")]
        await submit_during_a_flush(lane, store, first, *waiting)
        outcomes = await settled(*waiting)
    assert outcomes == [Outcome.QUEUED, Outcome.FAILED, Outcome.QUEUED]
    assert store.calls[1:] == [[("p", ["g1", "bad", "g2", "g3"])],
                               [("p", ["g1"])], [("p", ["bad", "g2"])], [("p", ["g3"])]]
    # The bad group fails whole (one commit unit); the others landed, in order.
    assert [item.outcome for item in waiting[1].group.items] == [Outcome.FAILED] * 2
    assert store.committed() == ["a", "g1", "g3"]


async def test_a_connection_failure_answers_unavailable_without_splitting(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store, shards=1) as lane:
        store.unreachable = True
        first = packed_group("a", partition="p0")
        waiting = [packed_group("b", partition="p1"), packed_group("c", partition="p2")]
        await submit_during_a_flush(lane, store, first, *waiting)
        outcomes = await settled(first, *waiting)
        assert outcomes == [Outcome.UNAVAILABLE] * 3
        # The shard did not retry segment by segment: the database is down for all of them.
        assert len(store.calls) == 2
        (item,) = waiting[0].group.items
        assert item.error is not None
        assert item.error.startswith("database connection unavailable: ")
        assert item.result()["status"] == "failed"
        assert lane.statistics().bundle_splits == 0


async def test_an_overloaded_pool_answers_overloaded_without_splitting(autojump_clock):
    store = FakePushBundle()
    store.overloaded = True
    async with running_lane(store, shards=1) as lane:
        first = packed_group("a", partition="p0")
        waiting = [packed_group("b", partition="p1"), packed_group("c", partition="p2")]
        await submit_during_a_flush(lane, store, first, *waiting)
        assert await settled(first, *waiting) == [Outcome.OVERLOADED] * 3
        assert len(store.calls) == 2
        assert waiting[0].group.items[0].error == (
            "broker overloaded: no connection free in the pool (fake)")
        assert lane.statistics().bundle_splits == 0


async def test_a_commit_past_its_deadline_answers_unavailable(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store, deadline_seconds=30) as lane:
        packed = packed_group("a")
        with store.held():
            started = trio.current_time()
            assert await push(lane, packed) == [Outcome.UNAVAILABLE]
            assert trio.current_time() - started == 30
        # Whether it landed is unknown: the publisher spools it, and the replay finds out.
        assert packed.group.items[0].error == (
            "database connection unavailable: the commit took longer than its deadline")
        # The shard goes on with the next bundle.
        assert await push(lane, packed_group("b")) == [Outcome.QUEUED]


async def test_pending_bytes_count_what_is_accepted_and_not_settled(autojump_clock):
    store = FakePushBundle()
    async with running_lane(store) as lane:
        groups = [packed_group("a", "b"), packed_group("c", partition="p2")]
        with store.held():
            for packed in groups:
                lane.submit_nowait(packed)
            await trio.testing.wait_all_tasks_blocked()
            assert lane.statistics().pending_bytes == sum(
                len(frame) for packed in groups for frame in packed.frames)
        await settled(*groups)
        assert lane.statistics().pending_bytes == 0


async def test_close_drains_every_accepted_group_and_refuses_new_ones(autojump_clock):
    store = FakePushBundle()
    groups = []
    async with running_lane(store, shards=2) as lane:
        with store.held():
            for n in range(30):
                packed = packed_group(f"t{n}", partition=f"p{n % 4}")
                lane.submit_nowait(packed)
                groups.append(packed)
            await store.wait_for_calls(1)
            lane.close()
            with pytest.raises(LaneClosed):
                lane.submit_nowait(packed_group("late"))
    # running_lane returned: the lane's run ended only after every accepted group settled.
    assert all(packed.done.is_set() for packed in groups)
    assert {packed.outcome for packed in groups} == {Outcome.QUEUED}
    assert lane.statistics().active_flushers == 0
    with trio.fail_after(1):
        await lane.wait_closed()
    assert sorted(txid for _, txid in store.log) == sorted(f"t{n}" for n in range(30))


async def test_statistics_count_segments_bundles_fusions_splits_and_failures(autojump_clock):
    store = FakePushBundle()
    store.poison = {"bad"}
    async with running_lane(store, shards=1) as lane:
        assert lane.statistics() == LaneStatistics(
            active_flushers=0, pending_bytes=0, segments=0, bundles=0, fused_groups=0,
            bundle_splits=0, failed_segments=0)
        first = packed_group("a", partition="p0")
        # b and c wait for a's flush on p0 (fused); d and bad are ready for the next bundle.
        fused = [packed_group("b", partition="p0"), packed_group("c", partition="p0")]
        others = [packed_group("d", partition="p1"), packed_group("bad", partition="p2")]
        await submit_during_a_flush(lane, store, first, *fused, *others)
        await settled(first, *fused, *others)
        stats = lane.statistics()
    # Committed: [a], [d] and [b+c]; [d, bad] failed, was split, and bad failed alone.
    assert [sorted(call) for call in store.calls] == [
        [("p0", ["a"])], [("p1", ["d"]), ("p2", ["bad"])], *store.calls[2:4],
        [("p0", ["b", "c"])]]
    assert stats == LaneStatistics(active_flushers=3, pending_bytes=0, segments=3, bundles=3,
                                   fused_groups=2, bundle_splits=1, failed_segments=1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stats.segments = 0  # type: ignore[misc]


async def test_a_busy_shard_keeps_its_connection_and_gives_it_back_once_idle(autojump_clock):
    store, hold = FakePushBundle(), FakeHold()

    async def commit(segments):
        hold.take()  # as a held Database.call would
        return await store.commit(segments)

    lane = PushLane(commit, shards=1, tick_seconds=5, idle_seconds=10_000, hold=hold.factory)
    async with trio.open_nursery() as nursery:
        await nursery.start(lane.run)
        first = trio.current_time()
        await push(lane, packed_group("a"))
        await trio.sleep(2)  # within the backstop tick: still held, and used again
        await push(lane, packed_group("b"))
        assert hold.holding and hold.given_back_at == []
        second = trio.current_time()
        await trio.sleep(60)
        # Given back once the tick found nothing and HOLD_IDLE_SECONDS passed without a call.
        assert hold.given_back_at == [second + 5 + HOLD_IDLE_SECONDS]
        assert not hold.holding and first < second
        # Taken again by the next bundle, and given back when the lane ends.
        await push(lane, packed_group("c"))
        lane.close()
    assert hold.opened == hold.closed == 1
    assert len(hold.given_back_at) == 2
