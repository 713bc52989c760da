"""The spool as the status routes see it: what every directory under the root holds
(GET /api/v1/status/buffers), and the failed records put back in line
(POST /api/v1/status/buffers/retry)."""

from __future__ import annotations

from typing import Any

import trio

from ..storage.database import Database
from .spool import DirectoryUsage, Spool, directory_usage
from .spool_root import directories


async def buffers(spool: Spool, db: Database, *, worker_id: str,
                  with_directories: bool) -> dict[str, Any]:
    """Counts over every directory: this process's own from memory, other workers' from their
    files. `with_directories` adds where they are (for admins only)."""
    own = spool.statistics()
    others = await trio.to_thread.run_sync(lambda: [
        directory_usage(d) for d in directories(spool.root) if d != spool.directory])
    reply: dict[str, Any] = {
        "pending": own.pending + sum(u.pending for u in others),
        "failed": own.failed + sum(u.failed for u in others),
        "files": own.files + sum(u.files for u in others),
        "dbHealthy": await db.ping(),
        "worker": worker_id}
    if with_directories:
        mine = DirectoryUsage(spool.directory, own.pending, own.failed, own.files)
        reply["directory"] = str(spool.directory.absolute())
        reply["directories"] = [_usage_to_wire(u) for u in (mine, *others)]
    return reply


def _usage_to_wire(usage: DirectoryUsage) -> dict[str, Any]:
    return {"directory": str(usage.directory.absolute()), "pending": usage.pending,
            "failed": usage.failed, "files": usage.files}


async def retry_failed(spool: Spool) -> dict[str, int]:
    """Every failed record (every worker's) back in line for replay here; the reply counts."""
    requeued = await spool.retry_failed()
    stats = spool.statistics()
    return {"requeued": requeued, "pending": stats.pending, "failed": stats.failed}
