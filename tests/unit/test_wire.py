"""Request parsing shared by every route (wire.py): every failure is a BadRequest naming the
field."""

from __future__ import annotations

import datetime as dt
import re
import uuid

import msgspec
import pytest

from queen_trio import wire
from queen_trio.errors import BadRequest

ANY = msgspec.json.Decoder()


class Shape(msgspec.Struct):
    n: int


@pytest.mark.parametrize("body", [b"", b"  \n\t"])
def test_an_empty_body_is_rejected(body):
    with pytest.raises(BadRequest, match="^Empty request body$"):
        wire.decode_strict(ANY, body)


def test_invalid_utf8_names_the_byte():
    with pytest.raises(BadRequest, match="^Invalid JSON: invalid UTF-8 at byte 7$"):
        wire.decode_strict(ANY, b'{"a": "\xff"}')


@pytest.mark.parametrize("body", [b'{"a": ', b"[1, 2"])
def test_truncated_input_has_one_message(body):
    with pytest.raises(BadRequest, match="^Invalid JSON: input is truncated or contains an invalid escape$"):
        wire.decode_strict(ANY, body)


@pytest.mark.parametrize("body", [b"NaN", b'{"a": Infinity}', b"{'a': 1}", b"[1,]"])
def test_anything_but_strict_json_is_invalid(body):
    with pytest.raises(BadRequest, match="^Invalid JSON: "):
        wire.decode_strict(ANY, body)


def test_well_formed_json_of_the_wrong_shape_is_left_to_the_caller():
    with pytest.raises(msgspec.ValidationError):
        wire.decode_strict(msgspec.json.Decoder(Shape), b'{"n": "x"}')
    assert wire.decode_strict(msgspec.json.Decoder(Shape), b'{"n": 3}') == Shape(3)


def test_decode_object_takes_an_empty_body_as_an_empty_object():
    assert wire.decode_object(b"") == {}
    assert wire.decode_object(b"[1]") == [1]
    assert wire.require_object({"a": 1}) == {"a": 1}
    with pytest.raises(BadRequest, match="^Request body must be a JSON object$"):
        wire.require_object([1])


def test_a_name_is_a_string_of_at_most_255_characters_without_nul():
    assert wire.name("x" * 255, "Queue") == "x" * 255
    with pytest.raises(BadRequest, match=r"^Queue must be a string \(item 2\)$"):
        wire.name(5, "Queue", " (item 2)")
    with pytest.raises(BadRequest, match="^Partition must be at most 255 characters$"):
        wire.name("x" * 256, "Partition")
    with pytest.raises(BadRequest, match="^Queue must not contain NUL characters$"):
        wire.name("a\x00b", "Queue")


def test_parse_uuid():
    value = uuid.uuid4()
    assert wire.parse_uuid(str(value), "leaseId") == value
    with pytest.raises(BadRequest, match="^leaseId must be a UUID string$"):
        wire.parse_uuid(7, "leaseId")
    with pytest.raises(BadRequest, match="^partitionId is not a valid UUID: 'nope'$"):
        wire.parse_uuid("nope", "partitionId")


@pytest.mark.parametrize("form", [
    "0dd5d314-d77d-49da-bab5-7e9b6f3012ed", "0DD5D314-D77D-49DA-BAB5-7E9B6F3012ED",
    "0dd5d314d77d49dabab57e9b6f3012ed", "{0dd5d314-d77d-49da-bab5-7e9b6f3012ed}",
    "urn:uuid:0dd5d314-d77d-49da-bab5-7e9b6f3012ed", "0dd5d314-d77d49da-bab57e9b-6f3012ed"])
def test_parse_uuid_reads_every_form_uuid_reads_to_the_same_value(form):
    # The fast C parser takes the usual forms, uuid.UUID the rest (braces, urn:).
    parsed = wire.parse_uuid(form, "leaseId")
    assert isinstance(parsed, uuid.UUID)
    assert parsed == uuid.UUID(form) and hash(parsed) == hash(uuid.UUID(form))
    assert str(parsed) == "0dd5d314-d77d-49da-bab5-7e9b6f3012ed"


@pytest.mark.parametrize("bad", [
    "", "0dd5d314-d77d-49da-bab5-7e9b6f3012e", "0dd5d314-d77d-49da-bab5-7e9b6f3012edd",
    "0dd5d314-d77d-49da-bab5-7e9b6f3012eg", "0dd5d314 d77d 49da bab5 7e9b6f3012ed"])
def test_parse_uuid_refuses_what_uuid_refuses(bad):
    with pytest.raises(ValueError):
        uuid.UUID(bad)
    with pytest.raises(BadRequest, match="^leaseId is not a valid UUID: "):
        wire.parse_uuid(bad, "leaseId")


@pytest.mark.parametrize("absent", [None, ""])
def test_an_absent_or_empty_consumer_group_is_queue_mode(absent):
    assert wire.consumer_group(absent) == wire.QUEUE_MODE


