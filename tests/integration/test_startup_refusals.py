"""A configuration that cannot work refuses to start: exit 2, one line naming the variable and
its value, no traceback, and no cluster left behind (real processes)."""

from __future__ import annotations

import socket

import pytest

from queen_trio.storage.embedded import EmbeddedPostgres
from tests.support.processes import free_port, refused_start, running_broker

REFUSALS = [
    ({"DATABASE_URL": "mysql://root@db/queen"}, [], "DATABASE_URL='mysql://root@db/queen'"),
    ({"DATABASE_URL": "postgresql://u:secret@db:five/queen"}, [], "DATABASE_URL="),
    ({"DATABASE_URL": "localhost:5432"}, [], "DATABASE_URL='localhost:5432'"),
    ({"PG_HOST": "db", "PG_PORT": "fifty"}, [], "PG_PORT='fifty'"),
    ({}, ["--database-url", "http://db/queen"], "--database-url='http://db/queen'"),
    ({"JWT_ENABLED": "yes"}, [], "JWT_ENABLED='yes'"),
    ({"JWT_ALLOW_NO_EXP": "sure"}, [], "JWT_ALLOW_NO_EXP='sure'"),
    ({"LOG_REQUESTS": "on"}, [], "LOG_REQUESTS='on'"),
    ({"LOG_LEVEL": "loud"}, [], "LOG_LEVEL='loud'"),
    ({}, ["--log-level", "verbose"], "--log-level='verbose'"),
    ({}, ["--port", "abc"], "--port='abc' is not an integer"),
    ({"QUEEN_PUSH_SHARDS": "20"}, [], "QUEEN_PUSH_SHARDS=20 must be below DB_POOL_SIZE=20"),
    ({"LOG_FORMAT": "xml"}, [], "LOG_FORMAT='xml'"),
    ({"HOST": "no-such-host.invalid"}, [], "HOST='no-such-host.invalid'"),
    ({}, ["--host", "no-such-host.invalid"], "--host='no-such-host.invalid'"),
]


def assert_one_line_refusal(done, named: str) -> str:
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("queen-trio: configuration error: ")
    assert named in lines[0]
    return lines[0]


@pytest.mark.parametrize(("env", "args", "named"), REFUSALS)
async def test_a_configuration_that_cannot_work_exits_2_naming_it(tmp_path, env, args, named):
    data_dir = tmp_path / "data"
    done = await refused_start({"QUEEN_DATA_DIR": str(data_dir), **env}, args)
    line = assert_one_line_refusal(done, named)
    assert "secret" not in line  # a URL's password is never repeated
    # Refused before the cluster: none was started, none is running.
    assert not (data_dir / "pgdata").exists()
    assert EmbeddedPostgres(data_dir).postmaster() is None


async def test_a_port_in_use_is_refused_before_the_cluster_starts(tmp_path, workers):
    data_dir = tmp_path / "data"
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        done = await refused_start({"QUEEN_DATA_DIR": str(data_dir), "PORT": str(port),
                                    "HOST": "127.0.0.1"}, workers=workers)
    line = assert_one_line_refusal(done, f"PORT={port}")
    assert f"127.0.0.1:{port}" in line and "HOST='127.0.0.1'" in line
    assert not (data_dir / "pgdata").exists()


async def test_a_second_broker_on_a_data_directory_in_use_is_refused(cluster_path, workers):
    data_dir = cluster_path
    async with running_broker(args=["--data-dir", str(data_dir)], workers=workers) as first:
        cluster = EmbeddedPostgres(data_dir).postmaster()
        assert cluster is not None
        done = await refused_start({"QUEEN_DATA_DIR": str(data_dir)},
                                   ["--port", str(free_port()), "--host", "127.0.0.1"])
        line = assert_one_line_refusal(
            done, f"a broker is already running on this data directory (pid {first.proc.pid})")
        assert "FILE_BUFFER_DIR" not in line
        # The first broker's cluster was neither adopted nor restarted.
        assert EmbeddedPostgres(data_dir).postmaster() == cluster
