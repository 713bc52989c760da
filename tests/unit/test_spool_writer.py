"""The spool's writer (push/spool_writer.py): fsynced appends to the current file, a new file
every `records_per_file`, seals, the file sequence, and a failed write that leaves nothing."""

from __future__ import annotations

import errno
import os

import pytest

from queen_trio.push.spool_codec import encode_records, read_records
from queen_trio.push.spool_ledger import SpoolLedger, SpoolStatistics
from queen_trio.push.spool_writer import SpoolWriter
from tests.support.spool import spool_record


def txids(path) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.transaction_id for r in read_records(path)]


def names(directory) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(p.name for p in directory.glob("spool-*.log"))


async def test_appends_go_to_one_file_until_it_holds_records_per_file(tmp_path):
    ledger = SpoolLedger()
    writer = SpoolWriter(tmp_path, ledger, records_per_file=3)
    await writer.append([spool_record("a", "1"), spool_record("a", "2")])
    await writer.append([spool_record("b", "3"), spool_record("b", "4")])  # may overshoot
    await writer.append([spool_record("a", "5")])
    assert names(tmp_path) == ["spool-000000000001.log", "spool-000000000002.log"]
    assert txids(tmp_path / "spool-000000000001.log") == ["1", "2", "3", "4"]
    assert txids(tmp_path / "spool-000000000002.log") == ["5"]
    assert ledger.statistics() == SpoolStatistics(pending=5, failed=0, files=2, replayed=0)
    assert (tmp_path / "spool-000000000001.log").stat().st_mode & 0o777 == 0o600


async def test_a_sealed_file_is_never_reopened(tmp_path):
    writer = SpoolWriter(tmp_path, SpoolLedger())
    await writer.append([spool_record("a", "1")])
    sealed = await writer.seal()
    await writer.append([spool_record("a", "2")])
    assert [p.name for p in sealed] == ["spool-000000000001.log"]
    assert txids(sealed[0]) == ["1"]
    assert txids(tmp_path / "spool-000000000002.log") == ["2"]
    assert [p.name for p in await writer.seal()] == names(tmp_path)


async def test_numbers_continue_after_what_an_earlier_run_left(tmp_path):
    (tmp_path / "failed").mkdir()
    writer = SpoolWriter(tmp_path, SpoolLedger())
    writer.resume_after([tmp_path / "spool-000000000004.log",
                         tmp_path / "failed" / "spool-000000000009.log",
                         tmp_path / "spool-000000000002.log"])
    await writer.append([spool_record("a", "1")])
    assert names(tmp_path) == ["spool-000000000010.log"]
    # failed/ files share the sequence, so moved back they still sort after older files.
    assert (await writer.new_file(tmp_path / "failed")).name == "spool-000000000011.log"


async def test_a_failed_write_is_cut_back_and_counts_nothing(tmp_path, monkeypatch):
    ledger = SpoolLedger()
    writer = SpoolWriter(tmp_path, ledger)
    await writer.append([spool_record("a", "1")])
    first = tmp_path / "spool-000000000001.log"
    size = first.stat().st_size

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", full_disk)
        with pytest.raises(OSError, match="No space left"):
            await writer.append([spool_record("a", "2"), spool_record("b", "3")])
    assert first.stat().st_size == size and txids(first) == ["1"]
    assert ledger.pending_total() == 1 and not ledger.holds(("q", "b"))
    # Later records start afresh, in a new file.
    await writer.append([spool_record("a", "4")])
    assert txids(first) == ["1"]
    assert txids(tmp_path / "spool-000000000002.log") == ["4"]
    assert ledger.pending_total() == 2


async def test_a_failed_file_taken_back_is_the_newest_and_pending_again(tmp_path):
    failed = tmp_path / "failed"
    failed.mkdir()
    ledger = SpoolLedger()
    writer = SpoolWriter(tmp_path, ledger)
    await writer.append([spool_record("a", "1")])
    records = [spool_record("p", "bad")]
    path = await writer.new_file(failed)
    path.write_bytes(encode_records(records))
    path.with_suffix(".reason").write_text("RuntimeError: no\n")
    ledger.moved_to_failed(records)
    await writer.take_back(path, records, own_failed=True)
    assert list(failed.iterdir()) == []  # the file and its reason
    assert names(tmp_path) == ["spool-000000000001.log", "spool-000000000003.log"]
    assert txids(tmp_path / "spool-000000000003.log") == ["bad"]
    assert ledger.statistics() == SpoolStatistics(pending=2, failed=0, files=2, replayed=0)


async def test_starting_afresh_opens_a_new_file(tmp_path):
    writer = SpoolWriter(tmp_path, SpoolLedger())
    await writer.append([spool_record("a", "1")])
    async with writer.exclusive():
        (tmp_path / "spool-000000000001.log").unlink()
        writer.start_afresh()
    await writer.append([spool_record("a", "2")])
    assert names(tmp_path) == ["spool-000000000002.log"]
