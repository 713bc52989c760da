"""The spool's file format (push/spool_codec.py): records to bytes and back, and the torn tail
a crash mid-write leaves."""

from __future__ import annotations

import logging

import pytest

from queen_trio.push.spool_codec import (
    RECORD_HEADER,
    SpoolRecord,
    decode_records,
    encode_record,
    encode_records,
    read_records,
)
from tests.support.spool import spool_record


def test_records_round_trip_with_every_field():
    full = SpoolRecord(queue="q", partition="p", message_id=b"m" * 16, transaction_id="t",
                       producer_sub="alice", trace_id=b"t" * 16, payload=b'{"a":1.50}',
                       encrypted=True, stamp=42)
    bare = spool_record("p", "bare")
    decoded = decode_records(encode_records([full, bare]))
    assert decoded.records == [full, bare] and not decoded.torn
    assert decode_records(encode_record(full)).records == [full]


def test_nothing_decodes_to_no_records():
    assert decode_records(b"") == decode_records(encode_records([]))
    assert decode_records(b"").records == [] and not decode_records(b"").torn


@pytest.mark.parametrize("cut", [1, 5])
def test_a_body_cut_short_ends_the_records_before_it(cut):
    whole = encode_records([spool_record("p", "1"), spool_record("p", "2")])
    decoded = decode_records(whole[:-cut])
    assert [r.transaction_id for r in decoded.records] == ["1"] and decoded.torn


def test_a_body_whose_crc_does_not_match_ends_the_records():
    first, second = encode_record(spool_record("p", "1")), encode_record(spool_record("p", "2"))
    flipped = second[:-1] + bytes([second[-1] ^ 0xFF])
    decoded = decode_records(first + flipped + encode_record(spool_record("p", "3")))
    assert [r.transaction_id for r in decoded.records] == ["1"] and decoded.torn


def test_a_tail_shorter_than_a_header_is_ignored():
    data = encode_record(spool_record("p", "1")) + b"\0" * (RECORD_HEADER.size - 1)
    decoded = decode_records(data)
    assert [r.transaction_id for r in decoded.records] == ["1"] and not decoded.torn


def test_a_file_read_names_a_torn_tail_unless_quiet(tmp_path, caplog):
    path = tmp_path / "spool-000000000001.log"
    path.write_bytes(encode_records([spool_record("p", "1"), spool_record("p", "2")])[:-1])
    with caplog.at_level(logging.WARNING, logger="queen_trio.spool"):
        assert [r.transaction_id for r in read_records(path, quiet=True)] == ["1"]
        assert caplog.messages == []
        assert [r.transaction_id for r in read_records(path)] == ["1"]
    assert caplog.messages == ["spool file ends in a torn record"]


def test_a_missing_file_is_an_error_unless_quiet(tmp_path):
    missing = tmp_path / "spool-000000000001.log"
    assert list(read_records(missing, quiet=True)) == []
    with pytest.raises(FileNotFoundError):
        list(read_records(missing))
