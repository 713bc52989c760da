"""The 2.6 client's binary push bodies (`Content-Type: application/x-queen-push`), read into
the same `PushItem`s a JSON push becomes (docs/decisions.md#binary-push).

    "QPB1" | u8 flags | [u32 raw_len, flag 1] | body
    body:  u32 groups | per group: u16 len, queue | u16 len, partition | u32 n
           | n x ([u16 len, transactionId, flag 4] | u32 len, payload)
    flag 8 (framed): per group u16 len, queue | u16 len, partition | u32 n | u32 z_len | z
           z: one zstd frame of n x (u32 len | u8 0 | u8[16] id | u16 len, txid | payload)

    "QTB1" | u8 flags | u32 len, head | u32 groups | the groups, framed as with flag 8

All integers little-endian. A binary push is a push: every item goes through the publisher
as a JSON item does (producerSub stamped, encryption before packing, dedup on the carried
transaction ids, the spool, maxSize, the per-item reply). The ids the framed groups carry
are the client's: the broker mints its own, as for JSON, and keeps the carried transaction
id (the client's id text when the caller gave none), so a retried body stays idempotent.
Flag 2 (counts-only answers) is refused: the reply is the per-item array (seed).

Every decompressed size (the body's raw_len, each frame's declared content size, and their
sum) is held to QUEEN_MAX_BODY_BYTES before anything is allocated (413 past it), and every
payload must be strict JSON, as in a JSON push.
"""

from __future__ import annotations

import struct

import msgspec
import zstandard

from .. import ids, wire
from ..errors import BadRequest, TooLarge
from .items import PushItem

CONTENT_TYPE = b"application/x-queen-push"
PUSH_MAGIC = b"QPB1"
TRANSACTION_MAGIC = b"QTB1"

FLAG_ZSTD = 1
FLAG_COUNTS = 2
FLAG_TXN = 4
FLAG_FRAMES = 8
_PUSH_FLAGS = FLAG_ZSTD | FLAG_COUNTS | FLAG_TXN | FLAG_FRAMES

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_RAW = msgspec.json.Decoder(msgspec.Raw)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
# A frame: u32 len | u8 0 | 16 id bytes | u16 txid len; then txid and payload.
_FRAME_HEAD = 4 + 1 + 16 + 2


def is_binary(headers: dict[bytes, bytes], body: bytes) -> bool:
    """Whether a push or transaction body is a binary one: its content type says so, or it
    starts with one of the magics (which no JSON text does)."""
    kind = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
    return kind == CONTENT_TYPE or body[:4] in (PUSH_MAGIC, TRANSACTION_MAGIC)


