"""A stored segment's frames as records, for tests to compare whole messages.

The broker never builds these: a pop reads the text fields it splices with
`frames.fields_between`. This reader follows the same layout (`frames.HEADER` and its flags)
and gives each frame with its ids as UUIDs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import attrs

from queen_trio.storage.frames import FLAG_ENCRYPTED, FLAG_TRACE, HEADER


@attrs.frozen
class Frame:
    message_id: uuid.UUID
    transaction_id: str
    payload: bytes
    producer_sub: str | None = None
    trace_id: uuid.UUID | None = None
    encrypted: bool = False


def unpack(frames: bytes | memoryview) -> Iterator[Frame]:
    """Every frame of a packed segment, in offset order."""
    view = memoryview(frames)
    at, end = 0, len(view)
    size = HEADER.size
    while at < end:
        mid, flags, tx_len, sub_len, payload_len = HEADER.unpack_from(view, at)
        at += size
        trace = None
        if flags & FLAG_TRACE:
            trace = uuid.UUID(bytes=bytes(view[at : at + 16]))
            at += 16
        txid = str(view[at : at + tx_len], "utf-8")
        at += tx_len
        sub = str(view[at : at + sub_len], "utf-8") if sub_len else None
        at += sub_len
        payload = bytes(view[at : at + payload_len])
        at += payload_len
        yield Frame(
            message_id=uuid.UUID(bytes=mid),
            transaction_id=txid,
            payload=payload,
            producer_sub=sub,
            trace_id=trace,
            encrypted=bool(flags & FLAG_ENCRYPTED),
        )
