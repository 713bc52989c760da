"""Stopping is quick and quiet: long polls answer 204, a second signal exits at once in one line,
an orphaned cluster is adopted, restarted with this broker's options and stopped."""

from __future__ import annotations

import signal
import socket

import asyncpg
import httpx
import pytest
import trio

from queen_trio.storage.embedded import EmbeddedPostgres
from tests.support.db import query_once as ask
from tests.support.processes import running_broker

# What an earlier queen-trio left in pg_hba.conf: initdb --auth=trust.
TRUST_HBA = "local all all trust\nhost all all 127.0.0.1/32 trust\n"


async def wait_parked(broker, count: int) -> None:
    while broker.consumer.statistics().parked < count:
        await trio.sleep(0.01)


async def test_stopping_answers_parked_long_polls_204_and_parks_no_new_one(broker, client):
    r = await client.post("/api/v1/configure", json={"queue": "idle"})
    assert r.status_code == 200
    replies: list[httpx.Response] = []

    async def long_poll() -> None:
        replies.append(await client.get("/api/v1/pop/queue/idle",
                                        params={"wait": "true", "timeout": "3600000"}))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(long_poll)
        await wait_parked(broker, 3)
        broker.consumer.stop_waiting()
    assert [r.status_code for r in replies] == [204, 204, 204]
    # A long poll that arrives during shutdown does not park either; a plain pop still pops.
    await client.post("/api/v1/push", json={"items": [{"queue": "idle", "payload": 1}]})
    late = await client.get("/api/v1/pop/queue/idle", params={"wait": "true",
                                                               "timeout": "3600000"})
    assert late.status_code == 204
    plain = await client.get("/api/v1/pop/queue/idle")
    assert plain.status_code == 200 and plain.json()["messages"][0]["data"] == 1


