"""What this broker process has done since it started: requests, pushes, pops, acks, per queue,
request latencies per route and the lane's segment and bundle sizes.

The web layer and the lane's commit hook record here; nothing here touches the database. The
stats sampler (ops/stats.py) turns these cumulative counts into per-interval samples, and the
metrics routes (ops/metrics.py) expose them.

Everything is keyed by a bounded set: the web layer names methods from a fixed list and routes
by their templates, and per-queue counts are kept for queues that exist. A pop may name any
queue; an empty one adds a queue only while fewer than MAX_QUEUES are counted, and the sampler
drops the queues the database does not have (made up, or deleted since).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

# Request latency (seconds): long polls land in the upper buckets.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0, 60.0)
# Messages per segment and segments per bundle.
SEGMENT_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000)
BUNDLE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# Past this many queues counted, an empty pop of a queue not counted yet counts only in the
# totals (nothing proves its queue exists; the sampler prunes the ones that do not).
MAX_QUEUES = 10_000


@attrs.frozen
class HistogramSnapshot:
    buckets: tuple[float, ...]  # upper bounds; +Inf is implied
    counts: tuple[int, ...]     # observations per bucket (not cumulative), +Inf last
    total: float                # sum of the observed values
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"buckets": list(self.buckets), "counts": list(self.counts),
                "sum": self.total, "count": self.count}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> HistogramSnapshot:
        return cls(tuple(value["buckets"]), tuple(value["counts"]), float(value["sum"]),
                   int(value["count"]))


class Histogram:
    def __init__(self, buckets: Sequence[float]) -> None:
        self._buckets = tuple(buckets)
        self._counts = [0] * (len(self._buckets) + 1)
        self._sum = 0.0
        self._count = 0

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self._buckets, value)] += 1
        self._sum += value
        self._count += 1

    def snapshot(self) -> HistogramSnapshot:
        return HistogramSnapshot(self._buckets, tuple(self._counts), self._sum, self._count)


@attrs.frozen
class QueueActivity:
    """One queue's counts; Activity counts them in a Counter keyed by these names."""

    pushed: int
    pop_requests: int
    pop_empty: int
    popped: int
    acked: int
    nacked: int
    ack_failed: int
    dead_lettered: int

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> QueueActivity:
        return cls(**{field.name: counts.get(field.name, 0) for field in attrs.fields(cls)})


@attrs.frozen
class ActivityStatistics:
    http_requests: int
    http_errors: int            # answers with a 5xx status
    push_requests: int
    # Push and transaction bodies in the 2.6 client's binary forms, by form
    # (plain, zstd, frames, transaction).
    binary_bodies: Mapping[str, int]
    push_messages: int          # items stored (queued) by pushes and transactions
    push_items: Mapping[str, int]  # push items by their wire status
    pop_requests: int
    pop_empty: int
    pop_messages: int
    ack_requests: int
    ack_messages: int           # acks that settled their message (completed or dead-lettered)
    nacked: int                 # failed/retry acks applied: the delivery comes back
    ack_failed: int             # acks refused
    dead_lettered: int          # acks that dead-lettered their message
    transactions: int
    queues: Mapping[str, QueueActivity]
    # (method, route template, status) -> answers; (method, route template) -> latency
    responses: Mapping[tuple[str, str, int], int]
    latency: Mapping[tuple[str, str], HistogramSnapshot]
    segment_sizes: HistogramSnapshot
    bundle_sizes: HistogramSnapshot
    # Messages conflating groups' pops moved the cursor past (docs/decisions.md#conflation).
    superseded: int = 0


