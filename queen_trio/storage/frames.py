"""The packed frame: one message inside a segment.

    header  >16sBHHI   message id, flags, len(transaction id), len(producer sub), len(payload)
    [16 bytes trace id, when FLAG_TRACE]
    transaction id (UTF-8), producer sub (UTF-8), payload bytes

The payload is the exact JSON text received (or its ciphertext when FLAG_ENCRYPTED), so a pop
splices it into the reply without decoding it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import attrs

from ..ids import ZERO_UUID

HEADER = struct.Struct(">16sBHHI")
FLAG_ENCRYPTED = 0x01
FLAG_TRACE = 0x02


def pack(
    message_id: bytes,
    transaction_id: bytes,
    payload: bytes,
    *,
    producer_sub: bytes = b"",
    trace_id: bytes | None = None,
    encrypted: bool = False,
) -> bytes:
    flags = (FLAG_ENCRYPTED if encrypted else 0) | (FLAG_TRACE if trace_id else 0)
    head = HEADER.pack(message_id, flags, len(transaction_id), len(producer_sub), len(payload))
    return b"".join((head, trace_id or b"", transaction_id, producer_sub, payload))


def uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# (id, transaction id, trace id, producer sub, encrypted, payload)
Fields = tuple[str, str, str | None, str | None, bool, bytes]


@attrs.frozen
class Undecodable:
    """A frame that cannot be read: its message id (all zeros when even that is cut off),
    its transaction id when the header could be read, and why."""

    message_id: str
    transaction_id: str | None
    reason: str


def read_one(frame: bytes) -> Fields | Undecodable:
    """A frame stored on its own (a dead letter's copy, one message's): as `fields_between`."""
    return next(fields_between(frame, [len(frame)]))


def fields_between(frames: bytes, ends: Sequence[int]) -> Iterator[Fields | Undecodable]:
    """The hot path of a pop: per frame, (id, transaction id, trace id, producer sub,
    encrypted, payload) as text, without building Frame objects. `ends[i]` is where frame i
    ends, so each frame is read on its own: one that does not parse (its header disagrees
    with its length, or its text is not UTF-8) is an Undecodable, and the next still reads."""
    at, size = 0, HEADER.size
    unpack_header = HEADER.unpack_from
    for end in ends:
        try:
            mid, flags, tx_len, sub_len, payload_len = unpack_header(frames, at)
            body = at + size
            trace = None
            if flags & FLAG_TRACE:
                trace = uuid_text(frames[body : body + 16])
                body += 16
            if body + tx_len + sub_len + payload_len != end:
                raise ValueError("its header disagrees with its length")
            txid = frames[body : body + tx_len].decode()
            body += tx_len
            sub = frames[body : body + sub_len].decode() if sub_len else None
            body += sub_len
            yield (uuid_text(mid), txid, trace, sub, bool(flags & FLAG_ENCRYPTED),
                   frames[body:end])
        except (struct.error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            raw_id = frames[at : at + 16]
            yield Undecodable(uuid_text(raw_id) if len(raw_id) == 16 and end - at >= 16
                              else ZERO_UUID, None, f"undecodable frame: {exc}")
        at = end
