"""Call fusion (consume/fusion.py) on a fake database call, under trio's MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, asynccontextmanager

import attrs
import pytest
import trio
import trio.testing

from queen_trio.consume.fusion import CallFusion, Fusable, FusionStatistics
from queen_trio.errors import DatabaseUnavailable, Overloaded
from queen_trio.storage.holding import HOLD_IDLE_SECONDS
from tests.support.gates import Gate
from tests.support.holds import FakeHold


@attrs.define(eq=False)
class Request(Fusable):
    value: int = 0
    answer: int | None = None


class BadValue(Exception):
    pass


class FakeCall:
    """Doubles each request's value in one call; a batch holding a negative value fails as a
    bad statement would, and `unreachable` fails calls as a lost connection would. `held()`
    keeps calls in flight until the block ends."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.unreachable = False
        self._gate = Gate()

    def held(self) -> AbstractContextManager[None]:
        return self._gate.held()

    async def __call__(self, batch: list[Request]) -> None:
        self.batches.append([r.value for r in batch])
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self._gate.pass_through()
            await trio.lowlevel.checkpoint()
            if self.unreachable:
                raise ConnectionResetError("connection reset (fake)")
            if any(r.value < 0 for r in batch):
                raise BadValue("negative")
            for r in batch:
                r.answer = 2 * r.value
        finally:
            self.in_flight -= 1


@asynccontextmanager
async def running(call: FakeCall, *, callers: int = 1) -> AsyncIterator[CallFusion[Request]]:
    fusion = CallFusion[Request](call, callers=callers)
    async with trio.open_nursery() as nursery:
        await nursery.start(fusion.run)
        yield fusion
        nursery.cancel_scope.cancel()


async def submit_in_turn(fusion: CallFusion[Request], call: FakeCall,
                         *waves: list[Request]) -> dict[int, BaseException]:
    """Submit each wave of requests (a task each) while the calls of the earlier waves are
    held in flight; return once every request settled, with the failures by value."""
    failures: dict[int, BaseException] = {}

    async def one(request: Request) -> None:
        try:
            await fusion.submit(request)
        except Exception as exc:
            failures[request.value] = exc

    async with trio.open_nursery() as nursery:
        with call.held():
            for wave in waves:
                for request in wave:
                    nursery.start_soon(one, request)
                await trio.testing.wait_all_tasks_blocked()
    return failures


async def test_a_lone_request_is_called_at_once(autojump_clock):
    call = FakeCall()
    async with running(call) as fusion:
        started = trio.current_time()
        request = Request(value=3)
        await fusion.submit(request)
        assert request.answer == 6
        assert trio.current_time() == started
        assert call.batches == [[3]]


async def test_requests_arriving_during_a_call_share_the_next_one(autojump_clock):
    call = FakeCall()
    async with running(call) as fusion:
        later = [Request(value=v) for v in (2, 3, 4)]
        assert await submit_in_turn(fusion, call, [Request(value=1)], later) == {}
        assert [r.answer for r in later] == [4, 6, 8]
        assert call.batches[0] == [1]
        assert sorted(call.batches[1]) == [2, 3, 4]
        assert fusion.statistics() == FusionStatistics(calls=2, requests=4, splits=0,
                                                       waiting=0)


async def test_each_caller_keeps_one_call_in_flight(autojump_clock):
    call = FakeCall()
    async with running(call, callers=2) as fusion:
        async with trio.open_nursery() as nursery:
            with call.held():
                for value in range(6):
                    nursery.start_soon(fusion.submit, Request(value=value))
                    await trio.testing.wait_all_tasks_blocked()
                # Two calls in flight; the other four requests wait for the next ones.
                assert fusion.statistics().waiting == 4
    assert call.most_in_flight == 2
    assert sorted(v for batch in call.batches for v in batch) == list(range(6))


