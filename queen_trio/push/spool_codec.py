"""The spool's file format: a file is a run of records, each a header (the body's length and
its crc32) and a msgpack body.

`encode_records` and `decode_records` are pure (bytes in, bytes or records out);
`read_records` reads a file with them. A record is only ever appended whole and fsynced, so
a torn tail (a crash mid-write, never answered `buffered`) ends a file's records.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs
import msgspec

log = logging.getLogger("queen_trio.spool")

RECORD_HEADER = struct.Struct(">II")  # length, crc32 of the body


class SpoolRecord(msgspec.Struct, array_like=True):
    queue: str
    partition: str
    message_id: bytes
    transaction_id: str
    producer_sub: str | None
    trace_id: bytes | None
    payload: bytes
    encrypted: bool
    # Its place among the partition's spooled records, in every directory (0: written before
    # stamps, ordered by its file alone).
    stamp: int = 0


_ENCODE = msgspec.msgpack.Encoder()
_DECODE = msgspec.msgpack.Decoder(SpoolRecord)


def encode_record(record: SpoolRecord) -> bytes:
    body = _ENCODE.encode(record)
    return RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body


def encode_records(records: Iterable[SpoolRecord]) -> bytes:
    return b"".join(encode_record(r) for r in records)


@attrs.frozen
class Decoded:
    records: list[SpoolRecord]
    # The data ends in a record cut short or whose crc does not match: the rest is ignored.
    # (A tail too short to be a header is ignored without a word.)
    torn: bool


def decode_records(data: bytes) -> Decoded:
    """Every whole record of `data`, in order, up to the first torn one."""
    records: list[SpoolRecord] = []
    at = 0
    while at + RECORD_HEADER.size <= len(data):
        length, crc = RECORD_HEADER.unpack_from(data, at)
        body = data[at + RECORD_HEADER.size: at + RECORD_HEADER.size + length]
        if len(body) < length or zlib.crc32(body) != crc:
            return Decoded(records, torn=True)
        records.append(_DECODE.decode(body))
        at += RECORD_HEADER.size + length
    return Decoded(records, torn=False)


def read_records(path: Path, *, quiet: bool = False) -> Iterator[SpoolRecord]:
    """Every whole record of a file; a torn tail (a crash mid-write, never answered) ends it.
    `quiet`: the file may be another worker's, being appended to right now."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if not quiet:
            raise
        return  # its owner replayed it and removed it meanwhile
    decoded = decode_records(data)
    yield from decoded.records
    if decoded.torn and not quiet:
        log.warning("spool file ends in a torn record", extra={"file": str(path)})
