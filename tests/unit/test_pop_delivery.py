"""What a pop delivers (consume/delivery.py), without PostgreSQL: claimed rows decoded into
messages, the dead-letter cuts of undecodable ones, the reply, and how long a long poll parks;
and what a pop's parameters mean (parse_pop)."""

from __future__ import annotations

import datetime as dt
import uuid

import msgspec
import pytest

from queen_trio.consume.delivery import (
    Bad,
    Cut,
    Decoded,
    assemble_reply,
    dead_letter_plan,
    decode_claim,
    empty_conflation_reply,
    park_seconds,
)
from queen_trio.consume.pop import MAX_BATCH, parse_pop
from queen_trio.errors import BadRequest
from queen_trio.settings import Settings
from queen_trio.storage import frames
from queen_trio.wire import QUEUE_MODE

SETTINGS = Settings()
P1, P2 = uuid.UUID(int=1), uuid.UUID(int=2)
CREATED = dt.datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc)
LEASE = uuid.UUID(int=99)


def frame(txid: str, payload: bytes = b"{}", *, encrypted: bool = False) -> bytes:
    return frames.pack(uuid.UUID(int=len(txid) + 7).bytes, txid.encode(), payload,
                       producer_sub=b"sub", encrypted=encrypted)


def claimed(partition_id, first_offset: int, *packed: bytes, name: str = "p",  # type: ignore[no-untyped-def]
            conflation: bool | None = None, superseded: int = 0):
    """A claim's row: a run of frames from `first_offset`; the group's stored conflation
    policy, and the messages the claim superseded."""
    ends, at = [], 0
    for f in packed:
        at += len(f)
        ends.append(at)
    return {"partition_id": partition_id, "partition_name": name, "first_offset": first_offset,
            "created_at": CREATED, "frames": b"".join(packed), "frame_ends": ends,
            "conflation": conflation, "superseded": superseded}


def pop(**query: str):  # type: ignore[no-untyped-def]
    return parse_pop(query, SETTINGS, queue="q")


def bad(partition_id, offset: int) -> Bad:  # type: ignore[no-untyped-def]
    return Bad(partition_id, offset, "id", None, "unreadable")


def reverse(stored: bytes) -> bytes:
    if stored == b"garbage":
        raise ValueError("does not decrypt")
    return stored[::-1]


# -- decoding ---------------------------------------------------------------------------------

def test_claimed_frames_become_messages_with_their_offsets_and_lease():
    rows = [("q", claimed(P1, 10, frame("a", b'{"n":1.50}'), frame("b"))),
            ("q", claimed(P2, 3, frame("c"), name="other"))]
    decoded = decode_claim(rows, pop(consumerGroup="g"), str(LEASE), reverse)
    assert decoded.offsets == [(P1, 10), (P1, 11), (P2, 3)] and decoded.found
    first = decoded.messages[0]
    assert first == {"id": str(uuid.UUID(int=8)), "transactionId": "a", "traceId": None,
                     "data": msgspec.Raw(b'{"n":1.50}'), "producerSub": "sub",
                     "createdAt": "2025-01-02T03:04:05.678901Z", "partitionId": str(P1),
                     "partition": "p", "leaseId": str(LEASE), "consumerGroup": "g"}
    assert decoded.messages[2]["partition"] == "other"
    assert "queue" not in first  # only a namespace/task pop names each message's queue


def test_a_namespace_pop_names_each_messages_queue():
    req = parse_pop({"namespace": "n"}, SETTINGS)
    decoded = decode_claim([("billing", claimed(P1, 0, frame("a")))], req, "", reverse)
    assert decoded.messages[0]["queue"] == "billing"
    assert decoded.messages[0]["consumerGroup"] == QUEUE_MODE


def test_undecodable_and_undecryptable_frames_are_bad_in_their_offsets_place():
    broken = frame("x")[:-1]  # its header disagrees with its length
    rows = [("q", claimed(P1, 5, frame("a"), broken, frame("c", b"garbage", encrypted=True),
                          frame("d", b"}{", encrypted=True)))]
    decoded = decode_claim(rows, pop(), "", reverse)
    assert decoded.offsets == [(P1, 5), (P1, 8)]
    assert decoded.messages[1]["data"] == msgspec.Raw(b"{}")  # decrypted once
    assert [(b.offset, b.transaction_id, b.reason) for b in decoded.bad] == [
        (6, None, "undecodable frame: its header disagrees with its length"),
        (7, "c", "decryption failed")]


def test_rows_without_a_partition_give_the_earliest_moment_to_look_again():
    later, sooner = CREATED + dt.timedelta(seconds=5), CREATED + dt.timedelta(seconds=1)
    nothing = {"partition_id": None, "conflation": None, "superseded": 0}
    rows = [("q", {**nothing, "next_check_at": later}),
            ("q", {**nothing, "next_check_at": None}),
            ("q", {**nothing, "next_check_at": sooner})]
    decoded = decode_claim(rows, pop(), "", reverse)
    assert decoded.messages == [] and decoded.next_check == sooner and decoded.found
    assert not decode_claim([], pop(), "", reverse).found


