"""Message and lease ids: UUIDv7 (time-ordered), from uuid-utils."""

from __future__ import annotations

import uuid

import uuid_utils

ZERO_UUID = "00000000-0000-0000-0000-000000000000"

# An id as the broker holds it: new_id's UUIDv7, or a stdlib UUID (read back from the spool,
# from the database, or made by a test).
Id = uuid.UUID | uuid_utils.UUID


def new_id() -> uuid_utils.UUID:
    return uuid_utils.uuid7()
