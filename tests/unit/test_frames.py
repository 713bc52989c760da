"""The packed frame (storage/frames.py): layout, round trips, the pop's field reader, and the
byte offsets that the SQL side (queen.dead_letter, migration 0004) reads."""

from __future__ import annotations

import itertools
import uuid

from queen_trio import ids
from queen_trio.storage import frames
from tests.support import segments

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
    (frame,) = segments.unpack(packed)
    assert frame == segments.Frame(message_id=MID, transaction_id="tx-é",
                                 payload=b'{"a" : [1, 2]}', producer_sub="svc-1",
                                 trace_id=TRACE, encrypted=True)


def test_a_plain_frame_has_no_sub_no_trace_and_is_not_encrypted():
    (frame,) = segments.unpack(frames.pack(MID.bytes, b"t", b"1"))
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
    (frame,) = segments.unpack(frames.pack(MID.bytes, "✓✓".encode(), payload))
    assert frame.transaction_id == "✓✓"
    assert frame.payload == payload


def ends_of(*packed: bytes) -> list[int]:
    return list(itertools.accumulate(len(f) for f in packed))


def test_a_segment_unpacks_in_order():
    packed = [pack(i, trace=i % 2 == 1, sub="s" if i == 2 else "") for i in range(5)]
    assert [f.transaction_id for f in segments.unpack(b"".join(packed))] == [
        f"tx-{i}" for i in range(5)]


def test_fields_between_gives_the_text_forms_of_unpack():
    packed = [pack(i, trace=i == 1, sub="svc" if i == 2 else "", encrypted=i == 3)
              for i in range(4)]
    segment = b"".join(packed)
    expected = [(str(f.message_id), f.transaction_id, f.trace_id and str(f.trace_id),
                 f.producer_sub, f.encrypted, f.payload) for f in segments.unpack(segment)]
    assert list(frames.fields_between(segment, ends_of(*packed))) == expected


def test_a_frame_that_does_not_parse_is_undecodable_and_the_next_still_reads():
    good, bad, last = pack(0), bytearray(pack(1)), pack(2)
    bad[-8:] = b""  # the header still claims the whole payload
    bad_utf8 = frames.pack(uuid.UUID(int=MID.int + 3).bytes, b"\xff\xfe", b"1")
    segment = b"".join([good, bytes(bad), last, bad_utf8])
    read = list(frames.fields_between(segment, ends_of(good, bytes(bad), last, bad_utf8)))
    assert read[0][1] == "tx-0" and read[2][1] == "tx-2"
    assert read[1] == frames.Undecodable(
        str(uuid.UUID(int=MID.int + 1)), None,
        "undecodable frame: its header disagrees with its length")
    assert isinstance(read[3], frames.Undecodable)
    assert read[3].message_id == str(uuid.UUID(int=MID.int + 3))
    assert read[3].reason.startswith("undecodable frame: ")


def test_a_frame_cut_before_its_id_has_the_zero_id():
    (read,) = frames.fields_between(pack(0)[:10], [10])
    assert isinstance(read, frames.Undecodable)
    assert read.message_id == ids.ZERO_UUID


def test_uuid_text_is_the_canonical_form():
    assert frames.uuid_text(MID.bytes) == str(MID)
