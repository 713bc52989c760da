"""The spool's parts without PostgreSQL: records, a directory's writer, ledger and replayer
wired as `Spool` wires them, and an in-memory store that lands replayed chunks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from queen_trio.push.spool_codec import SpoolRecord
from queen_trio.push.spool_ledger import SpoolLedger
from queen_trio.push.spool_replay import SpoolReplayer
from queen_trio.push.spool_root import FAILED, release_markers, stamp_records
from queen_trio.push.spool_writer import SpoolWriter


def spool_record(partition: str, txid: str, *, queue: str = "q", stamp: int = 0,
                 payload: bytes = b"1") -> SpoolRecord:
    """A record whose message id is made from its transaction id (unique per test)."""
    return SpoolRecord(queue=queue, partition=partition,
                       message_id=txid.encode().ljust(16, b".")[:16], transaction_id=txid,
                       producer_sub=None, trace_id=None, payload=payload, encrypted=False,
                       stamp=stamp)


class SpoolParts:
    """One spool directory's writer, ledger and replayer, on `root` (the directory itself
    unless it is a worker's)."""

    def __init__(self, directory: Path, *, root: Path | None = None,
                 records_per_file: int = 10_000) -> None:
        self.directory = directory
        self.root = root if root is not None else directory
        (directory / FAILED).mkdir(parents=True, exist_ok=True)
        self.ledger = SpoolLedger()
        self.writer = SpoolWriter(directory, self.ledger, records_per_file=records_per_file)
        self.replayer = SpoolReplayer(directory, self.writer, self.ledger, root=self.root)

    async def append(self, *records: SpoolRecord) -> None:
        """As `Spool.append`: stamped under the partitions' markers, then written."""
        markers = await trio.to_thread.run_sync(stamp_records, self.root, list(records))
        try:
            await self.writer.append(list(records))
        finally:
            await trio.to_thread.run_sync(release_markers, markers)


@attrs.define
class FakeStore:
    """Lands replayed chunks in memory, skipping message ids it holds already (as
    queen.spool_replayed does). `refuse(chunk)` returns an exception to raise instead."""

    stored: list[SpoolRecord] = attrs.Factory(list)
    calls: int = 0
    refuse: Callable[[list[SpoolRecord]], Exception | None] = lambda chunk: None

    async def land(self, chunk: list[SpoolRecord]) -> int:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        problem = self.refuse(chunk)
        if problem is not None:
            raise problem
        held = {r.message_id for r in self.stored}
        fresh = [r for r in chunk if r.message_id not in held]
        self.stored.extend(fresh)
        return len(fresh)

    def transaction_ids(self, partition: str | None = None) -> list[str]:
        return [r.transaction_id for r in self.stored
                if partition is None or r.partition == partition]