class Activity:
    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._binary: Counter[str] = Counter()
        self._push_items: Counter[str] = Counter()
        self._queues: dict[str, Counter[str]] = {}
        self._responses: Counter[tuple[str, str, int]] = Counter()
        self._latency: dict[tuple[str, str], Histogram] = {}
        self._segments = Histogram(SEGMENT_BUCKETS)
        self._bundles = Histogram(BUNDLE_BUCKETS)

    def _queue(self, name: str) -> Counter[str]:
        counts = self._queues.get(name)
        if counts is None:
            counts = self._queues[name] = Counter()
        return counts

    # -- recorded by the web layer -------------------------------------------------------------

    def record_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self._counts["http_requests"] += 1
        if status >= 500:
            self._counts["http_errors"] += 1
        self._responses[(method, route, status)] += 1
        histogram = self._latency.get((method, route))
        if histogram is None:
            histogram = self._latency[(method, route)] = Histogram(LATENCY_BUCKETS)
        histogram.observe(seconds)

    def record_binary(self, form: str) -> None:
        """A binary push or transaction body read (push/binary.py's form names)."""
        self._binary[form] += 1

    def record_push(self, results: Iterable[Mapping[str, Any]]) -> None:
        self._counts["push_requests"] += 1
        for result in results:
            status = result["status"]
            self._push_items[status] += 1
            if status == "queued":
                self._counts["push_messages"] += 1
                self._queue(result["queueName"])["pushed"] += 1

    def record_pop(self, queue: str | None, reply: Mapping[str, Any] | None, *,
                   superseded: int = 0) -> None:
        """A pop's reply (None: nothing was delivered); namespace pops name no queue.
        `superseded`: messages a conflating claim moved the cursor past."""
        self._counts["pop_requests"] += 1
        self._counts["superseded"] += superseded
        messages = [] if reply is None else reply["messages"]
        if not messages:
            self._counts["pop_empty"] += 1
            if queue is not None and (queue in self._queues or len(self._queues) < MAX_QUEUES):
                counts = self._queue(queue)
                counts["pop_requests"] += 1
                counts["pop_empty"] += 1
            return
        self._counts["pop_messages"] += len(messages)
        assert reply is not None
        by_queue = Counter(m.get("queue", queue or reply["queue"]) for m in messages)
        for name, n in by_queue.items():
            counts = self._queue(name)
            counts["pop_requests"] += 1
            counts["popped"] += n

    def record_acks(self, statuses: Sequence[str], results: Sequence[Mapping[str, Any]], *,
                    request: bool = True) -> None:
        """Acks (their statuses) and their results, in the same order."""
        if request:
            self._counts["ack_requests"] += 1
        for status, result in zip(statuses, results, strict=False):
            name = result.get("queueName")
            counts = self._queue(name) if name else Counter[str]()
            if not result["success"]:
                self._counts["ack_failed"] += 1
                counts["ack_failed"] += 1
            elif result.get("dlq") or status in ("completed", "success", "dlq"):
                self._counts["ack_messages"] += 1
                counts["acked"] += 1
                if result.get("dlq"):
                    self._counts["dead_lettered"] += 1
                    counts["dead_lettered"] += 1
            else:
                self._counts["nacked"] += 1
                counts["nacked"] += 1

    def record_transaction(self, ack_statuses: Sequence[str],
                           reply: Mapping[str, Any]) -> None:
        """A transaction's reply; `ack_statuses` are its ack operations' statuses in order."""
        self._counts["transactions"] += 1
        if not reply.get("success"):
            return
        results = reply.get("results", [])
        for result in results:
            if result.get("type") == "push" and result.get("status") == "queued":
                self._counts["push_messages"] += 1
                self._queue(result["queueName"])["pushed"] += 1
        self.record_acks(ack_statuses, [r for r in results if r.get("type") == "ack"],
                         request=False)

    def forget_queues(self, names: Iterable[str],
                      unchanged_since: Mapping[str, QueueActivity]) -> list[str]:
        """Drop the counts of queues that do not exist (deleted, or named by a pop only), of
        those with nothing counted since the snapshot `unchanged_since`; the names dropped."""
        dropped = []
        for name in names:
            counts = self._queues.get(name)
            if counts is not None and name in unchanged_since and (
                    QueueActivity.of(counts) == unchanged_since[name]):
                del self._queues[name]
                dropped.append(name)
        return dropped

    # -- recorded by the lane's commit hook ----------------------------------------------------

    def record_bundle(self, segment_sizes: Sequence[int]) -> None:
        self._bundles.observe(len(segment_sizes))
        for size in segment_sizes:
            self._segments.observe(size)

    def statistics(self) -> ActivityStatistics:
        c = self._counts
        return ActivityStatistics(
            http_requests=c["http_requests"], http_errors=c["http_errors"],
            push_requests=c["push_requests"], push_messages=c["push_messages"],
            binary_bodies=dict(self._binary),
            push_items=dict(self._push_items),
            pop_requests=c["pop_requests"], pop_empty=c["pop_empty"],
            pop_messages=c["pop_messages"], ack_requests=c["ack_requests"],
            ack_messages=c["ack_messages"], nacked=c["nacked"], ack_failed=c["ack_failed"],
            dead_lettered=c["dead_lettered"], transactions=c["transactions"],
            queues={name: QueueActivity.of(q) for name, q in self._queues.items()},
            responses=dict(self._responses),
            latency={key: h.snapshot() for key, h in self._latency.items()},
            segment_sizes=self._segments.snapshot(), bundle_sizes=self._bundles.snapshot(),
            superseded=c["superseded"],
        )
