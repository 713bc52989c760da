"""A supervisor and its workers (`serve --workers 2`): restarts, shutdown, boot failures, and
what stays true when a producer talks to one worker and a consumer to another."""

from __future__ import annotations

import json
import os
import signal

import httpx
import pytest
import trio

from queen_trio.storage.embedded import EmbeddedPostgres
from tests.support.consuming import ack, configure, data, pop, push
from tests.support.outage import database_cut_off
from tests.support.processes import free_port, is_alive, refused_start, running_broker
from tests.support.storage import stored_at


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


async def wait_drained(urls: list[str]) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        with trio.fail_after(60):
            for url in urls:
                while True:
                    status = (await client.get(url + "/api/v1/status/buffers")).json()
                    if status["pending"] == 0 and status["dbHealthy"]:
                        break
                    await trio.sleep(0.1)


# httpx leaves a request-body generator unclosed when the server goes away mid-request.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_worker_killed_mid_load_is_restarted_and_loses_nothing_it_answered(
        admin_url, database_url):
    answered: list[str] = []
    buffered = 0
    async with running_broker({"DATABASE_URL": database_url}, workers=2) as server:
        stop = trio.Event()

        async def producer(p: int) -> None:
            nonlocal buffered
            n = 0
            while not stop.is_set():
                txid = f"{p}-{n}"
                n += 1
                try:  # a fresh connection per request: any worker may take it
                    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                        r = await client.post("/api/v1/push", json={"items": [
                            {"queue": "load", "partition": f"p{p}", "transactionId": txid,
                             "payload": n}]})
                except httpx.TransportError:
                    continue  # not answered: the killed worker had it
                if r.status_code == 201:
                    status = r.json()[0]["status"]
                    assert status in ("queued", "buffered"), r.text
                    buffered += status == "buffered"
                    answered.append(txid)

        async def until(condition) -> None:  # type: ignore[no-untyped-def]
            with trio.fail_after(60):
                while not condition():
                    await trio.sleep(0.02)

        async with trio.open_nursery() as nursery:
            for p in range(4):
                nursery.start_soon(producer, p)
            await until(lambda: len(answered) >= 40)
            async with database_cut_off(admin_url, database_url):
                await until(lambda: buffered >= 20)  # both workers spool now
                victim = server.worker_pids()[0]
                os.kill(victim, signal.SIGKILL)
                await until(lambda: len(set(server.worker_pids()) - {victim}) == 2)
                mark = len(answered)
                await until(lambda: len(answered) >= mark + 20)
            mark = len(answered)
            await until(lambda: len(answered) >= mark + 20)
            stop.set()
        await wait_drained(server.worker_urls)
        out = server.output()
    stored = [txid for _, txid, _, _ in await stored_at(database_url, "load")]
    assert set(answered) <= set(stored), "every answered push is stored"
    assert len(stored) == len(set(stored)), "and stored once"
    died = [line for line in json_lines(out) if line["msg"] == "worker died; restarting"]
    assert [(line["pid"], line["status"]) for line in died] == [(victim, "killed by SIGKILL")]
    assert any(line["msg"] == "worker restarted" for line in json_lines(out))


