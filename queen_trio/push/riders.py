"""Transaction riders: the top-level keys of a POST /api/v1/transaction body besides
`operations` (the 2.6 client's `kv` and `timers`), applied in the SAME PostgreSQL transaction as
the bundle's pushes and acks, before them, in the order of RIDERS (the lock order: KV rows,
then timer rows, then queue, partition and consumer rows; docs/kv-and-locks.md).

A rider is two functions:
- `parse(value) -> prepared`: the body's value under the rider's key (present and non-empty;
  any JSON), validated as a whole before anything runs. Raises a BadRequest (400) or another
  QueenError; `prepared` is whatever `apply` wants.
- `apply(conn, prepared) -> (results, failure)`: runs inside the open transaction. `results`
  holds one dict per op of the rider, in its order; they follow the pushed items and acks (and
  the riders before it) in the flat `results` of the answer. `failure` is None, or the verdict
  of the op that lost a `required` precondition: a dict with its rider-local `index`, and
  `reason`, `value`, `version`; the runner then rolls everything back and answers 200
  `{"success": false, "reason": "kv_precondition", "failedIndex": <flat index>, "kvReason":
  reason, "version", "value"}`. Any exception rolls back too and is answered as usual.

A key the client may send that is not in RIDERS is refused (400 kv_bad_request,
riders_not_supported) rather than committed without its effect: REFUSED.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import attrs

from ..kv.rider import apply_kv_rider, parse_kv_rider

RiderResults = tuple[list[dict[str, Any]], dict[str, Any] | None]


@attrs.frozen
class Rider:
    parse: Callable[[Any], Any]
    apply: Callable[[asyncpg.Connection, Any], Awaitable[RiderResults]]


# Rider key -> its functions, in the order they are applied (and their results are listed).
RIDERS: dict[str, Rider] = {
    "kv": Rider(parse=parse_kv_rider, apply=apply_kv_rider),
}

# Rider keys of the 2.6 client that this broker does not honour yet.
REFUSED: tuple[str, ...] = tuple(key for key in ("kv", "timers") if key not in RIDERS)
