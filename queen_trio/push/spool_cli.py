"""`queen-trio spool retry`: put the records of failed/ back in line, and replay them.

A running broker holds its spool directory's lock, so the command asks that broker (admin
route `POST /api/v1/status/buffers/retry`). With no broker running it takes the directory
itself and replays it against the database (the embedded cluster when no URL is given).
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from contextlib import nullcontext
from typing import Any

import trio

from ..errors import ConfigError
from ..exits import Exit
from ..queues.queues import Queues
from ..settings import Settings
from ..storage.database import open_database
from ..storage.datadir import claim_data_dir
from ..storage.embedded import EmbeddedPostgres
from ..storage.encryption import PayloadCipher
from .spool import Spool
from .spool_root import worker_directories

PREFIX = "queen-trio spool retry"


def run(settings: Settings, url: str, token: str | None) -> int:
    return trio.run(_retry, settings, url, token)


async def _retry(settings: Settings, url: str, token: str | None) -> int:
    # Offline, every worker's directory is this command's to replay.
    spool = Spool(settings.spool_root, records_per_file=settings.spool_records_per_file,
                  adopt_from=worker_directories(settings.spool_root))
    try:
        await spool.open()
    except ConfigError:
        return await trio.to_thread.run_sync(_ask_broker, url, token)
    try:
        return await _replay_here(settings, spool)
    finally:
        await spool.close()


def _ask_broker(url: str, token: str | None) -> int:
    request = urllib.request.Request(f"{url.rstrip('/')}/api/v1/status/buffers/retry",
                                     data=b"", method="POST")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            reply: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        print(f"{PREFIX}: {url} answered {exc.code}: {detail}", file=sys.stderr)
        return Exit.AUTH if exc.code in (401, 403) else Exit.UNREACHABLE
    except (urllib.error.URLError, OSError) as exc:
        print(f"{PREFIX}: a broker holds the spool directory, but {url} cannot be reached: "
              f"{exc}", file=sys.stderr)
        return Exit.UNREACHABLE
    print(f"asked the running broker at {url}: requeued {reply['requeued']}; pending "
          f"{reply['pending']}; failed {reply['failed']} (it replays in the background)")
    return Exit.OK


async def _replay_here(settings: Settings, spool: Spool) -> int:
    cluster: EmbeddedPostgres | None = None
    # The embedded cluster belongs to whoever holds the data directory: take it first.
    with claim_data_dir(settings.data_dir) if settings.database_url is None else nullcontext():
        url = settings.database_url
        if url is None:
            cluster = EmbeddedPostgres(settings.data_dir)
            url = await trio.to_thread.run_sync(cluster.start)
        try:
            async with open_database(url, pool_size=2,
                                     connect_timeout_ms=settings.db_connection_timeout_ms) as db:
                with trio.move_on_after(30):
                    await db.ready.wait()
                if not db.ready.is_set():
                    print(f"{PREFIX}: the database cannot be reached", file=sys.stderr)
                    return Exit.UNREACHABLE
                requeued = await spool.retry_failed()
                cipher = PayloadCipher(settings.encryption_key)
                replayed = await spool.replay(db, Queues(db), cipher)
        finally:
            if cluster is not None:
                await trio.to_thread.run_sync(cluster.stop)
    stats = spool.statistics()
    print(f"requeued {requeued}; replayed {replayed}; pending {stats.pending}; "
          f"failed {stats.failed}")
    return Exit.OK if not stats.pending and not stats.failed else Exit.REFUSED
