"""One message as the operations routes read it (ops/message_view.py), without PostgreSQL: the
one rule for a message's status, the reference group, and GET /api/v1/messages/:p/:t's reply
built from the read model."""

from __future__ import annotations

import datetime as dt
import uuid

import msgspec
import pytest

from queen_trio.errors import NotFound
from queen_trio.ops.message_view import (
    Position,
    message_reply,
    message_status,
    message_view,
    mode_type,
    reference,
)
from queen_trio.storage import frames
from queen_trio.storage.encryption import PayloadCipher
from queen_trio.wire import QUEUE_MODE

NOW = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
LATER = NOW + dt.timedelta(seconds=30)
PID = uuid.UUID(int=7)
MID = uuid.UUID(int=8)
KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
PLAIN = PayloadCipher(None)


def position(group: str = "g", cursor: int = 0, *, until: int | None = None,
             expires: dt.datetime | None = None, retries: int = 0) -> Position:
    return Position(group, cursor, retries, until, expires, NOW)


def state(group: str, cursor: int, *, until: int | None = None,
          expires: dt.datetime | None = None, lease: bool = True, retries: int = 0):  # type: ignore[no-untyped-def]
    """A `message_states` row."""
    return {"partition_id": PID, "consumer_group": group, "cursor_offset": cursor,
            "retry_count": retries, "lease_id": uuid.uuid4() if lease else None,
            "delivered_until": until, "lease_expires_at": expires, "read_at": NOW}


def lookup(offset: int = 5, frame: bytes | None = None, created: dt.datetime | None = NOW):  # type: ignore[no-untyped-def]
    """A `message_lookup` row."""
    return {"partition_id": PID, "partition_name": "p", "queue_id": uuid.UUID(int=1),
            "queue_name": "orders", "namespace": "", "task": "billing", "priority": 3,
            "lease_time": 60, "retry_limit": 2, "retry_delay": 0, "ttl": 0,
            "message_offset": offset, "created_at": created,
            "frame": frames.pack(MID.bytes, b"t1", b'{"a":1.50}', producer_sub=b"alice")
            if frame is None else frame}


def dead_letter(group: str, *, frame: bytes | None = None, retries: int = 3):  # type: ignore[no-untyped-def]
    return {"consumer_group": group, "error_message": "boom", "retry_count": retries,
            "failed_at": LATER, "frame": frame, "message_created_at": NOW}


# -- the status rule ------------------------------------------------------------------------------

def test_no_group_reading_the_partition_leaves_every_message_pending():
    assert message_status(None, 0) == "pending"
    assert message_status(None, 0, dead_lettered=True) == "dead_letter"


@pytest.mark.parametrize(("offset", "status"), [
    (3, "completed"), (4, "completed"),   # behind the cursor
    (5, "processing"), (6, "processing"),  # delivered under the live lease
    (7, "pending"), (50, "pending"),      # at or past what the lease delivered
])
def test_a_message_takes_its_status_from_the_cursor_and_the_live_lease(offset, status):
    assert message_status(position(cursor=5, until=7, expires=LATER), offset) == status


def test_an_expired_lease_delivers_nothing_any_more():
    for expires in (NOW, NOW - dt.timedelta(seconds=1)):  # at the database's clock: expired
        assert message_status(position(cursor=5, until=7, expires=expires), 5) == "pending"
    assert message_status(position(cursor=5, until=7, expires=None), 5) == "pending"
    assert message_status(position(cursor=5, until=None, expires=LATER), 5) == "pending"


def test_dead_lettered_wins_over_where_the_group_stands():
    assert message_status(position(cursor=9), 2, dead_lettered=True) == "dead_letter"


def test_a_lease_without_a_lease_id_is_no_lease():
    stale = Position.from_row(state("g", 5, until=7, expires=LATER, lease=False))
    assert stale.delivered_until is None and not stale.live_lease
    live = Position.from_row(state("g", 5, until=7, expires=LATER))
    assert live.live_lease and live.delivered_until == 7


def test_the_reference_is_queue_mode_else_the_slowest_group():
    slow, fast = position("zeta", cursor=2), position("alpha", cursor=9)
    assert reference([fast, slow]) == slow
    tie = position("alpha", cursor=2)
    assert reference([slow, tie]) == tie  # then by name
    queue = position(QUEUE_MODE, cursor=50)
    assert reference([slow, queue, fast]) == queue
    assert reference([]) is None


def test_mode_types():
    assert [mode_type(q, n) for q, n in [(True, 2), (True, 0), (False, 1), (False, 0)]] == [
        "hybrid", "queue", "bus", "none"]


# -- the read model and its reply ---------------------------------------------------------------

