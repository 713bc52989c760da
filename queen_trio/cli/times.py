"""Points in time as people type them: `15m ago`, `2026-12-01T07:00:00Z`, `beginning`, `end`."""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING

import click

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_AGO = re.compile(r"(\d+(?:\.\d+)?)\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|day|days|w)\s+ago")
BEGINNING = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def parse_time(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """An aware UTC datetime for `N{s,m,h,d,w} ago`, `now`, `beginning` or ISO 8601 (a time
    without an offset is UTC)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    spoken = text.strip().lower()
    if spoken == "now":
        return now
    if spoken == "beginning":
        return BEGINNING
    ago = _AGO.fullmatch(spoken)
    if ago:
        return now - dt.timedelta(seconds=float(ago.group(1)) * UNITS[ago.group(2)[0]])
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a time: use '15m ago', 'beginning', "
                                 "'now' or ISO 8601 such as 2026-12-01T07:00:00Z") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def iso(value: dt.datetime) -> str:
    """UTC, milliseconds, `Z`: what the broker parses and people read."""
    text = value.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


if TYPE_CHECKING:
    # Generic in the click that mypy reads; not subscriptable at run time in every click>=8.2.
    _TimeParamBase = click.ParamType[dt.datetime, "str | dt.datetime"]
else:
    _TimeParamBase = click.ParamType


class TimeParam(_TimeParamBase):
    name = "TIME"

    def convert(self, value: str | dt.datetime, param: click.Parameter | None,
                ctx: click.Context | None) -> dt.datetime:
        if isinstance(value, dt.datetime):
            return value
        return parse_time(value)


TIME = TimeParam()
