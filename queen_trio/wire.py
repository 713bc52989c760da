"""Request parsing shared by every route: strict JSON, query parameters, ids, names, groups,
timestamps and pagination, and the timestamp formats replies use (docs/decisions.md#wire).

Everything here raises `errors.BadRequest` with a message that names the field.
"""

from __future__ import annotations

import datetime as dt
import itertools
import operator
import re
import uuid
from collections.abc import Mapping
from typing import Any

import attrs
import msgspec
from asyncpg.pgproto.pgproto import UUID as _C_UUID

from .errors import BadRequest

# A queue-mode consumer is this group (`consumerGroup` absent or empty).
QUEUE_MODE = "__QUEUE_MODE__"
MAX_NAME_LENGTH = 255
# Arrays and objects nest at most this deep in any request body, payloads included.
MAX_JSON_DEPTH = 128
INT32_MAX = 2**31 - 1

_ANY_JSON = msgspec.json.Decoder()
_TRUE, _FALSE = ("true", "1"), ("false", "0")
# ASCII digits only (`\\d` takes any script's, and int() more than that); past this many
# digits no bound fits, and int() refuses thousands of them.
_INTEGER = re.compile(r"-?([0-9]+)")
MAX_DIGITS = 20
# The years a request's timestamp may name (in UTC): the broker adds and subtracts minutes
# and hours, and datetime holds years 1 to 9999 only.
EARLIEST_YEAR, LATEST_YEAR = 1, 9998


# -- JSON bodies -------------------------------------------------------------------------------

def _check_utf8(body: bytes) -> None:
    """Strict JSON text is UTF-8 everywhere, payloads included."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Invalid JSON: invalid UTF-8 at byte {exc.start}") from None


def _describe_decode_error(exc: msgspec.DecodeError) -> str:
    text = str(exc)
    if "truncated" in text:
        return "Invalid JSON: input is truncated or contains an invalid escape"
    return f"Invalid JSON: {text}"


def check_depth(body: bytes, limit: int = MAX_JSON_DEPTH) -> None:
    """BadRequest when arrays and objects nest deeper than `limit`, strings aside. Counting
    brackets first keeps the common body from any scan; past that, strings are blanked and the
    brackets kept by C code (a regular expression, `bytes.translate`), and the brackets are
    summed in C as well: a push of 100 items costs microseconds, not milliseconds."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return
    # Whole strings out (an unterminated one runs to the end, as a JSON reader reads it).
    steps = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS).translate(_STEPS)
    # The depth after k brackets is the sum of their steps (2 or 0 each) less k; iterated in
    # C (accumulate, map, max), not in Python.
    if steps and max(map(operator.sub, itertools.accumulate(steps), itertools.count(1))) > limit:
        raise BadRequest(f"Invalid JSON: nested deeper than {limit} levels")


