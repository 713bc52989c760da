"""The push request: strict parsing of a body into typed items, each with its identity.

Payloads never pass through a JSON object model: msgspec hands back the exact byte span of
each payload (`msgspec.Raw`), which is what gets stored and later spliced into pops.
"""

from __future__ import annotations

import re

import msgspec
from msgspec import UNSET, Raw, UnsetType

from .. import ids, wire
from ..errors import BadRequest
from .items import PushItem

DEFAULT_PARTITION = "Default"


class _WireItem(msgspec.Struct):
    queue: object = UNSET
    partition: object = UNSET
    transactionId: object = UNSET
    payload: Raw | UnsetType = UNSET
    # Never stored; only noticed, to explain a missing payload.
    data: Raw | UnsetType = UNSET
    # traceId and producerSub are deliberately not fields: never honoured on push (seed).


class _WireBody(msgspec.Struct):
    items: list[_WireItem] | UnsetType = UNSET


_BODY = msgspec.json.Decoder(_WireBody)
_ITEM_PATH = re.compile(r"at `\$\.items\[(\d+)\]`$")


def parse_push_body(body: bytes) -> list[PushItem]:
    """Validate a push body into items (request order); raise BadRequest on the first problem."""
    try:
        decoded = wire.decode_strict(_BODY, body)
    except msgspec.ValidationError as exc:
        text = str(exc)
        item = _ITEM_PATH.search(text)
        if item:
            raise BadRequest(f"Item {item.group(1)} must be an object") from None
        if text.endswith("at `$.items`"):
            raise BadRequest("items array is required") from None
        raise BadRequest("Request body must be a JSON object") from None
    if decoded.items is UNSET:
        raise BadRequest("items array is required")
    return [_parse_item(i, item) for i, item in enumerate(decoded.items)]


def build_item(index: int, queue: object, partition: object, transaction_id: object,
               payload: bytes) -> PushItem:
    """Validate the names of one item and give it its identity (used by /transaction)."""
    return _parse_item(index, _WireItem(queue=queue, partition=partition,
                                        transactionId=transaction_id, payload=Raw(payload)))


def _parse_item(index: int, item: _WireItem) -> PushItem:
    where = f" (item {index})"
    partition = DEFAULT_PARTITION if item.partition is UNSET else wire.name(
        item.partition, "Partition", where)
    if item.queue is UNSET:
        raise BadRequest(f"Queue must be a string{where}")
    queue = wire.name(item.queue, "Queue", where)
    if not queue:
        raise BadRequest(f"Queue name must not be empty{where}")
    if not partition:
        raise BadRequest(f"Partition name must not be empty{where}")
    txid: str | None = None
    if item.transactionId is not UNSET and item.transactionId is not None:
        txid = wire.name(item.transactionId, "TransactionId", where) or None
    if item.payload is UNSET:
        hint = ": the field is named payload; data is what pops return" if (
            item.data is not UNSET) else ""
        raise BadRequest(f"payload is required{where}{hint}")
    message_id = ids.new_id()
    return PushItem(
        index=index,
        queue=queue,
        partition=partition,
        # A generated transaction id is the message's own id
        # (docs/decisions.md#generated-transaction-ids).
        transaction_id=txid if txid is not None else str(message_id),
        payload=bytes(item.payload),
        message_id=message_id,
    )