# httpx leaves a request-body generator unclosed when the server goes away mid-request.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_an_outage_keeps_each_partitions_order_across_workers(admin_url, database_url):
    """Each producer sends its next push only once the last was answered, each on a fresh
    connection, so consecutive pushes land on either worker: one may have spooled the last
    while the other would commit the next at once, were the partition not marked held."""
    answered: dict[str, list[str]] = {f"p{n}": [] for n in range(4)}
    statuses: set[str] = set()
    async with running_broker({"DATABASE_URL": database_url}, workers=2) as server:
        stop = trio.Event()

        async def producer(partition: str) -> None:
            n = 0
            while not stop.is_set():
                txid = f"{partition}-{n}"
                async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                    r = await client.post("/api/v1/push", json={"items": [
                        {"queue": "stream", "partition": partition, "transactionId": txid,
                         "payload": n}]})
                assert r.status_code == 201, r.text
                statuses.add(r.json()[0]["status"])
                answered[partition].append(txid)
                n += 1

        async def until(condition) -> None:  # type: ignore[no-untyped-def]
            with trio.fail_after(60):
                while not condition():
                    await trio.sleep(0.02)

        count = lambda: sum(len(v) for v in answered.values())  # noqa: E731
        async with trio.open_nursery() as nursery:
            for partition in answered:
                nursery.start_soon(producer, partition)
            await until(lambda: count() >= 20)
            async with database_cut_off(admin_url, database_url):
                mark = count()
                await until(lambda: count() >= mark + 40)
            mark = count()
            await until(lambda: count() >= mark + 40)  # replaying, and after
            stop.set()
        await wait_drained(server.worker_urls)
    assert statuses == {"queued", "buffered"}
    rows = await stored_at(database_url, "stream")
    for partition, txids in answered.items():
        assert [txid for name, txid, _, _ in rows if name == partition] == txids, partition


async def test_sigterm_drains_every_worker_then_stops_the_cluster_leaving_no_process(
        cluster_path):
    data_dir = cluster_path
    async with running_broker(args=["--data-dir", str(data_dir)], workers=2) as server:
        workers = server.worker_pids()
        cluster = EmbeddedPostgres(data_dir).postmaster()
        assert len(workers) == 2 and cluster is not None
        server.proc.send_signal(signal.SIGTERM)
        assert await server.wait_exit() == 0
        lines = json_lines(server.output())
    assert not [pid for pid in [*workers, cluster.pid] if is_alive(pid)]
    assert EmbeddedPostgres(data_dir).postmaster() is None
    stopped = [n for n, line in enumerate(lines) if line["msg"] == "queen-trio stopped"]
    # Both workers stopped before the supervisor, which stopped the cluster last.
    assert [lines[n].get("worker") for n in stopped] in ([1, 2, None], [2, 1, None])


async def test_workers_stop_when_their_supervisor_is_killed(database_url):
    async with running_broker({"DATABASE_URL": database_url}, workers=2) as server:
        workers = server.worker_pids()
        server.proc.kill()
        server.proc.wait()
        with trio.fail_after(30):  # a liveness bound, not a measurement (bench/ times it)
            while [pid for pid in workers if is_alive(pid)]:
                await trio.sleep(0.02)
        await server.wait_for_output("queen-trio worker: the supervisor is gone; stopping")


async def test_a_worker_that_cannot_boot_stops_the_supervisor_with_its_error():
    done = await refused_start({}, ["--app", "tests.support.no_such_module:app",
                                    "--port", str(free_port()), "--host", "127.0.0.1"],
                               workers=2)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert ": configuration error: --app 'tests.support.no_such_module:app' cannot be loaded" in (
        err)
    assert "queen-trio worker 1: " in err or "queen-trio worker 2: " in err
    assert "Traceback" not in err


async def test_a_worker_that_keeps_crashing_at_boot_stops_the_supervisor(tmp_path):
    crash_file = tmp_path / "crash"
    env = {"QUEEN_TEST_CRASH_FILE": str(crash_file)}
    async with running_broker(env, ["--app", "tests.support.crashing_app:app"],
                              workers=2) as server:
        async with httpx.AsyncClient() as client:
            assert (await client.get(server.worker_urls[0] + "/")).text == "ok"
        crash_file.touch()  # from now on a worker fails at import
        os.kill(server.worker_pids()[0], signal.SIGKILL)
        assert await server.wait_exit() == 1  # the crashing worker's status
        out = server.output()
    assert "RuntimeError: told to crash at boot" in out
    (fatal,) = [line for line in json_lines(out) if line["msg"] == "worker failed at boot; stopping"]
    assert fatal["boot_failures"] == 5
    assert "Traceback" not in out


