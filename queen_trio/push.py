"""The push request: strict parsing into typed items, grouping and within-request dedup.

Payloads never pass through a JSON object model: msgspec hands back the exact byte span of
each payload (`msgspec.Raw`), which is what gets stored and later spliced into pops.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from . import frames, ids

MAX_NAME_LENGTH = 255
DEFAULT_PARTITION = "Default"


class BadRequest(Exception):
    """The request cannot be taken as a whole: a 400 with this message."""


class _WireItem(msgspec.Struct):
    queue: Any = UNSET
    partition: Any = UNSET
    transactionId: Any = UNSET
    payload: Raw | UnsetType = UNSET
    # traceId and producerSub are deliberately not fields: never honoured on push (seed).


class _WireBody(msgspec.Struct):
    items: list[_WireItem] | UnsetType = UNSET


_BODY = msgspec.json.Decoder(_WireBody)
_ITEM_PATH = re.compile(r"at `\$\.items\[(\d+)\]`$")


def decode_json(body: bytes) -> None:
    """Reject what is not strict JSON text: invalid UTF-8 anywhere (also inside payloads)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Invalid JSON: invalid UTF-8 at byte {exc.start}") from None


def _describe_decode_error(exc: msgspec.DecodeError) -> str:
    text = str(exc)
    if "truncated" in text:
        return "Invalid JSON: input is truncated or contains an invalid escape"
    return f"Invalid JSON: {text}"


def _name(value: Any, label: str, index: int) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{label} must be a string (item {index})")
    if len(value) > MAX_NAME_LENGTH:
        raise BadRequest(f"{label} must be at most {MAX_NAME_LENGTH} characters (item {index})")
    if "\x00" in value:
        raise BadRequest(f"{label} must not contain NUL characters (item {index})")
    return value


@attrs.define(slots=True)
class PushItem:
    index: int
    queue: str
    partition: str
    transaction_id: str
    payload: bytes
    message_id: Any  # uuid_utils.UUID, assigned before any database attempt
    status: str = "pending"
    error: str | None = None
    # For a stored duplicate: the original's id (ZERO_UUID when it can no longer be read).
    original_id: str | None = None
    # Set on a within-request (or within-segment) duplicate: the item whose outcome it shares.
    winner: PushItem | None = None
    # Only a transaction push may carry one (seed: traceId is ignored on /push).
    trace_id: bytes | None = None

    def outcome(self) -> tuple[str, str]:
        """(status, message id) as answered: a duplicate carries its winner's outcome."""
        if self.winner is not None:
            status, message_id = self.winner.outcome()
            return ("duplicate" if status == "queued" else status), message_id
        if self.status == "duplicate":
            return "duplicate", self.original_id or ids.ZERO_UUID
        if self.status in ("unavailable", "stale", "pending", "full"):
            # Not committed: a failure on the wire, whatever the internal reason.
            return "failed", str(self.message_id)
        return self.status, str(self.message_id)

    def result(self) -> dict[str, Any]:
        status, message_id = self.outcome()
        source = self.winner if self.winner is not None else self
        entry: dict[str, Any] = {
            "index": self.index,
            "message_id": message_id,
            "transaction_id": self.transaction_id,
            "queueName": self.queue,
            "status": status,
        }
        if source.error is not None and status == "failed":
            entry["error"] = source.error
        return entry


