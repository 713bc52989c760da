"""The template cache: built once in a temporary directory and renamed into place (two
builders at once leave one template), copied with its password, rebuilt when broken."""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

import asyncpg
import pytest
import trio
import trio_asyncio

from queen_trio.storage.embedded import SYSTEM_USER
from queen_trio.testing import cluster_cache
from queen_trio.testing.inprocess import open_test_postgres


async def test_two_builders_at_once_leave_one_template_and_no_leftovers(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    built: list[Path] = []

    async def build() -> None:
        built.append(await cluster_cache.build_template(root))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(build)
        nursery.start_soon(build)
    assert built[0] == built[1] == root / cluster_cache.template_key()
    assert sorted(p.name for p in root.iterdir()) == [built[0].name]
    template = built[0]
    assert cluster_cache.find_template(root) == template
    assert sorted(p.name for p in template.iterdir()) == [
        "READY", "pgdata", "postgres-password"]
    assert stat.S_IMODE(root.stat().st_mode) & 0o077 in (0, 0o001)  # at most o+x (traverse)
    assert stat.S_IMODE((template / "postgres-password").stat().st_mode) == 0o600
    if os.geteuid() == 0:
        assert not str(cluster_cache.cache_root()).startswith("/root")
        owner = pwd.getpwuid((template / "pgdata").stat().st_uid).pw_name
        assert owner == SYSTEM_USER
        assert (template / "postgres-password").stat().st_uid == 0

    # A copy: the template's password, a migrated template database and a spare clone.
    copy = cluster_cache.start_copy(template, tmp_path / "copy")
    try:
        assert (tmp_path / "copy" / "postgres-password").read_text() == (
            template / "postgres-password").read_text()
        assert stat.S_IMODE((tmp_path / "copy" / "postgres-password").stat().st_mode) == 0o600

        async def look() -> tuple[list[str], int]:
            conn = await asyncpg.connect(copy.url(cluster_cache.SPARE_DATABASE))
            try:
                names = [r[0] for r in await conn.fetch(
                    "SELECT datname FROM pg_database WHERE datname LIKE 'queen_%' ORDER BY 1")]
                return names, await conn.fetchval("SELECT count(*) FROM queen.schema_migrations")
            finally:
                await conn.close()

        async with trio_asyncio.open_loop():
            names, migrations = await trio_asyncio.aio_as_trio(look)()
        assert names == [cluster_cache.SPARE_DATABASE, cluster_cache.TEMPLATE_DATABASE]
        assert migrations == len(cluster_cache.migrations())

        async def wrong_password() -> None:
            password = (tmp_path / "copy" / "postgres-password").read_text().strip()
            url = copy.url().replace(password, "not-the-password")
            await asyncpg.connect(url)

        async with trio_asyncio.open_loop():
            with pytest.raises(asyncpg.InvalidPasswordError):
                await trio_asyncio.aio_as_trio(wrong_password)()
    finally:
        copy.stop(mode="immediate")


async def test_a_template_that_does_not_start_is_built_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A copy of the user's template (built first if need be) in a cache of the test's own.
    root = tmp_path / "cache"
    template = root / cluster_cache.template_key()
    template.mkdir(parents=True)
    cluster_cache.copy_template(await cluster_cache.build_template(), template)
    (template / cluster_cache.READY).write_text("ready\n")
    monkeypatch.setenv(cluster_cache.CACHE_ENV, str(root))
    assert cluster_cache.find_template() == template
    (template / "pgdata" / "PG_VERSION").write_text("7.4\n")  # no server starts on that
    async with open_test_postgres(data_root=tmp_path / "data") as server:
        url = await server.create_database()
        assert url.rsplit("/", 1)[1].startswith("queen_test_")
    rebuilt = cluster_cache.find_template()
    assert rebuilt == template
    assert (rebuilt / "pgdata" / "PG_VERSION").read_text().strip().startswith("1")
    assert [p.name for p in root.iterdir()] == [template.name]



async def test_without_cp_the_copy_keeps_modes_and_owners_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    template = await cluster_cache.build_template()

    def tree(root: Path) -> dict[str, tuple[int, int, int]]:
        return {str(p.relative_to(root)): (p.lstat().st_mode, p.lstat().st_uid, p.lstat().st_gid)
                for p in root.rglob("*") if p.name != cluster_cache.READY}

    cluster_cache.copy_template(template, tmp_path / "with-cp")
    monkeypatch.setattr(cluster_cache.shutil, "which", lambda name: None)
    cluster_cache.copy_template(template, tmp_path / "without-cp")
    assert tree(tmp_path / "without-cp") == tree(tmp_path / "with-cp") == tree(template)