async def test_a_producer_on_one_worker_and_a_consumer_on_another(database_url):
    # The waiting worker re-checks every 20 s: only another worker's NOTIFY wakes it in time.
    env = {"DATABASE_URL": database_url, "POP_WAIT_INITIAL_INTERVAL_MS": "20000",
           "POP_WAIT_MAX_INTERVAL_MS": "20000"}
    async with running_broker(env, workers=2) as server:
        one, two = server.worker_urls
        async with httpx.AsyncClient(base_url=one, timeout=60) as first, \
                httpx.AsyncClient(base_url=two, timeout=60) as second:
            # Order: consecutive pushes to one partition alternate between the workers.
            for n in range(10):
                await push(first if n % 2 else second, "x", n, partition="p", txids=[f"t{n}"])
            # Dedup: each transaction id again, through the other worker.
            for n in range(10):
                (again,) = await push(second if n % 2 else first, "x", n, partition="p",
                                      txids=[f"t{n}"])
                assert again["status"] == "duplicate"
            reply = await pop(second, "x", partition="p", batch=20)
            assert data(reply) == list(range(10))
            # Leases: the partition is leased through worker 2, so worker 1 finds nothing,
            # and worker 1 acks what worker 2 handed out.
            assert await pop(first, "x", partition="p") is None
            for message in reply["messages"]:
                assert (await ack(first, message))["success"] is True

            # maxSize counts what every worker stored.
            await configure(first, "small", maxSize=3)
            await push(first, "small", 1, 2)
            await push(second, "small", 3)
            r = await first.post("/api/v1/push", json={"items": [{"queue": "small",
                                                                  "payload": 4}]})
            assert r.status_code == 429 and r.json()[0]["error"] == "queue full"

            # Wake-ups: a long poll parked on worker 2, a push on worker 1.
            await configure(second, "wake")
            result: dict = {}

            async def waiter() -> None:
                result["reply"] = await pop(second, "wake", wait=True, timeout=30_000)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)
                await trio.sleep(0.5)  # parked (nothing to take yet)
                assert "reply" not in result
                await push(first, "wake", "from-worker-1")
                with trio.fail_after(15):
                    while "reply" not in result:
                        await trio.sleep(0.01)
            assert data(result["reply"]) == ["from-worker-1"]


async def test_two_brokers_on_one_database_with_producers_and_consumers_on_both(
        database_url, workers):
    """Scaling out: two brokers (each with its workers) share one PostgreSQL; producers and
    consumers use both. Nothing is lost, duplicated or misordered."""
    env = {"DATABASE_URL": database_url}
    partitions, per_partition = 4, 30
    received: dict[str, list[int]] = {f"p{n}": [] for n in range(partitions)}
    async with running_broker(env, workers=workers) as a, \
            running_broker(env, workers=workers) as b:
        urls = [a.url, b.url]
        async with httpx.AsyncClient(timeout=60) as client:
            await client.post(urls[0] + "/api/v1/configure", json={"queue": "spread"})

            async def producer(n: int) -> None:
                for seq in range(per_partition):  # each push through the other broker
                    r = await client.post(urls[seq % 2] + "/api/v1/push", json={"items": [
                        {"queue": "spread", "partition": f"p{n}", "transactionId": f"{n}-{seq}",
                         "payload": seq}]})
                    assert r.status_code == 201 and r.json()[0]["status"] == "queued", r.text

            async def consumer(url: str) -> None:
                while sum(map(len, received.values())) < partitions * per_partition:
                    reply = await pop(client_for[url], "spread", batch=5, wait=True,
                                      timeout=1000)
                    if reply is None:
                        continue
                    received[reply["partition"]].extend(data(reply))
                    for message in reply["messages"]:
                        assert (await ack(client_for[url], message))["success"] is True

            async with httpx.AsyncClient(base_url=urls[0], timeout=60) as on_a, \
                    httpx.AsyncClient(base_url=urls[1], timeout=60) as on_b:
                client_for = {urls[0]: on_a, urls[1]: on_b}
                with trio.fail_after(120):
                    async with trio.open_nursery() as nursery:
                        for n in range(partitions):
                            nursery.start_soon(producer, n)
                        for url in (*urls, *urls):
                            nursery.start_soon(consumer, url)
    for partition, seqs in received.items():
        assert seqs == list(range(per_partition)), partition
