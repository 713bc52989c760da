"""The tests' own embedded PostgreSQL clusters, in directories outside pytest's temporary root.

Under root a cluster runs as its own user, which must traverse every parent of its data
directory. pytest resets its temporary root to mode 0700 whenever a session starts, so a
cluster kept there is cut off from its files (PANIC: could not open pg_control) as soon as
another session starts on the same machine.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from queen_trio.storage.embedded import EmbeddedPostgres


@contextmanager
def cluster_dir(prefix: str = "queen-test-pg-") -> Iterator[Path]:
    """A fresh directory for one cluster (or a broker's data directory), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def running_cluster(data_dir: Path) -> Iterator[EmbeddedPostgres]:
    """A cluster started in `data_dir`, stopped (immediately) afterwards."""
    server = EmbeddedPostgres(data_dir)
    server.start()
    try:
        yield server
    finally:
        server.stop(mode="immediate")
