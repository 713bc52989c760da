"""Consumer supervision records, read back for people: the 2.6 client's `supervision()`
publishes a status document of each consume run into KV (namespace `queen-supervisor`, keys
`<group>/<instance>/head` and `<group>/<instance>/chunk/NNNN`, a 60 s TTL). This turns the
live rows into instances by group, a torn write (a head whose chunks are of another write)
and a stale one (no heartbeat within its `heartbeat_timeout`) marked as such.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

SUPERVISOR_NAMESPACE = "queen-supervisor"
HEAD_FORMAT = "queen.supervisor.remote-status/v1"
DEFAULT_HEARTBEAT_TIMEOUT = 30

_DECODE = msgspec.json.Decoder()


def _document(head: Mapping[str, Any], chunks: Mapping[int, Any]) -> dict[str, Any] | None:
    write = head.get("write")
    count = head.get("chunks")
    if not isinstance(count, int) or count < 1:
        return None
    parts: list[bytes] = []
    for index in range(count):
        chunk = chunks.get(index)
        if not isinstance(chunk, dict) or chunk.get("write") != write:
            return None
        try:
            parts.append(base64.b64decode(str(chunk.get("data", "")), validate=True))
        except (binascii.Error, ValueError):
            return None
    try:
        document = _DECODE.decode(b"".join(parts))
    except msgspec.DecodeError:
        return None
    return document if isinstance(document, dict) else None


def instances(rows: Iterable[Mapping[str, Any]], now_epoch: float) -> list[dict[str, Any]]:
    """Each instance whose head is live: group, instance, its document's fields, `stale` and
    `torn` (its chunks do not match its head: a write in progress, or a bad record)."""
    heads: dict[tuple[str, str], Mapping[str, Any]] = {}
    chunks: dict[tuple[str, str], dict[int, Any]] = {}
    updated: dict[tuple[str, str], str] = {}
    for row in rows:
        parts = str(row.get("key", "")).split("/")
        if len(parts) == 3 and parts[2] == "head":
            slot = (parts[0], parts[1])
            heads[slot] = row.get("value") or {}
            updated[slot] = str(row.get("updatedAt"))
        elif len(parts) == 4 and parts[2] == "chunk" and parts[3].isdigit():
            chunks.setdefault((parts[0], parts[1]), {})[int(parts[3])] = row.get("value")
    found: list[dict[str, Any]] = []
    for (group, instance), head in sorted(heads.items()):
        document = (_document(head, chunks.get((group, instance), {}))
                    if isinstance(head, dict) and head.get("format") == HEAD_FORMAT else None)
        entry: dict[str, Any] = {"group": group, "instance": instance,
                                 "recordUpdatedAt": updated[(group, instance)],
                                 "torn": document is None}
        if document is not None:
            config = document.get("configuration")
            timeout = (config.get("heartbeat_timeout") if isinstance(config, dict) else None)
            if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
                timeout = DEFAULT_HEARTBEAT_TIMEOUT
            beat = document.get("updated_at_epoch")
            fresh = isinstance(beat, (int, float)) and now_epoch - beat <= timeout
            pools = document.get("pool_status")
            entry.update({
                "state": document.get("state"), "hostname": document.get("hostname"),
                "pid": document.get("pid"), "engine": document.get("engine"),
                "updatedAtEpoch": beat, "startedAtEpoch": document.get("started_at_epoch"),
                "uptimeSeconds": document.get("uptime_seconds"),
                "heartbeatTimeout": timeout,
                "stale": not fresh and document.get("state") != "stopped",
                "pools": pools if isinstance(pools, list) else []})
        else:
            entry.update({"state": None, "stale": True, "pools": []})
        found.append(entry)
    return found