# -- dead-letter cuts ---------------------------------------------------------------------------

def test_auto_ack_dead_letters_every_undecodable_message_and_delivers_the_rest():
    plan = dead_letter_plan([(P1, 0), (P1, 2)], [bad(P1, 1), bad(P1, 3)], auto_ack=True)
    assert plan.cuts == {} and [b.offset for b in plan.dead] == [1, 3] and plan.keep == [0, 1]


def test_a_lease_dead_letters_the_undecodable_head_and_stops_short_of_the_next():
    offsets = [(P1, 12), (P1, 13), (P1, 15)]
    plan = dead_letter_plan(offsets, [bad(P1, 10), bad(P1, 11), bad(P1, 14)], auto_ack=False)
    assert plan.cuts == {P1: Cut(cursor=12, until=14)}
    assert [b.offset for b in plan.dead] == [10, 11]  # 14 waits until it is the head
    assert plan.keep == [0, 1]


def test_an_undecodable_message_behind_a_decodable_head_is_left_for_a_later_claim():
    plan = dead_letter_plan([(P1, 10), (P1, 12)], [bad(P1, 11)], auto_ack=False)
    assert plan.cuts == {P1: Cut(cursor=10, until=11)}
    assert plan.dead == [] and plan.keep == [0]


def test_a_partition_of_only_undecodable_messages_moves_past_them_all():
    plan = dead_letter_plan([], [bad(P1, 4), bad(P1, 3)], auto_ack=False)
    assert plan.cuts == {P1: Cut(cursor=5, until=5)}
    assert sorted(b.offset for b in plan.dead) == [3, 4] and plan.keep == []


def test_partitions_without_undecodable_messages_are_not_cut():
    offsets = [(P1, 0), (P2, 7), (P2, 8)]
    plan = dead_letter_plan(offsets, [bad(P1, 1)], auto_ack=False)
    assert plan.cuts == {P1: Cut(cursor=0, until=1)}
    assert plan.keep == [0, 1, 2]


def test_delivering_keeps_the_chosen_messages_and_counts_the_dead_letters():
    decoded = Decoded(messages=[{"id": "a"}, {"id": "b"}], offsets=[(P1, 0), (P1, 1)])
    kept = decoded.delivering([1], dead_lettered=2)
    assert kept.messages == [{"id": "b"}] and kept.offsets == [(P1, 1)]
    assert kept.dead_lettered == 2 and decoded.messages == [{"id": "a"}, {"id": "b"}]


# -- the reply ------------------------------------------------------------------------------------

def test_nothing_to_deliver_is_no_reply():
    assert assemble_reply(pop(), LEASE, Decoded()) is None


def test_the_reply_carries_the_lease_and_the_first_messages_partition():
    rows = [("q", claimed(P1, 0, frame("a"))), ("q", claimed(P2, 0, frame("b"), name="p2"))]
    req = pop(consumerGroup="g", partitions="2")
    delivery = assemble_reply(req, LEASE, decode_claim(rows, req, str(LEASE), reverse))
    assert delivery is not None and delivery.lease_id == LEASE
    reply = delivery.reply
    assert {k: v for k, v in reply.items() if k != "messages"} == {
        "success": True, "queue": "q", "partition": "p", "partitionId": str(P1),
        "leaseId": str(LEASE), "consumerGroup": "g", "partitionsClaimed": 2}
    assert [m["transactionId"] for m in reply["messages"]] == ["a", "b"]


def test_an_auto_ack_reply_has_no_lease_to_give_back():
    req = pop(autoAck="true")
    delivery = assemble_reply(req, LEASE, decode_claim([("q", claimed(P1, 0, frame("a")))],
                                                       req, "", reverse))
    assert delivery is not None and delivery.lease_id is None
    assert delivery.reply["leaseId"] == "" and delivery.reply["messages"][0]["leaseId"] == ""


def test_an_autopilot_reply_says_what_the_broker_chose():
    req = pop(autopilot="true")
    decoded = decode_claim([("q", claimed(P1, 0, frame("a")))], req, str(LEASE), reverse)
    delivery = assemble_reply(req, LEASE, decoded)
    assert delivery is not None
    assert delivery.reply["autopilot"] == {"partitions": 10, "batch": 100, "waitMs": 0}


# -- parking ------------------------------------------------------------------------------------

def test_a_long_poll_backs_off_after_the_threshold_up_to_the_cap():
    s = Settings(pop_wait_initial_interval_ms=100, pop_wait_backoff_threshold=3,
                 pop_wait_backoff_multiplier=2.0, pop_wait_max_interval_ms=1000)
    assert [park_seconds(n, s, None, CREATED) for n in range(1, 7)] == [
        0.1, 0.1, 0.1, 0.8, 1.0, 1.0]


