"""Push items and groups: the identity of every message, and the first-wins dedup rule."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

import attrs

from .. import ids
from .outcome import Outcome

_PENDING, _QUEUED, _DUPLICATE = Outcome.PENDING, Outcome.QUEUED, Outcome.DUPLICATE


class _PushResult(TypedDict):
    index: int
    message_id: str
    transaction_id: str
    queueName: str
    status: str


class PushResult(_PushResult, total=False):
    """An item's entry in the push reply (seed: the mixed casing is the contract); `error`
    only for a failed item."""

    error: str


@attrs.define(slots=True, eq=False)
class PushItem:
    index: int
    queue: str
    partition: str
    transaction_id: str
    payload: bytes
    message_id: ids.Id  # a UUIDv7, assigned before any database attempt
    outcome: Outcome = Outcome.PENDING
    error: str | None = None
    # For a stored duplicate: the original's id (ZERO_UUID when it can no longer be read).
    original_id: str | None = None
    # A within-request (or within-segment) duplicate: the item whose outcome it shares.
    winner: PushItem | None = None
    # Only a transaction push may carry one (seed: traceId is ignored on /push).
    trace_id: bytes | None = None

    def settle(self, outcome: Outcome, error: str | None = None) -> None:
        self.outcome, self.error = outcome, error

    def answer(self) -> tuple[Outcome, str]:
        """(outcome, message id) as answered: a duplicate carries its winner's outcome."""
        if self.winner is not None:
            outcome, message_id = self.winner.answer()
            return (_DUPLICATE if outcome is _QUEUED else outcome), message_id
        if self.outcome is _DUPLICATE:
            return _DUPLICATE, self.original_id or ids.ZERO_UUID
        return self.outcome, str(self.message_id)

    def result(self) -> PushResult:
        """The item's entry in the push reply."""
        outcome, message_id = self.answer()
        entry: PushResult = {
            "index": self.index,
            "message_id": message_id,
            "transaction_id": self.transaction_id,
            "queueName": self.queue,
            "status": outcome.wire,
        }
        error = (self.winner or self).error
        if error is not None and entry["status"] == "failed":
            entry["error"] = error
        return entry


def first_wins(items: Iterable[PushItem], *, dedup: bool) -> list[PushItem]:
    """Reset each item's outcome and return those that write a frame, in order. With dedup,
    a later item whose transaction id an earlier one already carries writes nothing: it
    shares the earlier item's outcome (seed: Deduplication, layer 1)."""
    seen: dict[str, PushItem] = {}
    writers: list[PushItem] = []
    for item in items:
        item.winner = item.error = item.original_id = None
        item.outcome = _PENDING
        if dedup:
            earlier = seen.get(item.transaction_id)
            if earlier is not None:
                item.winner = earlier
                continue
            seen[item.transaction_id] = item
        writers.append(item)
    return writers


@attrs.define(slots=True)
class Group:
    """The items of one request for one (queue, partition): one commit unit."""

    queue: str
    partition: str
    items: list[PushItem] = attrs.Factory(list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.queue, self.partition)


def group_items(items: Iterable[PushItem]) -> list[Group]:
    """Groups in order of their first item; items keep request order inside each."""
    groups: dict[tuple[str, str], Group] = {}
    for item in items:
        key = (item.queue, item.partition)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(item.queue, item.partition)
        group.items.append(item)
    return list(groups.values())
