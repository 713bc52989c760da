"""Domain errors: what went wrong, in the broker's own words.

Services raise these; only the web layer (`queen_trio.web.app`) maps them to HTTP statuses.
"""

from __future__ import annotations


class QueenError(Exception):
    """Base of the errors a caller is meant to see; the message is the explanation.

    `fields` go into the error reply beside `"error"`: the machine-readable codes the 2.x
    clients branch on (`{"error": "kv_bad_request", "reason": "riders_not_supported"}`).
    """

    def __init__(self, message: str, **fields: object) -> None:
        super().__init__(message)
        self.fields = fields


class BadRequest(QueenError):
    """The request cannot be taken as a whole (bad JSON, a bad field): a 400."""


class TooLarge(QueenError):
    """The request exceeds a bound on its size (entries, bytes; a body past
    QUEEN_MAX_BODY_BYTES, counted as it is sent or once decompressed): a 413."""


class NotFound(QueenError):
    """The request names a queue, partition, message or other resource that does not exist."""


class Conflict(QueenError):
    """The resource exists but is not in a state that allows the request."""


class DatabaseUnavailable(QueenError):
    """The database cannot be reached; the message says "database connection unavailable",
    which is what the official consume loop retries on."""

    prefix = "database connection unavailable: "

    def __init__(self, cause: BaseException | str) -> None:
        super().__init__(f"{self.prefix}{cause}")


class Overloaded(QueenError):
    """The broker has more in hand than its bounds allow (memory waiting to be written, the
    connection pool): a 503 with Retry-After. Never spooled: the client should come back."""

    def __init__(self, what: str) -> None:
        super().__init__(f"broker overloaded: {what}")


class Unavailable(QueenError):
    """Not now, certainly nothing done: a 503 with Retry-After, the message as given (the KV
    and lock routes' `kv_unavailable`)."""


class SchemaError(QueenError):
    """The database's schema is one this broker cannot serve (older than it upgrades, or
    migrated by a newer broker); the message names the version and the way out."""


class ConfigError(QueenError):
    """The configuration cannot be used; the message names the variable and the cause."""
