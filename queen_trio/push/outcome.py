"""One vocabulary for what happened to a push item, a packed group and a segment.

The same `Outcome` travels from parsing (PENDING) through the lane and the spool to the reply,
where `wire` says what the producer sees (docs/decisions.md#item-statuses).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Outcome(enum.Enum):
    """Each member's `wire` is the per-item status a producer reads: only queued, duplicate,
    buffered and failed exist on the wire. (An attribute, not a property: replies read it
    once per item.)"""

    wire: str

    PENDING = ("pending", "failed")              # not decided yet
    QUEUED = ("queued", "queued")                # committed
    DUPLICATE = ("duplicate", "duplicate")       # transaction id already stored: nothing written
    BUFFERED = ("buffered", "buffered")          # in the spool (fsynced); lands exactly once
    STALE = ("stale", "failed")                  # packed under outdated queue options: repack
    FULL = ("full", "failed")                    # the queue's maxSize refused the group
    UNAVAILABLE = ("unavailable", "failed")      # the database could not be reached
    OVERLOADED = ("overloaded", "failed")        # the broker's bounds refused it: come back
    FAILED = ("failed", "failed")                # anything else that kept the group out

    def __new__(cls, value: str, wire: str) -> Outcome:
        member = object.__new__(cls)
        member._value_ = value
        member.wire = wire
        return member


def http_status(outcomes: Iterable[Outcome]) -> int:
    """201 when nothing failed; 429 when only full queues did; 503 when the database is
    unreachable or the broker overloaded (and nothing worse failed); 500 otherwise
    (docs/decisions.md#item-statuses)."""
    seen = set(outcomes)
    if seen & {Outcome.FAILED, Outcome.STALE, Outcome.PENDING}:
        return 500
    if seen & {Outcome.UNAVAILABLE, Outcome.OVERLOADED}:
        return 503
    if Outcome.FULL in seen:
        return 429
    return 201
