"""An ephemeral queue's options: the closed list `POST /api/v1/ephemeral/configure` takes,
their defaults and their checks (docs/ephemeral.md#options)."""

from __future__ import annotations

from typing import Any

import attrs

from ..errors import BadRequest

CODE_BAD_REQUEST = "ephemeral_bad_request"
POLICIES = ("reject", "dropOldest")
# What an implicit queue (one a push or a pop names before any configure) gets.
DEFAULT_LEASE_SECONDS = 30
DEFAULT_RETRY_LIMIT = 3
# The largest value a numeric option may take (a year of seconds is far below it).
MAX_OPTION = 2**53


def bad_request(message: str) -> BadRequest:
    return BadRequest(message, code=CODE_BAD_REQUEST)


@attrs.frozen
class Options:
    """Effective options; 0 means "no bound" for maxBytes, maxLength and ttlSeconds."""

    max_bytes: int = 0
    max_length: int = 0
    policy: str = "reject"
    ttl_seconds: int = 0
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    retry_limit: int = DEFAULT_RETRY_LIMIT
    window_ms: int = 0
    window_count: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {"maxBytes": self.max_bytes, "maxLength": self.max_length,
                "policy": self.policy, "ttlSeconds": self.ttl_seconds,
                "leaseSeconds": self.lease_seconds, "retryLimit": self.retry_limit,
                "windowBuffer": {"ms": self.window_ms, "count": self.window_count}}


_NUMERIC = {"maxBytes": "max_bytes", "maxLength": "max_length", "ttlSeconds": "ttl_seconds",
            "leaseSeconds": "lease_seconds", "retryLimit": "retry_limit"}
KNOWN = (*_NUMERIC, "policy", "windowBuffer")


def _count(value: Any, label: str) -> int:
    # bool is an int in Python, never in JSON's sense.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OPTION:
        raise bad_request(f"{label} must be a non-negative integer")
    return value


def parse_options(raw: Any) -> Options:
    """The declared options as sent (a JSON object), checked; an unknown option, a negative
    or fractional number, a policy other than reject/dropOldest, or a windowBuffer with
    another key than ms and count is a 400 `ephemeral_bad_request`."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise bad_request("options must be a JSON object")
    unknown = sorted(set(raw) - set(KNOWN))
    if unknown:
        raise bad_request(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(KNOWN)}")
    fields: dict[str, Any] = {}
    for wire_name, field in _NUMERIC.items():
        if raw.get(wire_name) is not None:
            fields[field] = _count(raw[wire_name], wire_name)
    if fields.get("lease_seconds") == 0:
        raise bad_request("leaseSeconds must be at least 1")
    policy = raw.get("policy")
    if policy is not None:
        if policy not in POLICIES:
            raise bad_request("policy must be reject or dropOldest")
        fields["policy"] = policy
    window = raw.get("windowBuffer")
    if window is not None:
        if not isinstance(window, dict):
            raise bad_request("windowBuffer must be an object {ms, count}")
        extra = sorted(set(window) - {"ms", "count"})
        if extra:
            raise bad_request(f"windowBuffer takes only ms and count, not {', '.join(extra)}")
        if window.get("ms") is not None:
            fields["window_ms"] = _count(window["ms"], "windowBuffer.ms")
        if window.get("count") is not None:
            fields["window_count"] = _count(window["count"], "windowBuffer.count")
    return Options(**fields)