def test_the_reply_of_a_message_under_a_live_lease():
    states = [state("b", 5, until=6, expires=LATER, retries=1), state("a", 9, lease=False)]
    view = message_view(lookup(offset=5), states, [], PLAIN, "t1")
    assert [p.group for p in view.positions] == ["a", "b"]
    assert view.status == "processing" and view.reference is not None
    assert message_reply(view) == {
        "id": str(MID), "transactionId": "t1", "partitionId": str(PID),
        "queuePath": "orders/p", "queue": "orders", "partition": "p",
        "namespace": None, "task": "billing", "status": "processing",
        "payload": msgspec.Raw(b'{"a":1.50}'), "payloadError": None, "isEncrypted": False,
        "traceId": None, "producerSub": "alice", "createdAt": "2025-01-02T03:04:05.000Z",
        "errorMessage": None, "retryCount": 1, "leaseExpiresAt": "2025-01-02T03:04:35.000Z",
        "queueConfig": {"leaseTime": 60, "retryLimit": 2, "retryDelay": 0, "ttl": 0,
                        "priority": 3},
        "mode": {"hasQueueMode": False, "busGroupsCount": 2, "consumedByGroups": 1,
                 "type": "bus"},
        "consumerGroups": [
            {"name": "a", "status": "completed", "consumed": True, "leaseExpiresAt": None},
            {"name": "b", "status": "processing", "consumed": False,
             "leaseExpiresAt": "2025-01-02T03:04:35.000Z"}],
        "deadLetters": [],
    }


def test_a_dead_letter_is_dead_for_its_own_group_only():
    states = [state(QUEUE_MODE, 6), state("other", 2)]
    view = message_view(lookup(offset=5), states, [dead_letter(QUEUE_MODE)], PLAIN, "t1")
    reply = message_reply(view)
    assert reply["status"] == "dead_letter" and reply["leaseExpiresAt"] is None
    assert reply["errorMessage"] == "boom" and reply["retryCount"] == 3
    assert [(g["name"], g["status"]) for g in reply["consumerGroups"]] == [
        (QUEUE_MODE, "dead_letter"), ("other", "pending")]
    assert reply["mode"] == {"hasQueueMode": True, "busGroupsCount": 1,
                             "consumedByGroups": 0, "type": "hybrid"}
    assert reply["deadLetters"] == [{"consumerGroup": QUEUE_MODE, "errorMessage": "boom",
                                     "retryCount": 3, "failedAt": "2025-01-02T03:04:35.000Z"}]


def test_the_retry_count_is_the_reference_groups_only_at_its_cursor():
    at_cursor = message_view(lookup(offset=5), [state("g", 5, retries=2)], [], PLAIN, "t1")
    assert message_reply(at_cursor)["retryCount"] == 2
    ahead = message_view(lookup(offset=6), [state("g", 5, retries=2)], [], PLAIN, "t1")
    assert message_reply(ahead)["retryCount"] is None
    unread = message_view(lookup(), [], [], PLAIN, "t1")
    reply = message_reply(unread)
    assert (reply["status"], reply["retryCount"]) == ("pending", None)
    assert reply["mode"]["type"] == "none" and reply["consumerGroups"] == []


def test_a_segment_gone_to_retention_reads_the_dead_letters_copy():
    copy = frames.pack(MID.bytes, b"t1", b"[1]")
    row = lookup(frame=b"", created=None) | {"frame": None}
    view = message_view(row, [], [dead_letter("g", frame=copy)], PLAIN, "t1")
    assert view.payload == b"[1]" and view.created_at == NOW


def test_no_message_or_no_frame_left_is_not_found():
    with pytest.raises(NotFound, match="Message not found"):
        message_view(None, [], [], PLAIN, "t1")
    with pytest.raises(NotFound):
        message_view(lookup() | {"frame": None}, [], [], PLAIN, "t1")


def test_an_unreadable_frame_still_answers_with_why():
    broken = frames.pack(MID.bytes, b"t1", b"{}")[:-1]
    reply = message_reply(message_view(lookup(frame=broken), [], [], PLAIN, "t1"))
    assert reply["payload"] is None and reply["isEncrypted"] is None
    assert reply["payloadError"] == "undecodable frame: its header disagrees with its length"
    assert reply["id"] == str(MID) and reply["traceId"] is None


def test_an_encrypted_payload_is_decrypted_or_says_it_cannot_be():
    cipher = PayloadCipher(KEY)
    stored = frames.pack(MID.bytes, b"t1", cipher.encrypt(b'{"pin":1}'), encrypted=True)
    reply = message_reply(message_view(lookup(frame=stored), [], [], cipher, "t1"))
    assert reply["payload"] == msgspec.Raw(b'{"pin":1}') and reply["isEncrypted"] is True
    keyless = message_reply(message_view(lookup(frame=stored), [], [], PLAIN, "t1"))
    assert keyless["payload"] is None and keyless["isEncrypted"] is True
    assert keyless["payloadError"] == "its payload does not decrypt with this broker's key"