# A JSON string, escapes included; an unterminated one runs to the end of the body.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?$)', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# "[" and "{" step up (2 - 1), "]" and "}" down (0 - 1).
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def decode_strict(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    """Decode a request body: BadRequest for an empty body or anything but strict JSON.
    A ValidationError (well-formed JSON of the wrong shape) is the caller's to word."""
    if not body.strip():
        raise BadRequest("Empty request body")
    _check_utf8(body)
    check_depth(body)
    try:
        return decoder.decode(body)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError as exc:
        raise BadRequest(_describe_decode_error(exc)) from None
    except RecursionError:
        raise BadRequest(f"Invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels") from None


def decode_object(body: bytes) -> Any:
    """Any strict JSON value; an empty body is {} (routes whose fields are all optional)."""
    if not body.strip():
        return {}
    return decode_strict(_ANY_JSON, body)


def require_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object")
    return body


# -- names and ids -----------------------------------------------------------------------------

def name(value: Any, label: str, where: str = "") -> str:
    """A queue, partition, group or trace name: a string of at most 255 characters, no NUL."""
    if not isinstance(value, str):
        raise BadRequest(f"{label} must be a string{where}")
    if len(value) > MAX_NAME_LENGTH:
        raise BadRequest(f"{label} must be at most {MAX_NAME_LENGTH} characters{where}")
    if "\x00" in value:
        raise BadRequest(f"{label} must not contain NUL characters{where}")
    return value


def text(value: Any, label: str, where: str = "") -> str:
    """Any other string that is stored as text (an ack's error, a trace's event type): no
    NUL, which PostgreSQL's text cannot hold."""
    if not isinstance(value, str):
        raise BadRequest(f"{label} must be a string{where}")
    if "\x00" in value:
        raise BadRequest(f"{label} must not contain NUL characters{where}")
    return value


def parse_uuid(value: Any, label: str) -> uuid.UUID:
    """Any form `uuid.UUID` reads. asyncpg's C parser (a `uuid.UUID` subclass, what asyncpg
    returns for uuid columns) reads the usual forms eight times faster, and an ack at batch
    10 parses twenty ids; it reads a subset of `uuid.UUID`'s forms (no braces, no `urn:`),
    to the same value, so the rest fall through to `uuid.UUID`."""
    if not isinstance(value, str):
        raise BadRequest(f"{label} must be a UUID string")
    try:
        return _C_UUID(value)
    except ValueError:
        pass
    try:
        return uuid.UUID(value)
    except ValueError:
        raise BadRequest(f"{label} is not a valid UUID: {value!r}") from None


def consumer_group(value: Any, where: str = "") -> str:
    """`consumerGroup`: absent, null or empty is queue mode (docs/decisions.md#queue-mode)."""
    if value is None or value == "":
        return QUEUE_MODE
    if not isinstance(value, str):
        raise BadRequest(f"consumerGroup{where} must be a string or null")
    return name(value, "consumerGroup", where)


# -- query parameters --------------------------------------------------------------------------

def query_bool(query: Mapping[str, str], key: str, default: bool) -> bool:
    raw = query.get(key)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise BadRequest(f"{key} must be true, false, 1 or 0")


def query_int(query: Mapping[str, str], key: str, default: int, *, minimum: int,
              maximum: int) -> int:
    raw = query.get(key)
    if raw is None:
        return default
    match = _INTEGER.fullmatch(raw.strip())
    if match is None:
        raise BadRequest(f"{key} must be an integer")
    value = int(match.group()) if len(match.group(1)) <= MAX_DIGITS else None
    if value is None or not minimum <= value <= maximum:
        raise BadRequest(f"{key} must be between {minimum} and {maximum}")
    return value


@attrs.frozen
class Page:
    limit: int
    offset: int

    def to_wire(self) -> dict[str, int]:
        return {"limit": self.limit, "offset": self.offset}


def pagination(query: Mapping[str, str], *, default_limit: int, max_limit: int) -> Page:
    """`limit` (1..max_limit) and `offset` (>= 0) of a list route."""
    return Page(query_int(query, "limit", default_limit, minimum=1, maximum=max_limit),
                query_int(query, "offset", 0, minimum=0, maximum=INT32_MAX))


# -- timestamps --------------------------------------------------------------------------------

def parse_timestamp(text: str, label: str) -> dt.datetime:
    """ISO-8601, in UTC; a trailing Z is UTC (Python 3.10 rejects it), a naive time is UTC.
    A time outside the years EARLIEST_YEAR..LATEST_YEAR (in UTC) is a BadRequest."""
    candidate = text.strip()
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(candidate)
    except ValueError:
        raise BadRequest(f"{label} is not an ISO-8601 timestamp: {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    refusal = BadRequest(f"{label} must be in the years {EARLIEST_YEAR} to {LATEST_YEAR} "
                         f"(UTC): {text!r}")
    try:
        utc = parsed.astimezone(dt.timezone.utc)
    except OverflowError:  # 0001-01-01T00:00:00+05:00 is in year 0 in UTC
        raise refusal from None
    if not EARLIEST_YEAR <= utc.year <= LATEST_YEAR:
        raise refusal
    return utc


def before(at: dt.datetime, span: dt.timedelta, label: str) -> dt.datetime:
    """`span` before `at` (a time parsed from `label`): a BadRequest naming `label` when that
    is before year 1."""
    try:
        return at - span
    except OverflowError:
        raise BadRequest(f"{label} is too early: {span} before it is before year "
                         f"{EARLIEST_YEAR}") from None


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def format_micros(value: dt.datetime) -> str:
    """Pop `createdAt`: UTC with microseconds."""
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_millis(value: dt.datetime) -> str:
    """Every other timestamp: UTC with milliseconds."""
    return format_micros(value)[:-4] + "Z"
