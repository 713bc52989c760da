"""The spool's directories without PostgreSQL: adoption of what no live broker holds, and the
held markers that keep a partition's order across workers."""

from __future__ import annotations

import pytest

from queen_trio.errors import ConfigError
from queen_trio.push.spool import (
    Spool,
    SpoolRecord,
    claim_spool_root,
    encode_record,
    read_records,
)
from queen_trio.push.spool_root import (
    hold_directory,
    lock_marker,
    marker_path,
    worker_directory,
)


def is_held(root, queue: str, partition: str) -> bool:  # type: ignore[no-untyped-def]
    """A partition is held while its marker exists."""
    return marker_path(root, queue, partition).exists()


def record(partition: str, txid: str, stamp: int = 0) -> SpoolRecord:
    return SpoolRecord(queue="q", partition=partition, message_id=txid.encode().ljust(16, b"."),
                       transaction_id=txid, producer_sub=None, trace_id=None, payload=b"1",
                       encrypted=False, stamp=stamp)


def write(path, *records: SpoolRecord) -> None:  # type: ignore[no-untyped-def]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(encode_record(r) for r in records))


def txids(directory) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.transaction_id for path in sorted(directory.glob("spool-*.log"))
            for r in read_records(path)]


def test_a_supervisor_adopts_a_single_brokers_files_and_those_of_workers_beyond_its_count(
        tmp_path):
    write(tmp_path / "spool-000000000001.log", record("a", "single"))
    write(worker_directory(tmp_path, 3) / "spool-000000000001.log", record("b", "third"))
    write(worker_directory(tmp_path, 2) / "spool-000000000004.log", record("c", "second"))
    with claim_spool_root(tmp_path, workers=2):
        assert txids(worker_directory(tmp_path, 1)) == ["single", "third"]
        assert txids(worker_directory(tmp_path, 2)) == ["second"]  # worker 2 replays its own
        assert txids(tmp_path) == [] and txids(worker_directory(tmp_path, 3)) == []
        # Every partition spooled anywhere is held before a worker starts.
        assert all(is_held(tmp_path, "q", p) for p in "abc")
        assert not is_held(tmp_path, "q", "d")
        # One supervisor (or single broker) per root.
        with pytest.raises(ConfigError, match="belongs to another running broker"):
            hold_directory(tmp_path)


def test_a_directory_held_by_a_live_worker_is_not_adopted(tmp_path):
    write(worker_directory(tmp_path, 3) / "spool-000000000001.log", record("b", "live"))
    held = hold_directory(worker_directory(tmp_path, 3))
    try:
        with claim_spool_root(tmp_path, workers=2):
            assert txids(worker_directory(tmp_path, 3)) == ["live"]
    finally:
        held.close()


async def test_a_single_broker_adopts_every_workers_directory(tmp_path):
    write(worker_directory(tmp_path, 1) / "spool-000000000002.log", record("a", "one"))
    write(worker_directory(tmp_path, 2) / "spool-000000000001.log", record("a", "two"))
    spool = Spool(tmp_path, adopt_from=[worker_directory(tmp_path, k) for k in (1, 2)])
    await spool.open()
    try:
        assert sorted(txids(tmp_path)) == ["one", "two"]
        assert spool.statistics().pending == 2 and spool.holds("q", "a")
    finally:
        await spool.close()


async def test_appends_stamp_records_in_order_under_the_partitions_marker(tmp_path):
    first = Spool(worker_directory(tmp_path, 1), root=tmp_path)
    second = Spool(worker_directory(tmp_path, 2), root=tmp_path)
    await first.open()
    await second.open()
    try:
        assert not second.holds("q", "p")
        await first.append([record("p", "1")])
        assert second.holds("q", "p")  # the other worker sees it: it spools "2" behind
        await second.append([record("p", "2")])
        await first.append([record("p", "3"), record("other", "x")])
        spooled = [r for k in (1, 2) for path in worker_directory(tmp_path, k).glob("*.log")
                   for r in read_records(path) if r.partition == "p"]
        by_stamp = sorted(spooled, key=lambda r: r.stamp)
        assert [r.transaction_id for r in by_stamp] == ["1", "2", "3"]
        assert len({r.stamp for r in spooled}) == 3
        # A replayer removes the marker once the partition landed: pushes go straight again
        # (on a worker that spooled none of it itself).
        marker = lock_marker(marker_path(tmp_path, "q", "p"), create=False)
        assert marker is not None
        marker.release(remove=True)
        third = Spool(worker_directory(tmp_path, 3), root=tmp_path)
        assert not third.holds("q", "p") and third.holds("q", "other")
    finally:
        await first.close()
        await second.close()