async def long_poll_through_sigterm(client: httpx.AsyncClient, server, queue: str
                                    ) -> httpx.Response:
    """A long poll on an empty queue, parked, then the broker SIGTERMed: its answer."""
    reply: list[httpx.Response] = []

    async def long_poll() -> None:
        reply.append(await client.get(f"/api/v1/pop/queue/{queue}",
                                      params={"wait": "true", "timeout": "60000"}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(long_poll)
        await trio.sleep(0.5)  # let it park (nothing is pushed, so it stays parked)
        server.proc.send_signal(signal.SIGTERM)
    return reply[0]


async def test_sigterm_answers_a_parked_long_poll_204_and_exits_0(database_url, workers):
    async with running_broker({"DATABASE_URL": database_url}, workers=workers) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            await client.post("/api/v1/configure", json={"queue": "parked"})
            reply = await long_poll_through_sigterm(client, server, "parked")
        assert reply.status_code == 204
        assert await server.wait_exit() == 0
        out = server.output()
        assert "Traceback" not in out
        assert '"msg":"queen-trio stopped"' in out


async def finished_keep_alive_connection(url: str) -> trio.SocketStream:
    """A connection whose one request is answered, kept open (idle) by its client."""
    host, port = url.removeprefix("http://").split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += await stream.receive_some(65536)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += await stream.receive_some(65536)
    return stream


async def hang_up_mid_request(url: str, request: bytes) -> None:
    """A client that sends `request` and hangs up before its answer."""
    host, port = url.removeprefix("http://").split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(request)
    await trio.sleep(0.2)  # let the broker start on it
    await stream.aclose()


async def test_a_stop_waits_for_no_connection_that_nobody_is_on(database_url, workers):
    """The graceful deadline is for requests in flight. An idle keep-alive connection is closed
    at once, a connection whose client hung up mid-request counts for nothing, a parked long
    poll is answered 204: the broker exits long before its deadline (30 s here) and says
    nothing was still running at it."""
    env = {"DATABASE_URL": database_url, "QUEEN_GRACEFUL_TIMEOUT_MS": "30000"}
    async with running_broker(env, workers=workers) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            await client.post("/api/v1/configure", json={"queue": "left"})
            async with trio.open_nursery() as nursery:
                for _ in range(4):  # long polls and pushes whose body never comes, abandoned
                    nursery.start_soon(hang_up_mid_request, server.url,
                                       b"GET /api/v1/pop/queue/left?wait=true&timeout=60000 "
                                       b"HTTP/1.1\r\nHost: x\r\n\r\n")
                    nursery.start_soon(hang_up_mid_request, server.url,
                                       b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\n"
                                       b"Content-Type: application/json\r\n"
                                       b"Content-Length: 1000\r\n\r\n{\"items\": [")
            # One more request on a fresh connection, which the client closes at once.
            async with httpx.AsyncClient(base_url=server.url) as once:
                assert (await once.get("/health")).status_code == 200
            async with await finished_keep_alive_connection(server.url) as idle:
                reply = await long_poll_through_sigterm(client, server, "left")
                assert reply.status_code == 204
                # Half the deadline: a stop that waited for any of those connections takes
                # all of it.
                assert await server.wait_exit(within=15) == 0
                assert await idle.receive_some(65536) == b""  # closed by the broker
    out = server.output()
    assert "Traceback" not in out
    assert "at the graceful deadline" not in out
    assert '"msg":"queen-trio stopped"' in out


async def test_a_stop_waits_for_no_silent_peer_port_connection(database_url):
    """A connection to the peer listener that never sends a byte (or stops partway through
    the peer channel's opening) is closed at a stop like an idle keep-alive one: the broker
    exits long before its graceful deadline (30 s here), where before it waited for the
    keep-alive timeout of the connection's first read (75 s), cut off at the deadline."""
    env = {"DATABASE_URL": database_url, "QUEEN_GRACEFUL_TIMEOUT_MS": "30000"}
    async with running_broker(env) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            address = (await client.get("/api/v1/ephemeral/queues")).json()["ownerAddress"]
        host, _, port = address.rpartition(":")
        silent = await trio.open_tcp_stream(host.strip("[]"), int(port))
        partway = await trio.open_tcp_stream(host.strip("[]"), int(port))
        await partway.send_all(b"QUEEN-TRIO")  # the first bytes of the channel's MAGIC
        await trio.sleep(0.2)  # both accepted, and waiting in the broker for their first bytes
        server.proc.send_signal(signal.SIGTERM)
        # Half the deadline: a stop that waited for either connection takes all of it.
        assert await server.wait_exit(within=15) == 0
        assert await silent.receive_some(65536) == b""  # closed by the broker
        assert await partway.receive_some(65536) == b""
        await silent.aclose()
        await partway.aclose()
    out = server.output()
    assert "Traceback" not in out
    assert "at the graceful deadline" not in out


def hold_a_request_open(url: str) -> socket.socket:
    """A push whose body never finishes arriving: an in-flight request that keeps the broker
    in its graceful shutdown, so that a second signal finds it there."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{\"items\": [")
    return sock


async def signal_twice(server, signum: int) -> str:
    """The first signal, then (while a held request keeps the broker in its graceful
    shutdown) the second: the exit status must be 128 + signum; the output is returned."""
    held = hold_a_request_open(server.url)
    try:
        server.proc.send_signal(signum)
        await server.wait_for_output('"msg":"shutting down"')
        server.proc.send_signal(signum)
        assert await server.wait_exit() == 128 + signum
    finally:
        held.close()
    out = server.output()
    assert "Traceback" not in out
    return out


async def test_a_second_sigint_exits_130_leaving_the_cluster_for_the_next_start_to_adopt(
        cluster_path, workers):
    data_dir = cluster_path
    cluster = EmbeddedPostgres(data_dir)
    async with running_broker(args=["--data-dir", str(data_dir)], workers=workers) as first:
        out = await signal_twice(first, signal.SIGINT)
    orphan = cluster.postmaster()
    assert orphan is not None
    last = out.strip().splitlines()[-1]
    assert last == (f"queen-trio: second SIGINT: exiting now; the embedded PostgreSQL (pid "
                    f"{orphan.pid}) was left running for the next start to adopt")

    # Loosen the orphan as an earlier version would have left it: trust, no password.
    password = cluster.password_file.read_text().strip()
    (cluster.pgdata / "pg_hba.conf").write_text(TRUST_HBA)
    admin = f"postgresql://postgres:{password}@127.0.0.1:{orphan.port}/postgres"
    assert await trio.to_thread.run_sync(ask, admin, "SELECT pg_reload_conf()") is True
    passwordless = f"postgresql://postgres@127.0.0.1:{orphan.port}/postgres"
    assert await trio.to_thread.run_sync(ask, passwordless, "SELECT 1") == 1

    async with running_broker(args=["--data-dir", str(data_dir)], workers=workers) as second:
        adopted = cluster.postmaster()
        assert adopted is not None and adopted.pid != orphan.pid  # restarted ...
        assert adopted.port == orphan.port  # ... on its port
        assert "adopted the embedded PostgreSQL left running by an earlier broker" in (
            second.output())
        # ... with this broker's options: the door is locked again.
        with pytest.raises(asyncpg.InvalidPasswordError):
            await trio.to_thread.run_sync(ask, passwordless, "SELECT 1")
        second.proc.send_signal(signal.SIGTERM)
        assert await second.wait_exit() == 0
    assert cluster.postmaster() is None  # and stopped at a clean shutdown


async def test_a_second_sigterm_exits_143_in_one_line(database_url, workers):
    async with running_broker({"DATABASE_URL": database_url}, workers=workers) as server:
        out = await signal_twice(server, signal.SIGTERM)
    assert out.strip().splitlines()[-1] == (
        "queen-trio: second SIGTERM: exiting now; no embedded PostgreSQL was running")


async def test_a_sigkilled_brokers_cluster_is_named_by_status_and_adopted_at_the_next_start(
        cluster_path):
    """Issue 25, point 12: SIGKILL leaves the embedded PostgreSQL running (its own session);
    `queen-trio status` says so while no broker answers, and the next start adopts it."""
    from tests.support.cli import cli_env, run_cli

    data_dir = cluster_path
    cluster = EmbeddedPostgres(data_dir)
    async with running_broker(args=["--data-dir", str(data_dir)]) as first:
        url = first.url
        first.proc.kill()
        assert await first.wait_exit() == -signal.SIGKILL
    orphan = cluster.postmaster()
    assert orphan is not None
    said = await run_cli("status", "--server", url, env=cli_env(QUEEN_DATA_DIR=str(data_dir)))
    assert said.status == 6
    assert (f"the embedded PostgreSQL of {data_dir} (pid {orphan.pid}, port {orphan.port}) is "
            "running without its broker, which did not stop cleanly: `queen-trio serve` adopts "
            "it") in said.err
    async with running_broker(args=["--data-dir", str(data_dir)]) as second:
        assert ("adopted the embedded PostgreSQL left running by an earlier broker that did not "
                "stop cleanly") in second.output()
        # A broker holds the directory now: status names no leftover.
        quiet = await run_cli("status", "--server", "http://127.0.0.1:9",
                              env=cli_env(QUEEN_DATA_DIR=str(data_dir)))
        assert quiet.status == 6 and "without its broker" not in quiet.err
    assert cluster.postmaster() is None
