"""One vocabulary for what happened to a push item, a packed group and a segment.

The same `Outcome` travels from parsing (PENDING) through the lane and the spool to the reply,
where `wire` says what the producer sees (DECISIONS: Push).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Outcome(enum.Enum):
    PENDING = "pending"          # not decided yet
    QUEUED = "queued"            # committed
    DUPLICATE = "duplicate"      # its transaction id was already stored: nothing written
    BUFFERED = "buffered"        # in the spool (fsynced); it will land exactly once
    STALE = "stale"              # packed under outdated queue options: repack and retry
    FULL = "full"                # the queue's maxSize refused the group
    UNAVAILABLE = "unavailable"  # the database could not be reached
    FAILED = "failed"            # anything else that kept the group from committing

    @property
    def wire(self) -> str:
        """The per-item status a producer reads: only these four exist on the wire."""
        if self in (Outcome.QUEUED, Outcome.DUPLICATE, Outcome.BUFFERED):
            return self.value
        return "failed"


def http_status(outcomes: Iterable[Outcome]) -> int:
    """201 when nothing failed; 429 when only full queues did; 503 when the database is
    unreachable (and nothing worse failed); 500 otherwise (DECISIONS: Push)."""
    seen = set(outcomes)
    if seen & {Outcome.FAILED, Outcome.STALE, Outcome.PENDING}:
        return 500
    if Outcome.UNAVAILABLE in seen:
        return 503
    if Outcome.FULL in seen:
        return 429
    return 201
