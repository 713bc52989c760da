"""Parsing a push body (push/parse.py): typed items, exact payload bytes, an identity each."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from queen_trio.errors import BadRequest
from queen_trio.push.parse import DEFAULT_PARTITION, build_item, parse_push_body


def test_items_keep_request_order_and_their_exact_payload_bytes():
    body = (b'{"items": [{"queue": "q", "payload": {"b" : 1,  "a": [1.50, "\\u00e9"]}},'
            b' {"queue": "r", "partition": "p", "transactionId": "t", "payload": null}]}')
    first, second = parse_push_body(body)
    assert (first.index, first.queue, first.partition) == (0, "q", DEFAULT_PARTITION)
    assert first.payload == b'{"b" : 1,  "a": [1.50, "\\u00e9"]}'
    assert (second.index, second.queue, second.partition) == (1, "r", "p")
    assert (second.transaction_id, second.payload) == ("t", b"null")


def test_an_item_without_a_transaction_id_gets_its_own_message_id():
    (item,) = parse_push_body(b'{"items": [{"queue": "q", "payload": 1}]}')
    assert item.transaction_id == str(item.message_id)
    assert uuid.UUID(str(item.message_id)).version == 7


@pytest.mark.parametrize("txid", ['null', '""'])
def test_a_null_or_empty_transaction_id_is_absent(txid):
    (item,) = parse_push_body(b'{"items": [{"queue": "q", "transactionId": %s, "payload": 1}]}'
                              % txid.encode())
    assert item.transaction_id == str(item.message_id)


def test_message_ids_are_distinct_and_time_ordered():
    items = parse_push_body(b'{"items": [%s]}' % b",".join(
        [b'{"queue": "q", "payload": 1}'] * 50))
    message_ids = [item.message_id for item in items]
    assert len(set(message_ids)) == 50
    assert sorted(message_ids) == message_ids


def test_trace_id_and_producer_sub_are_never_taken_from_a_push():
    (item,) = parse_push_body(b'{"items": [{"queue": "q", "payload": 1, "traceId": '
                              b'"11111111-2222-4333-8444-555555555555", "producerSub": "x"}]}')
    assert item.trace_id is None


@pytest.mark.parametrize(("body", "error"), [
    (b"[]", "Request body must be a JSON object"),
    (b"{}", "items array is required"),
    (b'{"items": {}}', "items array is required"),
    (b'{"items": [{"queue": "q", "payload": 1}, 5]}', "Item 1 must be an object"),
    (b'{"items": [{"payload": 1}]}', "Queue must be a string (item 0)"),
    (b'{"items": [{"queue": 7, "payload": 1}]}', "Queue must be a string (item 0)"),
    (b'{"items": [{"queue": "", "payload": 1}]}', "Queue name must not be empty (item 0)"),
    (b'{"items": [{"queue": "q", "partition": "", "payload": 1}]}',
     "Partition name must not be empty (item 0)"),
    (b'{"items": [{"queue": "q", "transactionId": 5, "payload": 1}]}',
     "TransactionId must be a string (item 0)"),
    (b'{"items": [{"queue": "q"}]}', "payload is required (item 0)"),
    (b'{"items": [{"queue": "q", "data": 1}]}',
     "payload is required (item 0): the field is named payload; data is what pops return"),
    (b"", "Empty request body"),
])
def test_the_first_problem_is_a_bad_request_that_names_the_item(body, error):
    with pytest.raises(BadRequest) as caught:
        parse_push_body(body)
    assert str(caught.value) == error


def test_build_item_validates_names_like_a_push():
    item = build_item(2, "q", msgspec.UNSET, "t", b"[1]")
    assert (item.index, item.partition, item.transaction_id, item.payload) == (
        2, DEFAULT_PARTITION, "t", b"[1]")
    with pytest.raises(BadRequest, match=r"^Queue must not contain NUL characters \(item 4\)$"):
        build_item(4, "a\x00", msgspec.UNSET, None, b"1")
    with pytest.raises(BadRequest, match=r"^Partition must be a string \(item 0\)$"):
        build_item(0, "q", None, None, b"1")
