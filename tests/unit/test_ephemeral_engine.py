"""The ephemeral engine alone (queen_trio/ephemeral/engine.py), on a clock the test moves."""

from __future__ import annotations

import pytest

from queen_trio.ephemeral.engine import BudgetExceeded, Engine, QueueFull, parse_id
from queen_trio.ephemeral.options import Options, parse_options
from queen_trio.errors import BadRequest

QM = "__QUEUE_MODE__"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def engine(max_bytes: int = 1 << 20) -> tuple[Engine, Clock]:
    clock = Clock()
    return Engine(max_bytes=max_bytes, clock=clock), clock


def payloads(taken: list) -> list[bytes]:
    return [d.payload for d in taken]


def test_fifo_per_partition_and_ids_that_name_the_ring():
    e, _ = engine()
    e.push("q", "p", [b"1", b"2", b"3"])
    taken = e.take("q", "p", QM, 2, auto_ack=False)
    assert payloads(taken) == [b"1", b"2"]
    assert parse_id(taken[0].ring.message_id(taken[0].seq)) == (
        taken[0].ring.incarnation, 0, 1, "p")
    assert payloads(e.take("q", "p", QM, 5, auto_ack=False)) == [b"3"]
    assert parse_id("nope") is None and parse_id("zz.1.1.cA") is None


def test_competing_consumers_never_share_a_leased_message_and_fan_out_sees_all():
    e, _ = engine()
    e.take("q", None, "a", 1, auto_ack=False)  # groups a and b subscribe
    e.take("q", None, "b", 1, auto_ack=False)
    e.push("q", "Default", [b"%d" % i for i in range(10)])
    first = e.take("q", None, "a", 4, auto_ack=False)
    second = e.take("q", None, "a", 10, auto_ack=False)
    assert not {d.seq for d in first} & {d.seq for d in second}
    assert len(first) + len(second) == 10
    assert len(e.take("q", None, "b", 20, auto_ack=True)) == 10


def test_a_failed_ack_redelivers_until_the_retry_limit_then_drops_and_counts():
    e, _ = engine()
    e.declare("q", Options(retry_limit=1))
    e.push("q", "Default", [b"x"])
    (d,) = e.take("q", None, QM, 1, auto_ack=False)
    assert e.ack("q", QM, d.ring.message_id(d.seq, d.attempts), "failed") == "redelivered"
    (again,) = e.take("q", None, QM, 1, auto_ack=False)
    assert again.attempts == 2
    assert e.ack("q", QM, again.ring.message_id(again.seq, again.attempts), "retry") == "acked"
    assert e.queues["q"].drops["retry"] == 1
    assert e.queues["q"].length() == 0
    assert e.ack("q", QM, again.ring.message_id(again.seq, again.attempts), "completed") == "unknown"


def test_an_expired_lease_redelivers_and_a_late_ack_is_unknown():
    e, clock = engine()
    e.declare("q", Options(lease_seconds=2, retry_limit=3))
    e.push("q", "Default", [b"x"])
    (d,) = e.take("q", None, QM, 1, auto_ack=False)
    clock.now += 1
    assert e.take("q", None, QM, 1, auto_ack=False) == []
    clock.now += 1.5
    (again,) = e.take("q", None, QM, 1, auto_ack=False)
    assert again.attempts == 2
    # The first delivery's lease is gone: its ack is unknown; the second's is acked.
    assert e.ack("q", QM, d.ring.message_id(d.seq, d.attempts), "completed") == "unknown"
    assert e.ack("q", QM, again.ring.message_id(again.seq, again.attempts),
                 "completed") == "acked"


def test_an_id_of_another_incarnation_is_stale():
    e, _ = engine()
    e.push("q", "Default", [b"x"])
    (d,) = e.take("q", None, QM, 1, auto_ack=False)
    old = d.ring.message_id(d.seq, d.attempts)
    assert e.reset("q") == 1
    e.push("q", "Default", [b"y"])
    assert e.ack("q", QM, old, "completed") == "stale"
    e.clear()
    assert e.ack("q", QM, old, "completed") == "stale"


def test_bounds_reject_whole_pushes_or_drop_the_oldest():
    e, _ = engine()
    e.declare("r", Options(max_length=3))
    e.push("r", "a", [b"1", b"2"])
    with pytest.raises(QueueFull):
        e.push("r", "b", [b"3", b"4"])
    assert e.queues["r"].length() == 2
    e.declare("d", Options(max_length=3, policy="dropOldest"))
    e.push("d", "a", [b"1", b"2"])
    e.push("d", "b", [b"3", b"4"])
    assert e.queues["d"].drops["bounds"] == 1
    assert payloads(e.take("d", None, QM, 10, auto_ack=True)) in ([b"2", b"3", b"4"],
                                                                  [b"3", b"4", b"2"])


def test_ttl_and_the_memory_budget():
    e, clock = engine(max_bytes=500)
    e.declare("t", Options(ttl_seconds=5))
    e.push("t", "Default", [b"old"])
    clock.now += 6
    assert e.take("t", None, QM, 1, auto_ack=True) == []
    assert e.queues["t"].drops["ttl"] == 1
    with pytest.raises(BudgetExceeded):
        e.push("t", "Default", [b"x" * 1000])
    assert e.total_bytes == 0


def test_a_reply_never_delivered_gives_its_leases_back_uncounted():
    e, _ = engine()
    e.push("q", "Default", [b"x"])
    taken = e.take("q", None, QM, 1, auto_ack=False)
    e.give_back(taken, QM)
    (again,) = e.take("q", None, QM, 1, auto_ack=False)
    assert again.attempts == 1


def test_options_are_a_closed_list():
    assert parse_options({"windowBuffer": {"ms": 5, "count": 2}}).window_count == 2
    for bad in ({"nope": 1}, {"maxBytes": -1}, {"maxBytes": True}, {"policy": "x"},
                {"windowBuffer": {"size": 1}}, {"leaseSeconds": 0}, []):
        with pytest.raises(BadRequest):
            parse_options(bad)


def test_the_messages_a_ring_holds_are_out_of_the_collectors_reach():
    # A full collection walks every tracked object: the messages the rings hold must not be
    # among them, or the owner pauses for as long as its rings are deep (docs/performance.md).
    import gc

    e, _ = engine()
    e.push("q", "p", [b'{"n":1}', b'"two"'])
    e.take("q", "p", "g", 1, auto_ack=False)  # one leased, one not yet delivered
    gc.collect()
    (ring,) = e.rings()
    assert len(ring.messages) == 2
    assert not any(gc.is_tracked(m) for m in ring.messages)
    assert not any(gc.is_tracked(lease) for g in ring.groups.values()
                   for lease in g.leased.values())
