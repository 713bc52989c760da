"""wire.check_depth: the fast scan answers as the plain walk over every character does."""

from __future__ import annotations

import random

import pytest

from queen_trio import wire
from queen_trio.errors import BadRequest


def walked_depth(body: bytes) -> int:
    """The deepest nesting, strings aside, one character at a time (the reference)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in body:
        if in_string:
            if escaped:
                escaped = False
            elif char == 0x5C:
                escaped = True
            elif char == 0x22:
                in_string = False
        elif char == 0x22:
            in_string = True
        elif char in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif char in (0x5D, 0x7D):
            depth -= 1
    return deepest


def refused(body: bytes, limit: int) -> bool:
    try:
        wire.check_depth(body, limit)
    except BadRequest as exc:
        assert "nested deeper than" in str(exc)
        return True
    return False


CASES = [
    b"[" * 129 + b"]" * 129,
    b"[" * 128 + b"]" * 128,
    b'{"a":"' + b"[" * 300 + b'"}',                 # brackets in a string
    b'{"a":"\\"' + b"[" * 300 + b'"}',              # after an escaped quote, still a string
    b'{"a":"\\\\"' + b"[" * 300 + b"]" * 300 + b"}",  # an escaped backslash ends the string
    b'["' + b"[" * 300,                              # an unterminated string runs to the end
    b'["\\' + b"[" * 300,
    b"[" * 200 + b'"x\\"]' + b"]" * 200,
    b'{"items":[' + b",".join([b'{"queue":"q","payload":{"a":[1,{"b":[2]}]}}'] * 100) + b"]}",
]


@pytest.mark.parametrize("body", CASES)
def test_the_scan_refuses_exactly_what_the_walk_finds_too_deep(body: bytes) -> None:
    assert refused(body, 128) == (walked_depth(body) > 128)


def test_random_bodies_agree_with_the_walk() -> None:
    rng = random.Random(24)
    alphabet = b'[]{}"\\ax,:'
    for _ in range(3000):
        body = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        limit = rng.randint(1, 6)
        assert refused(body, limit) == (walked_depth(body) > limit), body
