"""Time ranges and buckets for the status and analytics series.

A range is `from`/`to` (ISO-8601; defaults: the last hour, or what the route says); its span
picks the bucket width the reference uses (1, 5, 15, 60 or 360 minutes). The SQL groups
samples with `date_bin` on the same origin, and `fill` lays the rows over every bucket of the
range, so a curve has a point per bucket even where nothing was sampled.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from .. import wire
from ..errors import BadRequest
from ..storage.sql import Row

# date_bin's origin in every series query: buckets start on whole minutes, hours and days.
ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
MAX_POINTS = 2000


@attrs.frozen
class TimeRange:
    start: dt.datetime
    end: dt.datetime
    bucket_minutes: int

    @property
    def bucket(self) -> dt.timedelta:
        return dt.timedelta(minutes=self.bucket_minutes)

    @property
    def bucket_seconds(self) -> float:
        return self.bucket_minutes * 60.0

    def bins(self) -> list[dt.datetime]:
        """The start of every bucket that overlaps the range."""
        first = ORIGIN + ((self.start - ORIGIN) // self.bucket) * self.bucket
        out: list[dt.datetime] = []
        at = first
        while at <= self.end and len(out) < MAX_POINTS:
            out.append(at)
            at += self.bucket
        return out

    def to_wire(self) -> dict[str, str]:
        return {"from": wire.format_millis(self.start), "to": wire.format_millis(self.end)}

    def params(self) -> dict[str, Any]:
        return {"range_from": self.start, "range_to": self.end,
                "bucket_minutes": self.bucket_minutes}


def bucket_minutes_for(span: dt.timedelta) -> int:
    hours = span.total_seconds() / 3600
    if hours <= 2:
        return 1
    if hours <= 12:
        return 5
    if hours <= 48:
        return 15
    if hours <= 24 * 8:
        return 60
    return 360


INTERVALS = {"minute": 1, "hour": 60, "day": 1440}
# The widths a caller may ask for with `bucketMinutes` (the dashboard's interval picker).
BUCKET_MINUTES = (1, 5, 15, 60, 360, 1440)


def parse_range(query: Mapping[str, str], *, default_span: dt.timedelta = dt.timedelta(hours=1),
                interval: int | None = None) -> TimeRange:
    """`from` and `to` of a series route (400 when unparsable or reversed); `interval` (the
    route's own) or the query's `bucketMinutes` fixes the bucket width instead of the span's."""
    end = wire.utc_now()
    if query.get("to"):
        end = wire.parse_timestamp(query["to"], "to")
    if query.get("from"):
        start = wire.parse_timestamp(query["from"], "from")
    else:
        start = wire.before(end, default_span, "to")
    if start > end:
        raise BadRequest("from must not be after to")
    if interval is None and query.get("bucketMinutes"):
        interval = _bucket_minutes(query["bucketMinutes"])
    minutes = interval if interval is not None else bucket_minutes_for(end - start)
    if (end - start) / dt.timedelta(minutes=minutes) > MAX_POINTS:
        raise BadRequest(f"the range holds more than {MAX_POINTS} buckets of {minutes} minutes")
    return TimeRange(start, end, minutes)


def _bucket_minutes(text: str) -> int:
    # ASCII digits only: "²" is a digit to str.isdigit() and not to int().
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or (
            int(text) not in BUCKET_MINUTES):
        raise BadRequest("bucketMinutes must be one of "
                         + ", ".join(str(m) for m in BUCKET_MINUTES))
    return int(text)


def parse_interval(query: Mapping[str, str]) -> tuple[str, int]:
    name = query.get("interval") or "hour"
    if name not in INTERVALS:
        raise BadRequest("interval must be one of minute, hour, day")
    return name, INTERVALS[name]


R = TypeVar("R", bound=Row)


def fill(span: TimeRange, rows: Iterable[R],
         point: Callable[[R | None], dict[str, Any]]) -> list[dict[str, Any]]:
    """One point per bucket of `span`: `point(row)` for the bucket's row, `point(None)` where
    there is none. Rows carry their bucket start under "bucket"."""
    by_bucket = {row["bucket"]: row for row in rows}
    return [{"timestamp": wire.format_millis(at), **point(by_bucket.get(at))}
            for at in span.bins()]


def grouped(rows: Iterable[R], key: str) -> dict[str, list[R]]:
    """Rows split by `key`, in order of first appearance."""
    out: dict[str, list[R]] = {}
    for row in rows:
        out.setdefault(row[key], []).append(row)
    return out
