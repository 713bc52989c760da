"""Message and lease ids: UUIDv7 (time-ordered), from uuid-utils."""

from __future__ import annotations

import uuid_utils

ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def new_id() -> uuid_utils.UUID:
    return uuid_utils.uuid7()