class _Reader:
    """Reads the little-endian fields of one buffer, with a 400 naming what ran short."""

    __slots__ = ("data", "at")

    def __init__(self, data: bytes, at: int = 0) -> None:
        self.data = data
        self.at = at

    def take(self, n: int, what: str) -> bytes:
        end = self.at + n
        if end > len(self.data):
            raise BadRequest(f"Invalid binary push: truncated in {what}")
        chunk = self.data[self.at:end]
        self.at = end
        return chunk

    def u16(self, what: str) -> int:
        value: int = _U16.unpack(self.take(2, what))[0]
        return value

    def u32(self, what: str) -> int:
        value: int = _U32.unpack(self.take(4, what))[0]
        return value

    def text16(self, what: str) -> str:
        raw = self.take(self.u16(what), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(f"Invalid binary push: {what} is not UTF-8") from None

    def done(self, what: str) -> None:
        if self.at != len(self.data):
            raise BadRequest(f"Invalid binary push: {len(self.data) - self.at} bytes after "
                             f"{what}")


class _Budget:
    """What may still be decompressed for this request (QUEEN_MAX_BODY_BYTES in all)."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.left = self.limit = limit

    def inflate(self, frame: bytes, what: str, expected: int | None = None) -> bytes:
        """One zstd frame, checked before it is decompressed: it declares its content size,
        that size fits what is left, and the frame is all of `frame`."""
        try:
            size = zstandard.frame_content_size(frame)
        except zstandard.ZstdError:
            raise BadRequest(f"Invalid binary push: {what} is not a zstd frame") from None
        if size < 0:
            raise BadRequest(f"Invalid binary push: {what} does not declare its content size")
        if size > self.left:
            raise TooLarge(f"Request body exceeds {self.limit} bytes once decompressed "
                           f"({what} declares {size})")
        if expected is not None and size != expected:
            raise BadRequest(f"Invalid binary push: {what} declares {size} bytes, raw_len "
                             f"says {expected}")
        inflater = zstandard.ZstdDecompressor().decompressobj()
        try:
            # zstd stops at the declared size: a frame that lies about it is corrupt.
            out = inflater.decompress(frame)
        except zstandard.ZstdError as exc:
            raise BadRequest(f"Invalid binary push: {what} does not decompress ({exc})") from None
        if not inflater.eof or inflater.unused_data or len(out) != size:
            raise BadRequest(f"Invalid binary push: {what} is not exactly one whole zstd frame")
        self.left -= size
        return out


def _payload(payload: bytes, where: str) -> bytes:
    """A payload as stored: strict JSON, as in a JSON push."""
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Invalid JSON{where}: invalid UTF-8 at byte {exc.start}") from None
    wire.check_depth(payload)
    try:
        _RAW.decode(payload)
    except msgspec.DecodeError as exc:
        raise BadRequest(f"Invalid JSON{where}: {exc}") from None
    except RecursionError:
        raise BadRequest(f"Invalid JSON{where}: nested deeper than "
                         f"{wire.MAX_JSON_DEPTH} levels") from None
    return payload


def _names(reader: _Reader, group: int) -> tuple[str, str]:
    where = f" (group {group})"
    queue = wire.name(reader.text16("queue name"), "Queue", where)
    partition = wire.name(reader.text16("partition name"), "Partition", where)
    if not queue:
        raise BadRequest(f"Queue name must not be empty{where}")
    if not partition:
        raise BadRequest(f"Partition name must not be empty{where}")
    return queue, partition


def _valid_payloads(payloads: list[bytes], first: int) -> None:
    """Every payload strict JSON, checked in one pass over them all as a JSON array; only a
    batch that fails that is checked payload by payload, for the error that names it."""
    joined = b"[" + b",".join(payloads) + b"]"
    try:
        joined.decode("utf-8")
        for payload in payloads:  # each one's own depth (mostly a count of its brackets)
            wire.check_depth(payload)
        spans = _RAWS.decode(joined)
        # Each element must be exactly its payload: two bad payloads can make one good array.
        if len(spans) == len(payloads) and all(
                bytes(span) == payload for span, payload in zip(spans, payloads, strict=True)):
            return
    except (UnicodeDecodeError, BadRequest, msgspec.DecodeError, RecursionError):
        pass
    for n, payload in enumerate(payloads):
        _payload(payload, f" (item {first + n})")


def _group_items(items: list[PushItem], queue: str, partition: str, txids: list[str],
                 payloads: list[bytes]) -> None:
    """One group's items, in order, with the broker's ids."""
    _valid_payloads(payloads, len(items))
    for txid, payload in zip(txids, payloads, strict=True):
        if txid:
            txid = wire.name(txid, "TransactionId", f" (item {len(items)})")
        message_id = ids.new_id()
        items.append(PushItem(index=len(items), queue=queue, partition=partition,
                              # A generated transaction id is the message's own id
                              # (docs/decisions.md#generated-transaction-ids).
                              transaction_id=txid or str(message_id), payload=payload,
                              message_id=message_id))


def _plain_groups(reader: _Reader, with_txn: bool, items: list[PushItem]) -> None:
    data = reader.data
    for group in range(reader.u32("group count")):
        queue, partition = _names(reader, group)
        count = reader.u32("item count")
        txids: list[str] = []
        payloads: list[bytes] = []
        at = reader.at
        for _ in range(count):
            if with_txn:
                reader.at = at
                txids.append(reader.text16("transaction id"))
                at = reader.at
            else:
                txids.append("")
            if at + 4 > len(data):
                raise BadRequest("Invalid binary push: truncated in payload length")
            (length,) = _U32.unpack_from(data, at)
            end = at + 4 + length
            if end > len(data):
                raise BadRequest("Invalid binary push: truncated in payload")
            payloads.append(data[at + 4:end])
            at = end
        reader.at = at
        _group_items(items, queue, partition, txids, payloads)
    reader.done("the last group")


def _framed_groups(reader: _Reader, budget: _Budget, items: list[PushItem]) -> None:
    """Groups whose messages come framed and compressed by the client: unpacked and framed
    again, with the broker's ids, into the broker's own segments."""
    for group in range(reader.u32("group count")):
        queue, partition = _names(reader, group)
        count = reader.u32("item count")
        framed = reader.take(reader.u32("group length"), "group frames")
        frames = _Reader(budget.inflate(framed, f"group {group}'s frames"))
        txids: list[str] = []
        payloads: list[bytes] = []
        for n in range(count):
            what = f"group {group} frame {n}"
            length = frames.u32(what)
            if length < _FRAME_HEAD - 4:
                raise BadRequest(f"Invalid binary push: {what} is too short")
            body = _Reader(frames.take(length, what))
            if body.take(1, what) != b"\x00":
                raise BadRequest(f"Invalid binary push: {what} has an unknown frame type")
            body.take(16, what)  # the client's message id: never stored
            txids.append(body.text16(f"{what}'s transaction id"))
            payloads.append(body.data[body.at:])
        frames.done(f"group {group}'s {count} frames")
        _group_items(items, queue, partition, txids, payloads)
    reader.done("the last group")


def binary_form(body: bytes) -> str:
    """The form of a binary body, as the metrics name it: plain, zstd, frames, transaction."""
    if body[:4] == TRANSACTION_MAGIC:
        return "transaction"
    flags = body[4] if len(body) > 4 else 0
    return "frames" if flags & FLAG_FRAMES else "zstd" if flags & FLAG_ZSTD else "plain"


def parse_binary_push(body: bytes, max_bytes: int) -> list[PushItem]:
    """A QPB1 body as push items, in body order; BadRequest (or TooLarge) on any problem."""
    if body[:4] != PUSH_MAGIC:
        raise BadRequest("Invalid binary push: the body must start with QPB1")
    reader = _Reader(body, 4)
    flags = reader.take(1, "flags")[0]
    if flags & ~_PUSH_FLAGS:
        raise BadRequest(f"Invalid binary push: unknown flags {flags:#04x}")
    if flags & FLAG_COUNTS:
        raise BadRequest("Invalid binary push: counts-only answers (flag 2) are not served: "
                         "the push reply is one result per item",
                         code="counts_not_supported")
    budget = _Budget(max_bytes)
    items: list[PushItem] = []
    if flags & FLAG_FRAMES:
        if flags & (FLAG_ZSTD | FLAG_TXN):
            raise BadRequest("Invalid binary push: flag 8 excludes flags 1 and 4")
        _framed_groups(reader, budget, items)
        return items
    if flags & FLAG_ZSTD:
        raw_len = reader.u32("raw_len")
        if raw_len > max_bytes:
            raise TooLarge(f"Request body exceeds {max_bytes} bytes once decompressed "
                           f"(raw_len {raw_len})")
        reader = _Reader(budget.inflate(body[reader.at:], "the body", raw_len))
    _plain_groups(reader, bool(flags & FLAG_TXN), items)
    return items


def split_binary_transaction(body: bytes, max_bytes: int) -> tuple[bytes, list[PushItem]]:
    """A QTB1 body as (its JSON head, its pushed items in body order)."""
    if body[:4] != TRANSACTION_MAGIC:
        raise BadRequest("Invalid binary transaction: the body must start with QTB1")
    reader = _Reader(body, 4)
    flags = reader.take(1, "flags")[0]
    if flags & FLAG_COUNTS:
        raise BadRequest("Invalid binary transaction: counts-only answers (flag 2) are not "
                         "served: the reply is one result per operation",
                         code="counts_not_supported")
    if flags:
        raise BadRequest(f"Invalid binary transaction: unknown flags {flags:#04x}")
    head = reader.take(reader.u32("head length"), "head")
    items: list[PushItem] = []
    _framed_groups(reader, _Budget(max_bytes), items)
    return head, items

