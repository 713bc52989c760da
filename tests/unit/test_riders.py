"""The transaction riders' registry: which rider keys are honoured, in which order, and which
are refused (push/riders.py)."""

from __future__ import annotations

from queen_trio.kv.ops import KvOp, apply_order, parse_ops
from queen_trio.push.riders import REFUSED, RIDERS
from queen_trio.push.transactions import parse_transaction


def test_kv_is_honoured_first_and_nothing_is_refused() -> None:
    assert list(RIDERS)[0] == "kv"
    assert REFUSED == ()


def test_a_body_with_only_a_kv_rider_parses_and_keeps_rider_local_indexes() -> None:
    parsed = parse_transaction(
        b'{"operations": [], "kv": [{"op": "check", "ns": "queen-locks", "key": "a#0",'
        b' "expect": 3, "required": true}, {"op": "get", "ns": "a", "key": "k"}]}')
    assert parsed.ops == [] and list(parsed.riders) == ["kv"]
    ops: list[KvOp] = parsed.riders["kv"]
    assert [op.index for op in ops] == [0, 1] and ops[0].required


def test_a_timers_rider_beside_a_kv_rider_is_kept_raw_for_the_runners_hook() -> None:
    parsed = parse_transaction(b'{"operations": [], "kv": [{"op": "get", "ns": "a", "key": "k"}],'
                               b' "timers": [{"op": "schedule"}]}')
    assert list(parsed.riders) == ["kv", "timers"]
    assert parsed.riders["timers"] == [{"op": "schedule"}]


def test_the_apply_order_is_byte_order_with_multi_key_reads_last() -> None:
    ops = parse_ops([{"op": "getMany", "ns": "a", "keys": ["x"]},
                     {"op": "get", "ns": "b", "key": "a"},
                     {"op": "get", "ns": "a", "key": "\u00e9"},
                     {"op": "get", "ns": "a", "key": "Z"}])
    assert [op.index for op in apply_order(ops)] == [3, 2, 1, 0]
