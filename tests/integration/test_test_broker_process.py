"""TestBroker: a broker in a process of its own, for synchronous tests. Closing it (or
killing its process) leaves nothing running and no data directory behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from queen_trio.testing import BrokerHost, TestBroker, TestBrokerError
from tests.support.leftovers import is_running, processes_mentioning


def push_and_pop(url: str, queue: str) -> list[object]:
    r = httpx.post(f"{url}/api/v1/push", json={"items": [{"queue": queue, "payload": {"n": 1}}]})
    assert r.status_code == 201, r.text
    r = httpx.get(f"{url}/api/v1/pop/queue/{queue}", params={"batch": "10"})
    return [m["data"] for m in r.json()["messages"]] if r.status_code == 200 else []


def test_an_embedded_test_broker_serves_resets_and_leaves_nothing_behind() -> None:
    with TestBroker(encryption=True) as broker:
        host = broker.host
        assert host is not None and host.embedded and host.data_root is not None
        data_root, pid = host.data_root, host.pid
        assert broker.url == f"http://127.0.0.1:{broker.settings.port}"
        assert broker.settings.encryption_key is not None
        assert processes_mentioning(str(data_root)), "the cluster runs in the data directory"
        r = httpx.post(f"{broker.url}/api/v1/configure", json={
            "queue": "secret", "options": {"encryptionEnabled": True}})
        assert r.json()["options"]["encryptionEnabled"] is True
        assert push_and_pop(broker.url, "secret") == [{"n": 1}]
        httpx.post(f"{broker.url}/api/v1/push", json={"items": [{"queue": "q", "payload": 1}]})
        broker.reset()
        assert httpx.get(f"{broker.url}/api/v1/pop/queue/q").status_code == 204
    assert pid is not None and not is_running(pid)
    assert processes_mentioning(str(data_root)) == []
    assert not data_root.exists()
    with pytest.raises(TestBrokerError, match="not started"):
        _ = broker.url


def test_on_a_given_server_each_broker_has_a_database_of_its_own(admin_url: str) -> None:
    with BrokerHost(database_url=admin_url) as host:
        assert not host.embedded
        one, two = host.open_broker(), host.open_broker(default_batch_size=3)
        try:
            assert one.settings.database_url != two.settings.database_url
            assert push_and_pop(one.url, "q") == [{"n": 1}]
            assert httpx.get(f"{two.url}/api/v1/pop/queue/q").status_code == 204
        finally:
            one.close()
        # The host stays up for the others; a setting out of its range is refused in the test
        # process, in the broker's words, and the host still serves the broker it has.
        assert push_and_pop(two.url, "q") == [{"n": 1}]
        with pytest.raises(ValueError, match="DB_POOL_SIZE must be at least 2"):
            host.open_broker(db_pool_size=1)
        assert httpx.get(f"{two.url}/api/v1/pop/queue/q").status_code == 204
        data_root = host.data_root
    assert data_root is not None and not data_root.exists()


def test_a_killed_host_process_leaves_no_cluster_running() -> None:
    host = BrokerHost().start()
    data_root, pid = host.data_root, host.pid
    assert data_root is not None and pid is not None
    broker = host.open_broker()
    assert push_and_pop(broker.url, "q") == [{"n": 1}]
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(TestBrokerError, match="gone"):
        broker.reset()
    host.close()
    deadline = time.monotonic() + 10
    while processes_mentioning(str(data_root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(str(data_root)) == []
    assert not data_root.exists()


def test_keep_data_leaves_the_data_directory_for_a_look() -> None:
    with TestBroker(keep_data=True) as broker:
        assert broker.host is not None
        data_root = broker.host.data_root
    assert data_root is not None
    try:
        assert (data_root / "cluster" / "pgdata" / "PG_VERSION").exists()
        assert processes_mentioning(str(data_root)) == []
    finally:
        import shutil

        shutil.rmtree(data_root)


def test_importing_trio_asyncio_would_change_asyncio_run_in_the_test_process() -> None:
    """Why TestBroker runs its broker in a process of its own and not in a thread: the
    broker needs trio-asyncio, and importing it changes the loop asyncio.run() uses."""
    probe = ("import asyncio, sys\n"
             "async def kind(): return type(asyncio.get_running_loop()).__name__\n"
             "before = asyncio.run(kind())\n"
             "import trio_asyncio\n"
             "print(before, asyncio.run(kind()))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] != out[1] and out[1] == "SyncTrioEventLoop"
