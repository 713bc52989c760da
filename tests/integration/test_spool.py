"""The spool (docs/decisions.md#spool): outages, crashes, encryption, idempotent replay, failed/."""

from __future__ import annotations

import shutil
import signal

import httpx
import pytest
import trio

from queen_trio.broker import open_broker
from queen_trio.storage.encryption import PayloadCipher
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.clusters import running_cluster
from tests.support.db import db_execute
from tests.support.processes import broker_process
from tests.support.storage import stored_at

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


@pytest.fixture
def private_postgres(cluster_path):
    """A PostgreSQL of the test's own, which the test may stop and start."""
    with running_cluster(cluster_path) as server:
        yield server


async def stop(server):
    await trio.to_thread.run_sync(lambda: server.stop(mode="immediate"))


async def start(server):
    await trio.to_thread.run_sync(server.start)


async def wait_drained(client):
    with trio.fail_after(60):
        while True:
            status = (await client.get("/api/v1/status/buffers")).json()
            if status["pending"] == 0 and status["dbHealthy"]:
                return status
            await trio.sleep(0.1)


async def test_outage_in_a_stream_of_pushes_loses_and_duplicates_nothing(private_postgres):
    url = private_postgres.url()
    answered: dict[str, list[str]] = {f"p{n}": [] for n in range(3)}
    statuses: set[str] = set()
    async with open_broker(make_settings(url), url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            stop_producing = trio.Event()

            async def producer(partition):
                n = 0
                while not stop_producing.is_set():
                    txid = f"{partition}-{n}"
                    r = await client.post("/api/v1/push", json={"items": [
                        {"queue": "stream", "partition": partition, "transactionId": txid,
                         "payload": {"n": n}}]})
                    if r.status_code == 201:
                        status = r.json()[0]["status"]
                        assert status in ("queued", "buffered"), r.text
                        statuses.add(status)
                        answered[partition].append(txid)
                        n += 1
                    await trio.sleep(0.005)

            async with trio.open_nursery() as nursery:
                for partition in answered:
                    nursery.start_soon(producer, partition)
                await trio.sleep(0.5)
                await stop(private_postgres)  # the outage, mid-stream
                await trio.sleep(1.0)
                await start(private_postgres)
                await trio.sleep(0.5)
                stop_producing.set()
            assert statuses == {"queued", "buffered"}
            await wait_drained(client)
    rows = await stored_at(url, "stream")
    for partition, txids in answered.items():
        landed = [txid for name, txid, _, _ in rows if name == partition]
        assert landed == txids, f"{partition}: every answered item once, in order"


async def test_sigkill_while_spooled_then_replay_on_restart(private_postgres, tmp_path, workers):
    url = private_postgres.url()
    spool_dir = tmp_path / "spool"
    env = {"DATABASE_URL": url, "FILE_BUFFER_DIR": str(spool_dir)}
    async with broker_process(env, workers=workers) as (base, proc):
        async with httpx.AsyncClient(base_url=base) as client:
            await client.post("/api/v1/push", json={"items": [{"queue": "k", "payload": 0,
                                                               "transactionId": "before"}]})
            await stop(private_postgres)
            buffered = []
            for n in range(20):
                r = await client.post("/api/v1/push", json={"items": [
                    {"queue": "k", "partition": "Default", "payload": n,
                     "transactionId": f"t-{n}"}]})
                assert r.status_code == 201 and r.json()[0]["status"] == "buffered"
                buffered.append(f"t-{n}")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    await start(private_postgres)
    async with broker_process(env, workers=workers) as (base, _):
        async with httpx.AsyncClient(base_url=base) as client:
            await wait_drained(client)
    assert [txid for _, txid, _, _ in await stored_at(url, "k")] == ["before", *buffered]


async def test_encrypted_queue_survives_replay_and_boot_with_the_database_down(
        private_postgres, tmp_path):
    url = private_postgres.url()
    cipher = PayloadCipher(KEY)
    settings = make_settings(url, encryption_key=KEY, spool_dir=tmp_path / "spool")
    async with open_broker(settings, url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            await client.post("/api/v1/configure", json={"queue": "vault", "options": {
                "encryptionEnabled": True}})
            await stop(private_postgres)
            # Known config: spooled already encrypted.
            r = await client.post("/api/v1/push", content=b'{"items":[{"queue":"vault",'
                                  b'"transactionId":"known","payload":{"pin":1.50}}]}')
            assert r.json()[0]["status"] == "buffered"
    # A broker that boots with the database down does not know the queue: plaintext, marked.
    restarted = make_settings(url, encryption_key=KEY, spool_dir=tmp_path / "spool")
    async with open_broker(restarted, url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            assert (await client.get("/health")).status_code == 503
            r = await client.post("/api/v1/push", content=b'{"items":[{"queue":"vault",'
                                  b'"transactionId":"unknown","payload":{"pin":2}}]}')
            assert r.json()[0]["status"] == "buffered"
            await start(private_postgres)
            await wait_drained(client)
            r = await client.get("/api/v1/pop/queue/vault", params={"batch": "5"})
            assert [m["data"] for m in r.json()["messages"]] == [{"pin": 1.5}, {"pin": 2}]
            assert b'{"pin":1.50}' in r.content
    rows = await stored_at(url, "vault")
    assert [(txid, encrypted) for _, txid, encrypted, _ in rows] == [
        ("known", True), ("unknown", True)]
    # Encrypted exactly once: one decryption gives the plaintext.
    assert [cipher.decrypt(payload) for *_, payload in rows] == [b'{"pin":1.50}', b'{"pin":2}']


async def test_replay_is_idempotent_whatever_the_dedup_window(private_postgres, tmp_path):
    url = private_postgres.url()
    spool_dir = tmp_path / "spool"
    async with open_broker(make_settings(url, spool_dir=spool_dir), url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            await client.post("/api/v1/configure", json={"queue": "nodedup", "options": {
                "dedupWindowSeconds": 0}})
            await stop(private_postgres)
            for n in range(3):
                await client.post("/api/v1/push", json={"items": [
                    {"queue": "nodedup", "transactionId": "same", "payload": n}]})
            kept = tmp_path / "copy"
            shutil.copytree(spool_dir, kept, ignore=shutil.ignore_patterns(".lock"))
            await start(private_postgres)
            await wait_drained(client)
    # A crash between commit and file deletion: the same file is there at the next boot.
    for path in kept.glob("spool-*.log"):
        shutil.copy(path, spool_dir / path.name)
    async with open_broker(make_settings(url, spool_dir=spool_dir), url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            await wait_drained(client)
    assert [payload for *_, payload in await stored_at(url, "nodedup")] == [b"0", b"1", b"2"]


async def test_a_record_that_can_never_land_goes_to_failed(private_postgres, tmp_path):
    from tests.support.storage import POISON_TRIGGER

    url = private_postgres.url()
    spool_dir = tmp_path / "spool"
    async with open_broker(make_settings(url, spool_dir=spool_dir), url) as broker:
        await db_execute(broker.db, POISON_TRIGGER)
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            await stop(private_postgres)
            for partition in ("poison", "fine"):
                r = await client.post("/api/v1/push", json={"items": [
                    {"queue": "f", "partition": partition, "payload": 1}]})
                assert r.json()[0]["status"] == "buffered"
            await start(private_postgres)
            status = await wait_drained(client)
            assert status["failed"] == 1
    assert [name for name, *_ in await stored_at(url, "f")] == ["fine"]
    reasons = list((spool_dir / "failed").glob("*.reason"))
    assert len(reasons) == 1 and "poisoned partition" in reasons[0].read_text()