async def test_a_failed_fused_call_is_split_so_only_the_bad_request_fails(autojump_clock):
    call = FakeCall()
    async with running(call) as fusion:
        later = [Request(value=v) for v in (1, -1, 2)]
        failures = await submit_in_turn(fusion, call, [Request(value=0)], later)
        assert [r.answer for r in later] == [2, None, 4]
        assert list(failures) == [-1]
        assert isinstance(failures[-1], BadValue)
        assert fusion.statistics().splits == 1
        # The fused call, then each of its requests alone.
        fused, *alone = call.batches[1:]
        assert sorted(fused) == [-1, 1, 2]
        assert alone == [[v] for v in fused]


async def test_a_connection_failure_fails_the_whole_call_without_splitting(autojump_clock):
    call = FakeCall()
    call.unreachable = True
    async with running(call) as fusion:
        failures = await submit_in_turn(fusion, call, [Request(value=0)],
                                        [Request(value=v) for v in (1, 2)])
        assert failures.keys() == {0, 1, 2}
        assert all(isinstance(exc, ConnectionResetError) for exc in failures.values())
        assert len(call.batches) == 2
        assert fusion.statistics() == FusionStatistics(calls=0, requests=3, splits=0,
                                                       waiting=0)


async def test_a_cancelled_caller_still_waits_for_its_answer(autojump_clock):
    call = FakeCall()
    async with running(call) as fusion:
        request = Request(value=5)

        async def hold_the_call_for(seconds: float) -> None:
            with call.held():
                await trio.sleep(seconds)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold_the_call_for, 6)
            await trio.testing.wait_all_tasks_blocked()
            started = trio.current_time()
            with trio.move_on_after(1):
                await fusion.submit(request)
        # Leaving at 1 s would have orphaned what the call does: the caller stayed until the
        # call landed.
        assert trio.current_time() - started == 6
        assert request.answer == 10
        assert fusion.statistics().calls == 1


async def test_a_call_past_its_deadline_fails_its_requests_as_unavailable(autojump_clock):
    call = FakeCall()
    fusion = CallFusion[Request](call, callers=1, deadline_seconds=5)
    async with trio.open_nursery() as nursery:
        await nursery.start(fusion.run)
        request = Request(value=1)
        started = trio.current_time()
        with call.held(), pytest.raises(DatabaseUnavailable, match="longer than its deadline"):
            await fusion.submit(request)
        assert trio.current_time() - started == 5
        assert request.answer is None
        nursery.cancel_scope.cancel()


async def test_past_max_waiting_a_request_is_refused_at_once(autojump_clock):
    call = FakeCall()
    fusion = CallFusion[Request](call, callers=1, max_waiting=2)
    async with trio.open_nursery() as nursery:
        await nursery.start(fusion.run)
        with call.held():
            for value in range(3):  # one in flight, two waiting
                nursery.start_soon(fusion.submit, Request(value=value))
                await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(Overloaded, match="too many requests waiting"):
                await fusion.submit(Request(value=9))
            assert fusion.statistics().requests == 3
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(v for batch in call.batches for v in batch) == [0, 1, 2]
        nursery.cancel_scope.cancel()


def test_statistics_are_frozen():
    stats = CallFusion[Request](FakeCall()).statistics()
    assert stats == FusionStatistics(calls=0, requests=0, splits=0, waiting=0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        stats.calls = 1  # type: ignore[misc]


async def test_a_busy_caller_keeps_its_connection_and_gives_it_back_once_idle(autojump_clock):
    hold, call = FakeHold(), FakeCall()

    async def held_call(batch: list[Request]) -> None:
        hold.take()  # as a held Database.call would
        await call(batch)

    fusion = CallFusion[Request](held_call, callers=1, hold=hold.factory)
    async with trio.open_nursery() as nursery:
        await nursery.start(fusion.run)
        await fusion.submit(Request(value=1))
        await trio.sleep(HOLD_IDLE_SECONDS / 2)
        await fusion.submit(Request(value=2))
        assert hold.holding and hold.given_back_at == []
        last = trio.current_time()
        await trio.sleep(60)
        assert hold.given_back_at == [last + HOLD_IDLE_SECONDS] and not hold.holding
        nursery.cancel_scope.cancel()
    assert call.batches == [[1], [2]]
    assert hold.opened == hold.closed == 1
