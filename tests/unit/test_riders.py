"""The transaction riders' registry: which rider keys are honoured, in which order, and which
are refused (push/riders.py)."""

from __future__ import annotations

import pytest

from queen_trio.errors import BadRequest
from queen_trio.kv.ops import KvOp, apply_order, parse_ops
from queen_trio.push.riders import REFUSED, RIDERS
from queen_trio.push.transactions import parse_transaction


def test_kv_is_honoured_first_and_timers_refused_until_built() -> None:
    assert list(RIDERS)[0] == "kv"
    assert "timers" in REFUSED and "kv" not in REFUSED


def test_a_body_with_only_a_kv_rider_parses_and_keeps_rider_local_indexes() -> None:
    parsed = parse_transaction(
        b'{"operations": [], "kv": [{"op": "check", "ns": "queen-locks", "key": "a#0",'
        b' "expect": 3, "required": true}, {"op": "get", "ns": "a", "key": "k"}]}')
    assert parsed.ops == [] and list(parsed.riders) == ["kv"]
    ops: list[KvOp] = parsed.riders["kv"]
    assert [op.index for op in ops] == [0, 1] and ops[0].required


def test_a_timers_rider_is_refused_even_beside_a_kv_rider() -> None:
    with pytest.raises(BadRequest) as refused:
        parse_transaction(b'{"operations": [], "kv": [{"op": "get", "ns": "a", "key": "k"}],'
                          b' "timers": [{"op": "schedule"}]}')
    assert refused.value.fields["reason"] == "riders_not_supported"


def test_the_apply_order_is_byte_order_with_multi_key_reads_last() -> None:
    ops = parse_ops([{"op": "getMany", "ns": "a", "keys": ["x"]},
                     {"op": "get", "ns": "b", "key": "a"},
                     {"op": "get", "ns": "a", "key": "\u00e9"},
                     {"op": "get", "ns": "a", "key": "Z"}])
    assert [op.index for op in apply_order(ops)] == [3, 2, 1, 0]
