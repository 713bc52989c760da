"""One push outcome from parsing to reply (push/outcome.py), and first-wins dedup and the
per-item answer (push/items.py)."""

from __future__ import annotations

import pytest

from queen_trio import ids
from queen_trio.push.items import first_wins, group_items
from queen_trio.push.outcome import Outcome, http_status
from tests.support.lanes import push_item


def test_only_four_statuses_reach_the_wire():
    assert {o: o.wire for o in Outcome} == {
        Outcome.PENDING: "failed", Outcome.QUEUED: "queued", Outcome.DUPLICATE: "duplicate",
        Outcome.BUFFERED: "buffered", Outcome.STALE: "failed", Outcome.FULL: "failed",
        Outcome.UNAVAILABLE: "failed", Outcome.OVERLOADED: "failed", Outcome.FAILED: "failed"}


@pytest.mark.parametrize(("outcomes", "status"), [
    ([], 201),
    ([Outcome.QUEUED, Outcome.DUPLICATE, Outcome.BUFFERED], 201),
    ([Outcome.QUEUED, Outcome.FULL], 429),
    ([Outcome.FULL, Outcome.UNAVAILABLE], 503),
    ([Outcome.QUEUED, Outcome.OVERLOADED], 503),
    ([Outcome.UNAVAILABLE, Outcome.FAILED], 500),
    ([Outcome.QUEUED, Outcome.STALE], 500),
    ([Outcome.PENDING], 500),
])
def test_the_reply_status_is_the_worst_outcome(outcomes, status):
    assert http_status(outcomes) == status


def test_with_dedup_a_repeated_transaction_id_writes_nothing_and_shares_the_first_outcome():
    items = [push_item("a", index=0), push_item("b", index=1), push_item("a", index=2)]
    writers = first_wins(items, dedup=True)
    assert writers == items[:2]
    assert items[2].winner is items[0]
    items[0].settle(Outcome.QUEUED)
    assert items[2].answer() == (Outcome.DUPLICATE, str(items[0].message_id))
    assert items[2].result()["status"] == "duplicate"


def test_a_repeat_of_a_failed_item_fails_with_its_error():
    first, repeat = push_item("a"), push_item("a", index=1)
    first_wins([first, repeat], dedup=True)
    first.settle(Outcome.FULL, "queue full")
    assert repeat.answer() == (Outcome.FULL, str(first.message_id))
    assert repeat.result()["status"] == "failed"
    assert repeat.result()["error"] == "queue full"


def test_without_dedup_every_item_writes():
    items = [push_item("a"), push_item("a", index=1)]
    assert first_wins(items, dedup=False) == items
    assert items[1].winner is None


def test_first_wins_resets_what_an_earlier_attempt_left():
    item = push_item("a")
    item.settle(Outcome.STALE, "stale")
    item.original_id = "x"
    item.winner = push_item("z")
    assert first_wins([item], dedup=True) == [item]
    assert (item.outcome, item.error, item.original_id, item.winner) == (
        Outcome.PENDING, None, None, None)


def test_a_stored_duplicate_answers_the_original_id_or_zero_when_it_is_gone():
    item = push_item("a")
    item.settle(Outcome.DUPLICATE)
    assert item.answer() == (Outcome.DUPLICATE, ids.ZERO_UUID)
    item.original_id = "0190a8f2-8b7c-7def-8123-456789abcdef"
    assert item.answer() == (Outcome.DUPLICATE, item.original_id)


def test_the_reply_entry_keeps_the_contract_casing_and_errors_only_for_failures():
    item = push_item("tx-1", queue="orders", index=3)
    item.settle(Outcome.QUEUED, "ignored")
    assert item.result() == {"index": 3, "message_id": str(item.message_id),
                             "transaction_id": "tx-1", "queueName": "orders",
                             "status": "queued"}
    item.settle(Outcome.UNAVAILABLE, "database connection unavailable: down")
    assert item.result()["status"] == "failed"
    assert item.result()["error"] == "database connection unavailable: down"


def test_groups_follow_their_first_item_and_keep_request_order():
    items = [push_item("1", queue="a", partition="x"), push_item("2", queue="b"),
             push_item("3", queue="a", partition="x"), push_item("4", queue="a", partition="y")]
    groups = group_items(items)
    assert [g.key for g in groups] == [("a", "x"), ("b", "p"), ("a", "y")]
    assert [[i.transaction_id for i in g.items] for g in groups] == [["1", "3"], ["2"], ["4"]]
