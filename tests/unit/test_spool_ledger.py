"""The spool's ledger (push/spool_ledger.py): every count of a spool directory, kept in one
place as records come and go."""

from __future__ import annotations

from collections import Counter

import attrs
import pytest

from queen_trio.push.spool_codec import encode_records
from queen_trio.push.spool_ledger import (
    DirectoryUsage,
    SpoolLedger,
    SpoolStatistics,
    count_pending,
    directory_usage,
)
from tests.support.spool import spool_record


def test_appends_count_per_partition_and_hold_it():
    ledger = SpoolLedger()
    ledger.file_started()
    ledger.appended([spool_record("a", "1"), spool_record("a", "2"), spool_record("b", "3")])
    assert ledger.statistics() == SpoolStatistics(pending=3, failed=0, files=1, replayed=0)
    assert ledger.holds(("q", "a")) and ledger.holds(("q", "b"))
    assert not ledger.holds(("q", "c")) and not ledger.holds(("other", "a"))
    assert ledger.partitions() == {("q", "a"), ("q", "b")}


def test_statistics_are_a_frozen_snapshot():
    ledger = SpoolLedger()
    before = ledger.statistics()
    ledger.appended([spool_record("a", "1")])
    assert before.pending == 0 and ledger.statistics().pending == 1
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        before.pending = 5  # type: ignore[misc]


def test_a_drained_partition_stops_holding_and_a_replayed_file_is_counted_out():
    ledger = SpoolLedger()
    ledger.file_started()
    ledger.appended([spool_record("a", "1"), spool_record("a", "2"), spool_record("b", "3")])
    ledger.partition_drained(("q", "a"), 1)
    assert ledger.holds(("q", "a")) and ledger.pending_total() == 2
    ledger.partition_drained(("q", "a"), 5)  # counted out twice (a paused file): never below 0
    assert not ledger.holds(("q", "a")) and ledger.partitions() == {("q", "b")}
    ledger.partition_drained(("q", "b"), 1)
    assert not ledger.has_pending()
    ledger.file_removed()
    ledger.landed(3)
    assert ledger.statistics() == SpoolStatistics(pending=0, failed=0, files=0, replayed=3)


def test_with_no_file_left_nothing_is_pending():
    ledger = SpoolLedger()
    ledger.opened(Counter({("q", "a"): 2}), files=1, failed=0)
    ledger.settle_when_empty()
    assert ledger.holds(("q", "a"))  # its file is still there
    ledger.file_removed()
    ledger.settle_when_empty()
    assert not ledger.has_pending()


def test_a_recount_replaces_the_pending_counts():
    ledger = SpoolLedger()
    ledger.appended([spool_record("a", "1")])
    ledger.recounted(Counter({("q", "b"): 4}))
    assert ledger.partitions() == {("q", "b")} and ledger.pending_total() == 4


def test_failed_records_are_known_by_id_until_requeued():
    ledger = SpoolLedger()
    poisoned = [spool_record("p", "1"), spool_record("p", "2")]
    ledger.moved_to_failed(poisoned)
    assert ledger.statistics().failed == 2
    assert ledger.is_failed(poisoned[0].message_id)
    assert not ledger.is_failed(spool_record("p", "3").message_id)
    ledger.requeued(poisoned, own_failed=True)
    assert ledger.statistics() == SpoolStatistics(pending=2, failed=0, files=1, replayed=0)
    assert not ledger.is_failed(poisoned[0].message_id) and ledger.holds(("q", "p"))


def test_records_requeued_from_another_workers_failed_are_not_counted_out_of_ours():
    ledger = SpoolLedger()
    ledger.opened(Counter(), files=0, failed=1)
    ledger.requeued([spool_record("p", "theirs")], own_failed=False)
    assert ledger.statistics() == SpoolStatistics(pending=1, failed=1, files=1, replayed=0)


def test_clearing_forgets_everything_but_what_landed():
    ledger = SpoolLedger()
    ledger.file_started()
    ledger.appended([spool_record("a", "1")])
    ledger.moved_to_failed([spool_record("p", "2")])
    ledger.landed(7)
    ledger.cleared()
    assert ledger.statistics() == SpoolStatistics(pending=0, failed=0, files=0, replayed=7)
    assert not ledger.is_failed(spool_record("p", "2").message_id)


def test_counts_read_from_the_files(tmp_path):
    (tmp_path / "failed").mkdir()
    first, second = tmp_path / "spool-000000000001.log", tmp_path / "spool-000000000002.log"
    first.write_bytes(encode_records([spool_record("a", "1"), spool_record("b", "2")]))
    second.write_bytes(encode_records([spool_record("a", "3")]))
    (tmp_path / "failed" / "spool-000000000003.log").write_bytes(
        encode_records([spool_record("p", "4")]))
    assert count_pending([first, second]) == Counter({("q", "a"): 2, ("q", "b"): 1})
    assert directory_usage(tmp_path) == DirectoryUsage(tmp_path, pending=3, failed=1, files=2)
    assert directory_usage(tmp_path / "gone") == DirectoryUsage(
        tmp_path / "gone", pending=0, failed=0, files=0)
