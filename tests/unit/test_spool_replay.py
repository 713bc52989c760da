"""The spool's replayer (push/spool_replay.py) on an in-memory store: sealed files drain in
stamp order, a file goes only once every record in it is through, a transient failure pauses,
any other moves the chunk to failed/ with the reason, and failed/ comes back on demand."""

from __future__ import annotations

import itertools

import trio
import trio.testing

from queen_trio.errors import DatabaseUnavailable
from queen_trio.push.spool_ledger import SpoolStatistics
from queen_trio.push.spool_replay import MAX_RETRY_SECONDS, gather
from queen_trio.push.spool_root import is_held, lock_marker, marker_path, worker_directory
from tests.support.spool import FakeStore, SpoolParts, spool_record


async def test_sealed_files_drain_in_order_and_go_once_landed(tmp_path):
    spool = SpoolParts(tmp_path, records_per_file=2)
    await spool.append(spool_record("a", "a1"), spool_record("b", "b1"))
    await spool.append(spool_record("a", "a2"))
    store = FakeStore()
    assert await spool.replayer.replay(store.land) == 3
    assert store.transaction_ids("a") == ["a1", "a2"] and store.transaction_ids("b") == ["b1"]
    assert spool.ledger.statistics() == SpoolStatistics(pending=0, failed=0, files=0,
                                                        replayed=3)
    assert list(tmp_path.glob("spool-*")) == []
    # Every partition landed: pushes to it go straight again.
    assert not is_held(tmp_path, "q", "a") and not is_held(tmp_path, "q", "b")


async def test_a_transient_failure_pauses_and_the_next_round_resumes(tmp_path):
    spool = SpoolParts(tmp_path)
    await spool.append(spool_record("a", "a1"), spool_record("b", "b1"), spool_record("b", "b2"))
    store = FakeStore(refuse=lambda chunk: DatabaseUnavailable("away")
                      if chunk[0].partition == "b" else None)
    assert await spool.replayer.replay(store.land) == 1
    # The file stays (b did not land) and is counted again whole; b stays held, a does not.
    assert [p.name for p in tmp_path.glob("spool-*.log")] == ["spool-000000000001.log"]
    assert spool.ledger.statistics() == SpoolStatistics(pending=3, failed=0, files=1,
                                                        replayed=1)
    assert is_held(tmp_path, "q", "b") and not is_held(tmp_path, "q", "a")
    store.refuse = lambda chunk: None
    # a's marker is gone (it landed): only b lands now.
    assert await spool.replayer.replay(store.land) == 2
    assert store.transaction_ids() == ["a1", "b1", "b2"]
    assert spool.ledger.statistics() == SpoolStatistics(pending=0, failed=0, files=0,
                                                        replayed=3)
    assert list(tmp_path.glob("spool-*.log")) == []


async def test_a_record_that_can_never_land_goes_to_failed_with_the_reason(tmp_path):
    spool = SpoolParts(tmp_path)
    await spool.append(spool_record("poison", "p1"), spool_record("fine", "f1"))
    store = FakeStore(refuse=lambda chunk: RuntimeError("poisoned partition")
                      if chunk[0].partition == "poison" else None)
    assert await spool.replayer.replay(store.land) == 1
    assert store.transaction_ids() == ["f1"]
    assert spool.ledger.statistics() == SpoolStatistics(pending=0, failed=1, files=0,
                                                        replayed=1)
    (failed,) = (tmp_path / "failed").glob("*.log")
    assert failed.with_suffix(".reason").read_text() == "RuntimeError: poisoned partition\n"
    assert not is_held(tmp_path, "q", "poison")
    # Put back in line, it lands once the store takes it.
    store.refuse = lambda chunk: None
    assert await spool.replayer.retry_failed() == 1
    assert list((tmp_path / "failed").iterdir()) == []
    assert spool.ledger.statistics() == SpoolStatistics(pending=1, failed=0, files=1,
                                                        replayed=1)
    assert is_held(tmp_path, "q", "poison")
    assert await spool.replayer.replay(store.land) == 1
    assert store.transaction_ids() == ["f1", "p1"]


async def test_replay_skips_what_already_landed(tmp_path):
    spool = SpoolParts(tmp_path)
    records = [spool_record("a", "1"), spool_record("a", "2")]
    await spool.append(*records)
    store = FakeStore(stored=[records[0]])  # a crash between commit and file deletion
    assert await spool.replayer.replay(store.land) == 1
    assert store.transaction_ids() == ["1", "2"]
    assert spool.ledger.statistics().pending == 0


