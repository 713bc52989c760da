"""The packed frame (storage/frames.py): layout, round trips, slices, and the byte offsets
that the SQL side (queen.dead_letter, migration 0004) reads."""

from __future__ import annotations

import uuid

import pytest

from queen_trio.storage import frames

MID = uuid.UUID("0190a8f2-8b7c-7def-8123-456789abcdef")
TRACE = uuid.UUID("11111111-2222-4333-8444-555555555555")


def pack(index: int, *, trace: bool = False, sub: str = "", encrypted: bool = False,
         payload: bytes | None = None) -> bytes:
    return frames.pack(uuid.UUID(int=MID.int + index).bytes, f"tx-{index}".encode(),
                       payload if payload is not None else b'{"n":%d}' % index,
                       producer_sub=sub.encode(), trace_id=TRACE.bytes if trace else None,
                       encrypted=encrypted)


def test_a_frame_round_trips_every_field():
    packed = frames.pack(MID.bytes, "tx-é".encode(), b'{"a" : [1, 2]}', producer_sub=b"svc-1",
                         trace_id=TRACE.bytes, encrypted=True)
    (frame,) = frames.unpack(packed)
    assert frame == frames.Frame(message_id=MID, transaction_id="tx-é",
                                 payload=b'{"a" : [1, 2]}', producer_sub="svc-1",
                                 trace_id=TRACE, encrypted=True)


def test_a_plain_frame_has_no_sub_no_trace_and_is_not_encrypted():
    (frame,) = frames.unpack(frames.pack(MID.bytes, b"t", b"1"))
    assert (frame.producer_sub, frame.trace_id, frame.encrypted) == (None, None, False)
    assert len(frames.pack(MID.bytes, b"t", b"1")) == frames.HEADER.size + 2


def test_the_header_layout_is_the_one_the_sql_side_reads():
    """queen.dead_letter: flags at byte 16 (2 = trace), the transaction id's length in bytes
    17-18, the text after 25 bytes of header (and 16 of trace id)."""
    assert frames.HEADER.size == 25
    for trace in (False, True):
        packed = frames.pack(MID.bytes, "tx-ü".encode(), b"[]", trace_id=TRACE.bytes if trace else None)
        assert packed[:16] == MID.bytes
        assert bool(packed[16] & 2) is trace
        tx_len = packed[17] << 8 | packed[18]
        start = 25 + (16 if trace else 0)
        assert packed[start:start + tx_len].decode() == "tx-ü"


def test_lengths_are_bytes_not_characters():
    payload = '"ünïcödé ✓"'.encode()
    (frame,) = frames.unpack(frames.pack(MID.bytes, "✓✓".encode(), payload))
    assert frame.transaction_id == "✓✓"
    assert frame.payload == payload


def test_a_segment_unpacks_in_order_and_slices_by_index():
    segment = b"".join(pack(i, trace=i % 2 == 1, sub="s" if i == 2 else "") for i in range(5))
    every = list(frames.unpack(segment))
    assert [f.transaction_id for f in every] == [f"tx-{i}" for i in range(5)]
    assert list(frames.unpack_slice(segment, 1, 3)) == every[1:4]
    assert list(frames.unpack_slice(segment, 3, 10)) == every[3:]
    assert list(frames.unpack_slice(segment, 5, 1)) == []
    assert frames.frame_at(segment, 4) == every[4]
    with pytest.raises(IndexError):
        frames.frame_at(segment, 5)


def test_fields_slice_gives_the_text_forms_of_unpack():
    segment = b"".join(pack(i, trace=i == 1, sub="svc" if i == 2 else "", encrypted=i == 3)
                       for i in range(4))
    expected = [(str(f.message_id), f.transaction_id, f.trace_id and str(f.trace_id),
                 f.producer_sub, f.encrypted, f.payload) for f in frames.unpack(segment)]
    assert list(frames.fields_slice(segment, 0, 4)) == expected
    assert list(frames.fields_slice(segment, 2, 5)) == expected[2:]


def test_uuid_text_is_the_canonical_form():
    assert frames.uuid_text(MID.bytes) == str(MID)
