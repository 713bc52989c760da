"""The template cache: initialised, migrated clusters that a test broker copies instead of
running initdb.

initdb takes a second or two; copying its result takes a tenth of that. The cache keeps one
template per PostgreSQL version and schema (the text of its migrations, functions, views and
triggers), in the user's cache directory: `$XDG_CACHE_HOME/queen-trio`, else
`~/.cache/queen-trio`. Under root it is
`/var/cache/queen-trio`, which the cluster's user (queen-pg) can reach without opening /root.
QUEEN_TRIO_CACHE_DIR overrides both. It is the one thing a test session leaves behind.

A template is built in a temporary directory beside its final place and renamed into place
once complete, so concurrent builders (pytest-xdist workers) never see half of one: the first
rename wins and the others discard theirs. It was stopped cleanly, so a copy starts like a
restarted cluster. It holds a migrated database, `queen_template`, for test databases to
clone, and one clone made already, `queen_spare`. It carries the cluster's password file along
(0600, in a 0700 cache only its owner reads): every copy shares the template's password, and
admits nothing else (storage/embedded.py).

Templates are throwaway clusters (`durable=False`: no fsync). One that does not start is
removed, and built again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import attrs

from ..storage.embedded import (
    EmbeddedPostgres,
    EmbeddedPostgresError,
    find_bin_dir,
    scrubbed_environment,
)
from ..storage.sql import migrations, sql_objects

log = logging.getLogger("queen_trio.cluster_cache")

CACHE_ENV = "QUEEN_TRIO_CACHE_DIR"
TEMPLATE_DATABASE = "queen_template"
# A clone of the template made at build time: a session's first database costs a rename,
# not a clone.
SPARE_DATABASE = "queen_spare"
# Bump when the layout of a cache entry changes.
LAYOUT = "v1"
READY = "READY"
# Entries of other keys (older schemas) kept besides the current one.
KEEP_OTHERS = 2
# A copy whose server does not start (a port another process took meanwhile) is retried.
START_ATTEMPTS = 3
# A build directory this old belongs to a builder that died.
ABANDONED_SECONDS = 600


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.geteuid() == 0:
        # Never under /root: the cluster's user could not reach it.
        return Path("/var/cache/queen-trio")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "queen-trio"


def postgres_version(bin_dir: Path | None = None) -> str:
    """`18.6`, from the server binary itself (it answers --version even as root)."""
    bin_dir = bin_dir or find_bin_dir()
    out = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True,
                         text=True, check=True, env=scrubbed_environment()).stdout
    return out.strip().rsplit(" ", 1)[-1]


def schema_version() -> str:
    """The newest migration's number and a digest of every migration's text and of every
    function, view and trigger: a template is rebuilt when any of them changes."""
    applied = migrations()
    digest = hashlib.sha256()
    for version, text in applied:
        digest.update(version.encode() + b"\0" + text.encode() + b"\0")
    digest.update(sql_objects().digest.encode())
    return f"{applied[-1][0].split('_', 1)[0]}-{digest.hexdigest()[:12]}"


def template_key(bin_dir: Path | None = None) -> str:
    return f"{LAYOUT}-pg{postgres_version(bin_dir)}-schema{schema_version()}"


def find_template(root: Path | None = None) -> Path | None:
    """The ready template for this PostgreSQL and schema, if the cache has one."""
    path = (root or cache_root()) / template_key()
    return path if (path / READY).exists() else None


@attrs.define
class Build:
    """A template being built: its cluster initialised and running in a staging directory."""

    root: Path
    final: Path
    staging: Path
    cluster: EmbeddedPostgres

    def abandon(self) -> None:
        self.cluster.stop(mode="immediate")
        shutil.rmtree(self.staging, ignore_errors=True)


def begin_build(root: Path | None = None) -> Build:
    """The slow, synchronous half of a build (initdb, the password, the start), which a
    caller may run in a thread while it imports the rest."""
    root = root or cache_root()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    final = root / template_key()
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    cluster = EmbeddedPostgres(staging, durable=False)
    try:
        cluster.start()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Build(root, final, staging, cluster)


async def finish_build(build: Build) -> Path:
    """Migrate the template database, make the spare, stop, and rename into place (unless
    another process did first); the template's path. Runs in a trio task."""
    # Here, not at the top: finding and copying a template needs neither trio nor asyncpg.
    import trio

    from ..storage.database import open_database
    from ..storage.schema import migrate
    from .server_admin import create_database

    cluster, staging, final = build.cluster, build.staging, build.final
    try:
        try:
            async with open_database(cluster.url(), pool_size=2, apply_migrations=False) as db:
                # file_copy: little WAL, so little of it to keep and copy with the template.
                await db.call(lambda conn: create_database(conn, TEMPLATE_DATABASE,
                                                           strategy="file_copy"))
                # On a connection of its own, closed after: nothing stays on the template.
                await migrate(cluster.url(TEMPLATE_DATABASE))
                await db.call(lambda conn: create_database(conn, SPARE_DATABASE,
                                                           template=TEMPLATE_DATABASE,
                                                           strategy="file_copy"))
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(cluster.stop)
        # A copy starts afresh: on a port of its own, with a log of its own.
        (staging / "port").unlink(missing_ok=True)
        (staging / "pgdata" / "server.log").unlink(missing_ok=True)
        (staging / READY).write_text(f"{final.name}\n")
        try:
            os.rename(staging, final)
        except OSError:
            if not (final / READY).exists():
                raise
            log.info("another process built the template first", extra={"template": str(final)})
        else:
            log.info("template cluster cached", extra={"template": str(final)})
            _prune(build.root, keep=final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


async def build_template(root: Path | None = None) -> Path:
    """Build the template for this PostgreSQL and schema (unless the cache has it) and
    rename it into place; its path. Runs in a trio task."""
    import trio

    found = find_template(root)
    if found is not None:
        return found
    return await finish_build(await trio.to_thread.run_sync(begin_build, root))


def _prune(root: Path, *, keep: Path) -> None:
    """Drop all but the newest few entries of other keys (older schemas or PostgreSQLs), and
    what builders that died left."""
    others = sorted((p for p in root.glob(f"{LAYOUT}-*") if p != keep and p.is_dir()),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in others[KEEP_OTHERS:]:
        shutil.rmtree(stale, ignore_errors=True)
    abandoned = time.time() - ABANDONED_SECONDS
    for leftover in [*root.glob(".build-*"), *root.glob(".broken-*")]:
        try:
            if leftover.stat().st_mtime < abandoned:
                shutil.rmtree(leftover, ignore_errors=True)
        except FileNotFoundError:
            pass


def copy_template(template: Path, into: Path) -> None:
    """Copy a template's data directory into `into`, keeping modes and, under root, owners
    (the cluster's files belong to its user). `cp -a` where there is one: it copies outside
    the interpreter's lock, while the test process imports the broker meanwhile."""
    into.mkdir(mode=0o700, parents=True, exist_ok=True)
    entries = [p for p in template.iterdir() if p.name != READY]
    cp = shutil.which("cp")
    if cp is not None:
        subprocess.run([cp, "-a", "--", *map(str, entries), str(into)], check=True,
                       capture_output=True)
        return
    for entry in entries:
        if entry.is_dir():
            shutil.copytree(entry, into / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, into / entry.name)
    if os.geteuid() == 0:
        for folder, _dirs, files in os.walk(template):
            rel = Path(folder).relative_to(template)
            for name in [".", *(f for f in files if f != READY)]:
                st = os.lstat(Path(folder) / name)
                os.lchown(into / rel / name, st.st_uid, st.st_gid)


def start_copy(template: Path, data_dir: Path) -> EmbeddedPostgres:
    """A running cluster in `data_dir` (empty or absent), copied from `template`."""
    copy_template(template, data_dir)
    for attempt in range(1, START_ATTEMPTS + 1):
        cluster = EmbeddedPostgres(data_dir, durable=False)
        try:
            cluster.start()
            return cluster
        except EmbeddedPostgresError:
            # The port it picked was taken before the server bound it: pick another.
            if attempt == START_ATTEMPTS or not _port_was_taken(data_dir):
                raise
            (data_dir / "port").unlink(missing_ok=True)
    raise AssertionError("unreachable")


def _port_was_taken(data_dir: Path) -> bool:
    try:
        log_text = (data_dir / "pgdata" / "server.log").read_text(errors="replace")
    except OSError:
        return False
    return "Address already in use" in log_text[-4000:]


def discard_template(template: Path) -> None:
    """Remove a template that could not be used (the next session builds it again)."""
    broken = template.with_name(f".broken-{template.name}-{os.getpid()}")
    try:
        os.rename(template, broken)
    except OSError:
        return
    shutil.rmtree(broken, ignore_errors=True)
