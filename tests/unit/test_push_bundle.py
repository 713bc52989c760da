"""Packed groups, segments and the push_bundle adapter (push/bundle.py), without a database."""

from __future__ import annotations

import itertools

from queen_trio import ids
from queen_trio.push.bundle import Segment, apply_bundle_rows, bundle_arguments, pack_group
from queen_trio.push.items import Group
from queen_trio.push.outcome import Outcome
from tests.support import segments
from tests.support.lanes import packed_group, push_item


def row(segment_no, outcome, *, item_no=None, ref_offset=None, ref_message_id=None,
        partition_id="pid"):
    return {"segment_no": segment_no, "item_no": item_no, "outcome": outcome,
            "partition_id": partition_id, "ref_offset": ref_offset,
            "ref_message_id": ref_message_id}


def test_a_packed_group_carries_a_frame_per_first_occurrence():
    packed = packed_group("a", "b", "a")
    assert [item.transaction_id for item in packed.writers] == ["a", "b"]
    decoded = [segments.unpack(f) for f in packed.frames]
    assert [[(str(f.message_id), f.transaction_id, f.payload) for f in d] for d in decoded] == [
        [(str(item.message_id), item.transaction_id, item.payload)] for item in packed.writers]


def test_packing_encrypts_and_flags_the_payload_and_records_the_producer():
    group = Group("q", "p", [push_item("a", payload=b'"secret"')])
    packed = pack_group(group, dedup=False, encryption_assumed=True,
                        encrypt=lambda data: data[::-1], producer_sub="svc-1")
    (frame,) = segments.unpack(packed.frames[0])
    assert (frame.payload, frame.encrypted, frame.producer_sub) == (b'"terces"', True, "svc-1")
    assert packed.assumptions == (True, False)


def test_a_fused_segment_keeps_the_first_occurrence_across_groups():
    earlier, later = packed_group("x", "y"), packed_group("y", "z")
    segment = Segment.fuse([earlier, later])
    assert [item.transaction_id for item in segment.writers] == ["x", "y", "z"]
    assert segment.writers[1] is earlier.group.items[1]
    assert later.group.items[0].winner is earlier.group.items[1]
    assert segment.frames == [earlier.frames[0], earlier.frames[1], later.frames[1]]
    assert earlier.nbytes == sum(len(f) for f in earlier.frames)


def test_bundle_arguments_flatten_segments_with_frame_ends_per_segment():
    first = Segment.fuse([packed_group("a", "b", partition="p1")])
    second = Segment.fuse([packed_group("c", queue="r", partition="p2", dedup=False)])
    args = bundle_arguments([first, second], check_max_size=False)
    assert args["queues"] == ["q", "r"]
    assert args["partitions"] == ["p1", "p2"]
    assert args["encrypted"] == [False, False]
    assert args["dedup"] == [True, False]
    assert args["counts"] == [2, 1]
    assert args["frames"] == [b"".join(first.frames), b"".join(second.frames)]
    assert args["frame_ends"] == [*itertools.accumulate(len(f) for f in first.frames),
                                  len(second.frames[0])]
    assert args["transaction_ids"] == ["a", "b", "c"]
    assert args["check_max_size"] is False


def test_rows_settle_segments_and_items():
    queued = Segment.fuse([packed_group("a", "b")])
    stale = Segment.fuse([packed_group("c", partition="p2")])
    full = Segment.fuse([packed_group("d", partition="p3")])
    apply_bundle_rows([queued, stale, full], [row(1, "queued", ref_offset=0, partition_id=42),
                                              row(2, "stale"), row(3, "full")])
    assert (queued.outcome, queued.partition_id) == (Outcome.QUEUED, "42")
    assert [item.outcome for item in queued.writers] == [Outcome.QUEUED] * 2
    assert (stale.outcome, stale.error) == (Outcome.STALE, None)
    assert (full.outcome, full.error) == (Outcome.FULL, "queue full")
    assert full.writers[0].result()["error"] == "queue full"
    assert all(seg.done.is_set() for seg in (queued, stale, full))


def test_a_duplicate_row_answers_the_stored_original():
    original = push_item("a")
    segment = Segment.fuse([packed_group("a", "new")])
    apply_bundle_rows([segment], [
        row(1, "duplicate", item_no=1, ref_offset=11, ref_message_id=original.message_id),
        row(1, "queued", ref_offset=12)])
    repeat, fresh = segment.writers
    assert repeat.answer() == (Outcome.DUPLICATE, str(original.message_id))
    assert fresh.answer() == (Outcome.QUEUED, str(fresh.message_id))


def test_a_duplicate_whose_segment_is_gone_answers_the_zero_id():
    segment = Segment.fuse([packed_group("a")])
    apply_bundle_rows([segment], [row(1, "duplicate", item_no=1, ref_offset=3),
                                  row(1, "queued", ref_offset=4)])
    assert segment.writers[0].answer() == (Outcome.DUPLICATE, ids.ZERO_UUID)


def test_a_segment_without_a_row_fails():
    answered, forgotten = Segment.fuse([packed_group("a")]), Segment.fuse([packed_group("b")])
    apply_bundle_rows([answered, forgotten], [row(1, "queued", ref_offset=0)])
    assert forgotten.outcome is Outcome.FAILED
    assert forgotten.writers[0].error == "push_bundle returned no outcome for the segment"
