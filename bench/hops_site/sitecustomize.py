"""bench/latency_hops.py's probe: loaded by every broker process it starts (this directory is
put on their PYTHONPATH, with HOP_LOG set), it stamps `time.perf_counter()` (CLOCK_MONOTONIC,
one clock for every process of the machine) at each hop of a push -> woken pop trip, one line
per hop in HOP_LOG.<pid>. A benchmark's probe into the broker's functions, never shipped."""

from __future__ import annotations

import os
import time

if os.environ.get("HOP_LOG"):
    import queen_trio.broker as _broker
    import queen_trio.consume.pop as _pop
    import queen_trio.consume.wakeups as _wakeups
    import queen_trio.push.bundle as _bundle
    import queen_trio.push.lane as _lane
    import queen_trio.web.app as _app
    import queen_trio.web.connections as _connections

    _out = open(f"{os.environ['HOP_LOG']}.{os.getpid()}", "a", buffering=1)  # noqa: SIM115

    def _mark(hop: str) -> None:
        _out.write(f"{time.perf_counter():.6f} {hop}\n")

    _receive_some = _connections._TimedStream._receive_some
    _app_call = _app.App.__call__
    _submit = _lane.PushLane.submit_nowait
    _commit_once = _lane.ShardCommitter._commit_once
    _run_bundle = _bundle.run_bundle
    _on_notify = _wakeups.NotifyListener._on_notify
    _claim = _pop.Consumer._claim
    _claim_many = _pop.Consumer._claim_many
    _consumer_pop = _pop.Consumer.pop

    async def _receive_some_(self, max_bytes):  # type: ignore[no-untyped-def]
        data = await _receive_some(self, max_bytes)
        if data:
            _mark("bytes_in")
        return data

    async def _app_call_(self, scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            _mark("app_call")
        return await _app_call(self, scope, receive, send)

    def _submit_(self, packed):  # type: ignore[no-untyped-def]
        _mark("lane_submit")
        return _submit(self, packed)

    async def _commit_once_(self, bundle):  # type: ignore[no-untyped-def]
        _mark("shard_dispatch")
        await _commit_once(self, bundle)
        _mark("shard_settled")

    async def _run_bundle_(conn, segments, **kwargs):  # type: ignore[no-untyped-def]
        _mark("aio_bundle_start")
        rows = await _run_bundle(conn, segments, **kwargs)
        _mark("aio_bundle_end")
        return rows

    def _on_notify_(self, *args):  # type: ignore[no-untyped-def]
        _mark("notify_received")
        return _on_notify(self, *args)

    async def _claim_(self, *args):  # type: ignore[no-untyped-def]
        _mark("claim_submit")
        return await _claim(self, *args)

    async def _claim_many_(self, batch):  # type: ignore[no-untyped-def]
        _mark("claim_dispatch")
        await _claim_many(self, batch)
        _mark("claim_back")

    async def _consumer_pop_(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        delivery = await _consumer_pop(self, *args, **kwargs)
        if delivery is not None:
            _mark("pop_answered")
        return delivery

    _connections._TimedStream._receive_some = _receive_some_  # type: ignore[method-assign]
    _app.App.__call__ = _app_call_  # type: ignore[method-assign]
    _lane.PushLane.submit_nowait = _submit_  # type: ignore[method-assign]
    _lane.ShardCommitter._commit_once = _commit_once_  # type: ignore[method-assign]
    _bundle.run_bundle = _run_bundle_
    _broker.run_bundle = _run_bundle_  # type: ignore[attr-defined]
    _wakeups.NotifyListener._on_notify = _on_notify_  # type: ignore[method-assign]
    _pop.Consumer._claim = _claim_  # type: ignore[method-assign]
    _pop.Consumer._claim_many = _claim_many_  # type: ignore[method-assign]
    _pop.Consumer.pop = _consumer_pop_  # type: ignore[method-assign]
