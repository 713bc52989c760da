"""Both tiers: the per-test timeout (pytest-timeout, `timeout` in pyproject.toml), made safe for
Trio tests.

pytest-timeout's signal method raises from a signal handler. Inside `trio.run` that exception
lands in Trio's scheduler, and every later Trio test of the session then fails with "Attempted
to call run() from inside a run()" (pytest-trio#53). So a Trio test's run is cancelled at the
deadline instead, from a timer thread: the test fails alone and its fixtures are torn down.
pytest-timeout's thread method stays behind as the last resort, for a test that ignores
cancellation: it dumps every thread's stack and ends the session. Sync tests keep the signal
method.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_timeout
import trio

# How long after the deadline a Trio test that ignores its cancellation may still run.
HARD_STOP_GRACE_SECONDS = 30


HARD_STOP = pytest.StashKey[threading.Timer]()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if item.get_closest_marker("trio") is None:
        return None  # pytest-timeout's own timer
    run = functools.partial(run_with_deadline, settings.timeout)
    item.add_marker(pytest.mark.trio(run=run), append=False)
    hard_stop = threading.Timer(settings.timeout + HARD_STOP_GRACE_SECONDS, stop_the_session,
                                (item, settings))
    hard_stop.daemon = True
    item.stash[HARD_STOP] = hard_stop
    hard_stop.start()
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    hard_stop = item.stash.get(HARD_STOP, None)
    if hard_stop is None:
        return None  # pytest-timeout's own timer
    hard_stop.cancel()
    del item.stash[HARD_STOP]
    return True


def stop_the_session(item: pytest.Item, settings: Any) -> None:
    item.config.get_terminal_writer().line(
        f"\n{item.nodeid} still runs {HARD_STOP_GRACE_SECONDS} s after its Trio run was "
        "cancelled (it ignores cancellation): every thread's stack, then the session ends")
    pytest_timeout.timeout_timer(item, settings)


def run_with_deadline(seconds: float, async_fn: Callable[[], Awaitable[Any]],
                      **run_kwargs: Any) -> Any:
    """`trio.run(async_fn)`, cancelled (and failed) after `seconds` of wall-clock time, whatever
    clock the run uses."""

    async def guarded() -> Any:
        token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            timer = threading.Timer(seconds, _cancel_from_thread, (token, scope))
            timer.daemon = True
            timer.start()
            try:
                return await async_fn()
            finally:
                timer.cancel()
                if scope.cancel_called:
                    pytest.fail(f"Timeout (>{seconds}s): the test's Trio run was cancelled "
                                "(the traceback above this one shows where it waited)")

    return trio.run(guarded, **run_kwargs)


def _cancel_from_thread(token: trio.lowlevel.TrioToken, scope: trio.CancelScope) -> None:
    try:
        token.run_sync_soon(scope.cancel)
    except trio.RunFinishedError:
        pass