def test_a_long_poll_wakes_just_after_a_delayed_message_may_be_deliverable():
    soon = CREATED + dt.timedelta(milliseconds=20)
    assert park_seconds(1, SETTINGS, soon, CREATED) == pytest.approx(0.021)
    assert park_seconds(1, SETTINGS, CREATED + dt.timedelta(hours=1), CREATED) == 0.1
    assert park_seconds(1, SETTINGS, CREATED - dt.timedelta(seconds=1), CREATED) == 0.0


# -- a pop's parameters -------------------------------------------------------------------------

def test_batch_defaults_to_the_setting_and_is_capped():
    assert pop().batch == SETTINGS.default_batch_size and pop().partitions == 1
    assert pop(batch=str(MAX_BATCH)).batch == MAX_BATCH
    for wrong in (str(MAX_BATCH + 1), "0", "ten"):
        with pytest.raises(BadRequest):
            pop(batch=wrong)


def test_autopilot_sizes_only_what_the_client_left_out():
    assert (pop(autopilot="true").batch, pop(autopilot="true").partitions) == (100, 10)
    chosen = pop(autopilot="true", batch="7", partitions="3")
    assert (chosen.batch, chosen.partitions) == (7, 3)


def test_a_pop_of_one_partition_claims_one_partition():
    req = parse_pop({"partitions": "5", "autopilot": "true"}, SETTINGS, queue="q",
                    partition="p")
    assert req.partitions == 1 and req.batch == 100


def test_a_wildcard_pop_needs_a_namespace_or_a_task():
    with pytest.raises(BadRequest, match="namespace or task is required"):
        parse_pop({}, SETTINGS)
    assert parse_pop({"task": "t"}, SETTINGS).task == "t"


def test_subscription_start_modes():
    assert pop(consumerGroup="g", subscriptionMode="new-only").start_mode == "new"
    assert pop(consumerGroup="g", subscriptionMode="from_beginning").start_mode == "all"
    dated = pop(consumerGroup="g", subscriptionFrom="2025-01-02T03:04:05Z")
    assert (dated.start_mode, dated.start_from) == (
        "from", dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
    assert pop(consumerGroup="g", subscriptionFrom="now").start_mode == "new"
    # Queue mode always starts at the beginning.
    assert (pop(subscriptionMode="new").start_mode, pop(subscriptionMode="new").start_from) == (
        "all", None)
    with pytest.raises(BadRequest):
        pop(consumerGroup="g", subscriptionFrom="yesterday-ish")


# -- conflation (docs/decisions.md#conflation) ------------------------------------------------

def test_conflation_is_stated_only_by_the_parameter_and_refused_with_auto_ack_or_no_group():
    assert pop().conflation is None
    assert pop(consumerGroup="g", conflation="true").conflation is True
    assert pop(consumerGroup="g", conflation="false").conflation is False
    with pytest.raises(BadRequest) as refused:
        pop(consumerGroup="g", conflation="true", autoAck="true")
    assert refused.value.fields["code"] == "conflation_with_auto_ack"
    with pytest.raises(BadRequest) as refused:
        pop(conflation="true")
    assert refused.value.fields["code"] == "conflation_without_group"
    # Stating "every message" is allowed with autoAck and in queue mode.
    assert pop(conflation="false", autoAck="true").auto_ack is True


@pytest.mark.parametrize(("stated", "stored", "echo", "conflict"), [
    (None, None, False, False),   # nobody stated one: every message, no echo
    (None, True, True, False),    # the stored policy applies to a pop that states none
    (True, True, True, False),
    (True, False, False, True),   # the client reads the conflict first, then the echo
    (False, True, True, True),
    (False, False, False, False),
])
def test_the_reply_echoes_the_stored_policy_and_flags_a_conflict(stated, stored, echo, conflict):
    query = {"consumerGroup": "g"} if stated is None else {
        "consumerGroup": "g", "conflation": str(stated).lower()}
    req = pop(**query)
    decoded = decode_claim([("q", claimed(P1, 4, frame("a"), conflation=stored, superseded=3))],
                           req, str(LEASE), reverse)
    assert decoded.superseded == 3
    delivery = assemble_reply(req, LEASE, decoded)
    assert delivery is not None and delivery.superseded == 3
    assert delivery.reply.get("conflation", False) is echo
    assert delivery.reply.get("conflationConflict", False) is conflict


def test_an_empty_conflating_reply_is_a_body_with_the_echo():
    req = pop(consumerGroup="g", conflation="true")
    # A queue never seen: the stated policy is the one its first claim will store.
    empty = empty_conflation_reply(req, Decoded())
    assert empty.lease_id is None
    assert empty.reply == {"success": True, "queue": "q", "consumerGroup": "g", "messages": [],
                           "partitionsClaimed": 0, "conflation": True}
    stored_other = decode_claim([("q", {"partition_id": None, "next_check_at": None,
                                        "conflation": False, "superseded": 0})],
                                req, "", reverse)
    assert empty_conflation_reply(req, stored_other).reply == {
        "success": True, "queue": "q", "consumerGroup": "g", "messages": [],
        "partitionsClaimed": 0, "conflationConflict": True}
