"""The embedded PostgreSQL's door: a password only, no secrets in the postmaster's environment,
earlier data directories upgraded in place."""

from __future__ import annotations

import logging
import os
import socket
import stat
from pathlib import Path

import asyncpg
import pytest
import trio

from queen_trio.storage.embedded import EmbeddedPostgres
from tests.support.db import query_once as ask
from tests.support.processes import broker_process

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
# What an earlier queen-trio left in pg_hba.conf: initdb --auth=trust.
TRUST_HBA = ("local all all trust\n"
             "host all all 127.0.0.1/32 trust\n"
             "host all all ::1/128 trust\n")


def passwordless(server: EmbeddedPostgres) -> str:
    return f"postgresql://postgres@127.0.0.1:{server.port}/postgres"


def postmaster_environment(server: EmbeddedPostgres) -> dict[str, str]:
    running = server.postmaster()
    assert running is not None
    raw = Path(f"/proc/{running.pid}/environ").read_bytes()
    return dict(entry.split("=", 1) for entry in raw.decode().split("\0") if "=" in entry)


async def test_the_cluster_admits_only_its_password_and_never_sees_the_brokers_secrets(
        cluster_path, workers):
    data_dir = cluster_path
    env = {"JWT_ENABLED": "true", "JWT_SECRET": "jwt-secret-value", "QUEEN_ENCRYPTION_KEY": KEY,
           "QUEEN_SOMETHING_ELSE": "queen-value", "PGPASSWORD": "", "PGPASSFILE": "/nonexistent"}
    async with broker_process(env, args=["--data-dir", str(data_dir)], workers=workers):
        server = EmbeddedPostgres(data_dir)
        running = server.postmaster()
        assert running is not None
        server_env = postmaster_environment(server)
        assert "JWT_SECRET" not in server_env
        assert not [name for name in server_env if name.startswith("QUEEN_")]
        assert not {"jwt-secret-value", KEY, "queen-value"} & set(server_env.values())

        # The password file is the broker's alone, and it is the only way in.
        assert stat.S_IMODE(server.password_file.stat().st_mode) == 0o600
        with pytest.raises(asyncpg.InvalidPasswordError):
            await trio.to_thread.run_sync(ask, f"postgresql://postgres@127.0.0.1:{running.port}/postgres")
        with pytest.raises(asyncpg.InvalidPasswordError):
            await trio.to_thread.run_sync(
                ask, f"postgresql://postgres:guess@127.0.0.1:{running.port}/postgres")
        password = server.password_file.read_text().strip()
        url = f"postgresql://postgres:{password}@127.0.0.1:{running.port}/postgres"
        assert await trio.to_thread.run_sync(ask, url) == "postgres"


def test_a_data_directory_of_an_earlier_version_is_upgraded_in_place(cluster_path):
    server = EmbeddedPostgres(cluster_path)
    ask(server.start(), "CREATE TABLE kept AS SELECT 42 AS answer")
    server.stop()
    # Make it what an earlier version left: trust authentication and no password file.
    (server.pgdata / "pg_hba.conf").write_text(TRUST_HBA)
    server.password_file.unlink()

    url = server.start()
    try:
        assert ask(url, "SELECT answer FROM kept") == 42
        assert stat.S_IMODE(server.password_file.stat().st_mode) == 0o600
        with pytest.raises(asyncpg.InvalidPasswordError):
            ask(passwordless(server))
    finally:
        server.stop()


def test_quick_restarts_keep_the_clusters_port(cluster_path):
    """Each stop leaves the server's side of its connections in TIME_WAIT on the port; that
    must not count as taken."""
    server = EmbeddedPostgres(cluster_path)
    ports = []
    for _ in range(5):
        again = EmbeddedPostgres(cluster_path)  # a new process would know only the files
        again.start()
        ports.append(again.port)
        # A client connected while the server stops: the server closes first.
        with socket.create_connection(("127.0.0.1", again.port)):
            assert ask(again.url()) == "postgres"
            again.stop()
    assert ports == [ports[0]] * 5
    assert (server.data_dir / "port").read_text().strip() == str(ports[0])


@pytest.mark.skipif(os.geteuid() != 0, reason="only under root does the cluster run as another "
                                              "user, who must traverse the data directory's parents")
def test_under_root_every_directory_made_traversable_is_logged_with_its_modes(
        cluster_path, caplog):
    # Issue 25, point 2: a 0700 parent (a home directory) becomes 0701, and says so.
    caplog.set_level(logging.WARNING, logger="queen_trio.embedded")
    home = cluster_path / "home"
    home.mkdir(mode=0o700)
    cluster_path.chmod(0o700)
    server = EmbeddedPostgres(home / "data")
    server.start()
    server.stop(mode="immediate")
    changed = {record.directory: (record.old_mode, record.new_mode) for record in caplog.records
               if record.getMessage().startswith("directory made traversable")}
    assert changed[str(home)] == ("0700", "0701")
    assert changed[str(cluster_path)] == ("0700", "0701")
    assert stat.S_IMODE(home.stat().st_mode) == 0o701
    # Nothing changes without its line: every directory logged, and only those.
    for directory in (home, *home.parents):
        assert stat.S_IMODE(directory.stat().st_mode) & stat.S_IXOTH
    assert all(Path(path) in (home, *home.parents, home / "data") or
               Path(path) in server.bin_dir.parents or Path(path) == server.bin_dir
               for path in changed)