def decode_strict(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    """Decode a request body: BadRequest for an empty body or anything but strict JSON.
    A ValidationError (well-formed JSON of the wrong shape) is the caller's to word."""
    if not body.strip():
        raise BadRequest("Empty request body")
    decode_json(body)
    try:
        return decoder.decode(body)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError as exc:
        raise BadRequest(_describe_decode_error(exc)) from None


def parse_push_body(body: bytes) -> list[PushItem]:
    """Validate a push body into items (request order); raise BadRequest on the first problem."""
    try:
        wire = decode_strict(_BODY, body)
    except msgspec.ValidationError as exc:
        text = str(exc)
        item = _ITEM_PATH.search(text)
        if item:
            raise BadRequest(f"Item {item.group(1)} must be an object") from None
        if text.endswith("at `$.items`"):
            raise BadRequest("items array is required") from None
        raise BadRequest("Request body must be a JSON object") from None
    if wire.items is UNSET:
        raise BadRequest("items array is required")
    return [_parse_item(i, item) for i, item in enumerate(wire.items)]


def build_item(index: int, queue: Any, partition: Any, transaction_id: Any,
               payload: bytes) -> PushItem:
    """Validate the names of one item and give it its identity (used by /transaction)."""
    return _parse_item(index, _WireItem(queue=queue, partition=partition,
                                        transactionId=transaction_id, payload=Raw(payload)))


def _parse_item(index: int, item: _WireItem) -> PushItem:
    partition = DEFAULT_PARTITION if item.partition is UNSET else _name(
        item.partition, "Partition", index)
    if item.queue is UNSET:
        raise BadRequest(f"Queue must be a string (item {index})")
    queue = _name(item.queue, "Queue", index)
    if not queue:
        raise BadRequest(f"Queue name must not be empty (item {index})")
    if not partition:
        raise BadRequest(f"Partition name must not be empty (item {index})")
    txid: str | None = None
    if item.transactionId is not UNSET and item.transactionId is not None:
        txid = _name(item.transactionId, "TransactionId", index) or None
    if item.payload is UNSET:
        raise BadRequest(f"payload is required (item {index})")
    message_id = ids.new_id()
    return PushItem(
        index=index,
        queue=queue,
        partition=partition,
        # A generated transaction id is the message's own id (DECISIONS).
        transaction_id=txid if txid is not None else str(message_id),
        payload=bytes(item.payload),
        message_id=message_id,
    )


@attrs.define(slots=True)
class Group:
    """The items of one request for one (queue, partition): one commit unit."""

    queue: str
    partition: str
    items: list[PushItem] = attrs.Factory(list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.queue, self.partition)


def group_items(items: list[PushItem]) -> list[Group]:
    groups: dict[tuple[str, str], Group] = {}
    for item in items:
        key = (item.queue, item.partition)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(item.queue, item.partition)
        group.items.append(item)
    return list(groups.values())


@attrs.define(slots=True)
class PackedGroup:
    """A group ready for the lane: frames packed, payloads encrypted if the queue asks."""

    group: Group
    encrypted_assumed: bool
    dedup: bool
    # The items that carry a frame (within-request duplicates carry none), in order.
    writers: list[PushItem]
    frames: list[bytes]
    # Set by the lane once the group's fate is known: queued | stale | full | failed |
    # unavailable.
    done: trio.Event = attrs.Factory(trio.Event)
    outcome: str = "pending"


def pack_group(
    group: Group,
    *,
    dedup: bool,
    encryption_assumed: bool,
    encrypt: Any | None,
    producer_sub: str | None,
) -> PackedGroup:
    """Resolve within-request duplicates (first wins) and pack one frame per winner."""
    sub = producer_sub.encode() if producer_sub else b""
    seen: dict[str, PushItem] = {}
    writers: list[PushItem] = []
    packed: list[bytes] = []
    for item in group.items:
        item.winner = None
        item.status, item.error, item.original_id = "pending", None, None
        if dedup:
            first = seen.get(item.transaction_id)
            if first is not None:
                item.winner = first
                continue
            seen[item.transaction_id] = item
        payload = encrypt(item.payload) if encrypt is not None else item.payload
        packed.append(frames.pack(
            item.message_id.bytes, item.transaction_id.encode(), payload,
            producer_sub=sub, trace_id=item.trace_id, encrypted=encrypt is not None,
        ))
        writers.append(item)
    return PackedGroup(group, encryption_assumed, dedup, writers, packed)