async def test_records_appended_during_a_round_wait_for_the_next(tmp_path):
    spool = SpoolParts(tmp_path)
    await spool.append(spool_record("a", "1"))
    store = FakeStore()
    late = spool_record("b", "late")

    async def land_and_append(chunk):  # type: ignore[no-untyped-def]
        if chunk[0].partition == "a":
            await spool.append(late)
        return await store.land(chunk)

    assert await spool.replayer.replay(land_and_append) == 1
    assert store.transaction_ids() == ["1"]
    assert [p.name for p in tmp_path.glob("spool-*.log")] == ["spool-000000000002.log"]
    assert spool.ledger.statistics().pending == 1 and is_held(tmp_path, "q", "b")
    assert await spool.replayer.replay(store.land) == 1
    assert store.transaction_ids() == ["1", "late"]


async def test_a_partition_another_worker_landed_is_counted_out_unreplayed(tmp_path):
    spool = SpoolParts(worker_directory(tmp_path, 1), root=tmp_path)
    await spool.append(spool_record("a", "1"), spool_record("b", "2"))
    marker = lock_marker(marker_path(tmp_path, "q", "a"), create=False)
    assert marker is not None
    marker.release(remove=True)  # as the worker that landed a's records does
    store = FakeStore()
    assert await spool.replayer.replay(store.land) == 1
    assert store.transaction_ids() == ["2"]
    assert spool.ledger.statistics() == SpoolStatistics(pending=0, failed=0, files=0,
                                                        replayed=1)


async def test_a_partition_is_gathered_from_every_directory_in_stamp_order(tmp_path):
    first = SpoolParts(worker_directory(tmp_path, 1), root=tmp_path)
    second = SpoolParts(worker_directory(tmp_path, 2), root=tmp_path)
    await first.append(spool_record("p", "1"))
    await second.append(spool_record("p", "2"), spool_record("other", "x"))
    await first.append(spool_record("p", "3"))
    cache: dict = {}
    assert [r.transaction_id for r in gather(tmp_path, ("q", "p"), cache)] == ["1", "2", "3"]
    store = FakeStore()
    assert await first.replayer.replay(store.land) == 3  # the second worker's "2" too
    assert store.transaction_ids() == ["1", "2", "3"]
    # The second worker's file holds "2", landed already: its partition's marker is gone.
    assert await second.replayer.replay(store.land) == 1
    assert store.transaction_ids() == ["1", "2", "3", "x"]


async def test_failed_files_of_other_workers_come_back_here(tmp_path):
    mine = SpoolParts(worker_directory(tmp_path, 1), root=tmp_path)
    theirs = SpoolParts(worker_directory(tmp_path, 2), root=tmp_path)
    await theirs.append(spool_record("p", "theirs"))
    await theirs.replayer.replay(FakeStore(refuse=lambda chunk: RuntimeError("no")).land)
    assert theirs.ledger.statistics().failed == 1
    assert await mine.replayer.retry_failed() == 1
    assert mine.ledger.statistics() == SpoolStatistics(pending=1, failed=0, files=1,
                                                       replayed=0)
    store = FakeStore()
    assert await mine.replayer.replay(store.land) == 1
    assert store.transaction_ids() == ["theirs"]


async def test_the_replay_task_backs_off_while_the_database_is_away(tmp_path, autojump_clock):
    spool = SpoolParts(tmp_path)
    await spool.append(spool_record("a", "1"))
    pinged: list[float] = []
    store = FakeStore()

    async def ping() -> bool:
        pinged.append(trio.current_time())
        return len(pinged) > 8

    async with trio.open_nursery() as nursery:
        await nursery.start(spool.replayer.run, ping, store.land)
        while store.transaction_ids() != ["1"]:
            await trio.sleep(1)
        nursery.cancel_scope.cancel()
    waits = [later - earlier for earlier, later in itertools.pairwise(pinged)]
    assert waits == [1, 2, 4, 8, 16, MAX_RETRY_SECONDS, MAX_RETRY_SECONDS, MAX_RETRY_SECONDS]


async def test_the_replay_task_sleeps_until_records_arrive(tmp_path):
    spool = SpoolParts(tmp_path)
    pings = 0
    store = FakeStore()

    async def ping() -> bool:
        nonlocal pings
        pings += 1
        return True

    async with trio.open_nursery() as nursery:
        await nursery.start(spool.replayer.run, ping, store.land)
        await trio.testing.wait_all_tasks_blocked()
        assert pings == 0  # nothing pending: asleep, the database left alone
        await spool.append(spool_record("a", "1"))
        spool.replayer.wake()
        while store.transaction_ids() != ["1"]:
            await trio.sleep(0.01)
        await trio.testing.wait_all_tasks_blocked()
        assert pings == 1 and not spool.ledger.has_pending()
        nursery.cancel_scope.cancel()