def test_a_consumer_group_is_a_name():
    assert wire.consumer_group("workers") == "workers"
    with pytest.raises(BadRequest, match=r"^consumerGroup \(op 1\) must be a string or null$"):
        wire.consumer_group(3, " (op 1)")
    with pytest.raises(BadRequest, match="must be at most 255 characters"):
        wire.consumer_group("g" * 256)


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("TRUE", True), ("1", True),
                                            ("false", False), ("False", False), ("0", False)])
def test_query_bool(raw, value):
    assert wire.query_bool({"wait": raw}, "wait", not value) is value


def test_query_bool_default_and_rejection():
    assert wire.query_bool({}, "wait", True) is True
    with pytest.raises(BadRequest, match="^wait must be true, false, 1 or 0$"):
        wire.query_bool({"wait": "yes"}, "wait", False)


def test_query_int_default_range_and_rejection():
    assert wire.query_int({}, "batch", 7, minimum=1, maximum=10) == 7
    assert wire.query_int({"batch": " 10 "}, "batch", 1, minimum=1, maximum=10) == 10
    assert wire.query_int({"batch": "-3"}, "batch", 1, minimum=-5, maximum=10) == -3
    for raw in ("1.5", "ten", "", "1e3", "0x10"):
        with pytest.raises(BadRequest, match="^batch must be an integer$"):
            wire.query_int({"batch": raw}, "batch", 1, minimum=1, maximum=10)
    with pytest.raises(BadRequest, match="^batch must be between 1 and 10$"):
        wire.query_int({"batch": "11"}, "batch", 1, minimum=1, maximum=10)


@pytest.mark.parametrize("raw", ["\u0663", "\uff11", "\u00b2", "1\u0661"])
def test_query_int_takes_ascii_digits_only(raw):
    """Other scripts' digits (Arabic-Indic, fullwidth) and superscripts are not integers."""
    with pytest.raises(BadRequest, match="^limit must be an integer$"):
        wire.query_int({"limit": raw}, "limit", 1, minimum=1, maximum=10)


def test_query_int_refuses_thousands_of_digits_as_out_of_range():
    for raw in ("9" * 5000, "-" + "9" * 5000, "1" + "0" * 20):
        with pytest.raises(BadRequest, match="^offset must be between 0 and 2147483647$"):
            wire.query_int({"offset": raw}, "offset", 0, minimum=0, maximum=wire.INT32_MAX)


def test_pagination():
    page = wire.pagination({}, default_limit=50, max_limit=100)
    assert page.to_wire() == {"limit": 50, "offset": 0}
    page = wire.pagination({"limit": "100", "offset": "20"}, default_limit=50, max_limit=100)
    assert page == wire.Page(100, 20)
    with pytest.raises(BadRequest, match="^limit must be between 1 and 100$"):
        wire.pagination({"limit": "0"}, default_limit=50, max_limit=100)
    with pytest.raises(BadRequest, match="^offset must be between 0 and 2147483647$"):
        wire.pagination({"offset": "-1"}, default_limit=50, max_limit=100)


@pytest.mark.parametrize("text", ["2025-03-01T10:20:30Z", "2025-03-01T10:20:30z",
                                  "2025-03-01T10:20:30", "2025-03-01T11:20:30+01:00",
                                  " 2025-03-01T10:20:30.000Z "])
def test_timestamps_are_iso_8601_and_naive_means_utc(text):
    parsed = wire.parse_timestamp(text, "from")
    assert parsed == dt.datetime(2025, 3, 1, 10, 20, 30, tzinfo=dt.timezone.utc)


def test_a_bad_timestamp_names_the_field():
    with pytest.raises(BadRequest, match="^from is not an ISO-8601 timestamp: 'yesterday'$"):
        wire.parse_timestamp("yesterday", "from")


def test_a_timestamp_comes_back_in_utc():
    parsed = wire.parse_timestamp("0001-01-01T00:00:00-05:00", "from")
    assert parsed.utcoffset() == dt.timedelta(0)
    assert parsed == dt.datetime(1, 1, 1, 5, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("text", ["9999-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
                                  "9998-12-31T23:00:00-05:00", "0001-01-01T00:00:00+05:00",
                                  "0001-01-01T04:59:59+05:00"])
def test_a_timestamp_outside_the_years_1_to_9998_in_utc_is_refused(text):
    refusal = f"to must be in the years 1 to 9998 (UTC): '{text}'"
    with pytest.raises(BadRequest, match=f"^{re.escape(refusal)}$"):
        wire.parse_timestamp(text, "to")


def test_a_span_before_year_1_names_the_field():
    at = wire.parse_timestamp("0001-01-01T00:30:00Z", "to")
    assert wire.before(at, dt.timedelta(minutes=30), "to") == dt.datetime(
        1, 1, 1, tzinfo=dt.timezone.utc)
    with pytest.raises(BadRequest, match="^to is too early: 1:00:00 before it is before year 1$"):
        wire.before(at, dt.timedelta(hours=1), "to")


def test_reply_timestamps_are_utc_with_micro_or_milliseconds():
    at = dt.datetime(2025, 3, 1, 11, 20, 30, 123456,
                     tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert wire.format_micros(at) == "2025-03-01T10:20:30.123456Z"
    assert wire.format_millis(at) == "2025-03-01T10:20:30.123Z"
