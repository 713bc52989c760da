"""Encryption at rest: AES-256-GCM with a good key; plaintext and one warning with a bad one."""

from __future__ import annotations

import logging

import httpx
import pytest

from queen_trio.broker import open_broker
from queen_trio.storage.encryption import PayloadCipher
from queen_trio.web.routes import create_app
from tests.support.brokers import make_settings
from tests.support.storage import stored_messages

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
OTHER_KEY = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
PAYLOAD = b'{"card":"4111-1111-1111-1111","amount":1.50}'


async def push_secret(settings, url, queue="vault"):
    async with open_broker(settings, url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            r = await client.post("/api/v1/configure", json={
                "queue": queue, "options": {"encryptionEnabled": True}})
            assert r.status_code == 200
            r = await client.post("/api/v1/push", content=b'{"items":[{"queue":"%s","payload":%s}]}'
                                  % (queue.encode(), PAYLOAD))
            assert r.status_code == 201, r.text
        return await stored_messages(broker.db, queue)


async def test_good_key_stores_ciphertext(database_url):
    stored = await push_secret(make_settings(database_url, encryption_key=KEY), database_url)
    (message,) = stored
    assert message.frame.encrypted is True
    assert PAYLOAD not in message.frame.payload
    assert b"4111" not in message.frame.payload
    assert PayloadCipher(KEY).decrypt(message.frame.payload) == PAYLOAD


@pytest.mark.parametrize("bad_key", ["abc", "zz" * 32, KEY[:-2], KEY + "00"])
async def test_bad_key_stores_plaintext_with_one_warning(database_url, caplog, bad_key):
    caplog.set_level(logging.WARNING)
    settings = make_settings(database_url, encryption_key=bad_key)
    stored = await push_secret(settings, database_url)
    assert [m.frame.payload for m in stored] == [PAYLOAD]
    assert stored[0].frame.encrypted is False
    boot = [r for r in caplog.records if "encryption at rest disabled" in r.getMessage()]
    assert len(boot) == 1


async def test_queue_encrypted_by_another_broker_is_repacked(database_url):
    """Broker B believes the queue is plaintext; broker A turns encryption on meanwhile."""
    settings = make_settings(database_url, encryption_key=KEY)
    other = make_settings(database_url, encryption_key=KEY)  # its own spool directory
    async with open_broker(settings, database_url) as a, open_broker(other, database_url) as b:
        ca = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(a)), base_url="http://a")
        cb = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(b)), base_url="http://b")
        async with ca, cb:
            r = await cb.post("/api/v1/push", json={"items": [{"queue": "late", "payload": 1}]})
            assert r.status_code == 201
            await ca.post("/api/v1/configure", json={"queue": "late",
                                                     "options": {"encryptionEnabled": True}})
            r = await cb.post("/api/v1/push", content=b'{"items":[{"queue":"late","payload":%s}]}'
                              % PAYLOAD)
            assert r.status_code == 201
        stored = await stored_messages(a.db, "late")
    assert [m.frame.encrypted for m in stored] == [False, True]
    assert PayloadCipher(KEY).decrypt(stored[1].frame.payload) == PAYLOAD


@pytest.mark.parametrize("key", [None, "abc"])
async def test_configure_warns_when_encryption_is_asked_but_the_key_is_unusable(database_url,
                                                                                key):
    async with open_broker(make_settings(database_url, encryption_key=key), database_url) as b:
        transport = httpx.ASGITransport(app=create_app(b))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            asked = await client.post("/api/v1/configure", json={
                "queue": "wants-secrecy", "options": {"encryptionEnabled": True}})
            plain = await client.post("/api/v1/configure", json={"queue": "open"})
    assert asked.json()["warnings"] == [
        "encryption key unusable: payloads are stored in plaintext"]
    assert asked.json()["ignoredOptions"] == []
    assert "warnings" not in plain.json()


async def test_configure_does_not_warn_with_a_good_key(database_url):
    async with open_broker(make_settings(database_url, encryption_key=KEY), database_url) as b:
        transport = httpx.ASGITransport(app=create_app(b))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            r = await client.post("/api/v1/configure", json={
                "queue": "secret", "options": {"encryptionEnabled": True}})
    assert "warnings" not in r.json()


@pytest.mark.parametrize("key", [OTHER_KEY, None])
async def test_a_message_another_key_encrypted_is_shown_without_its_payload(database_url, key):
    (stored,) = await push_secret(make_settings(database_url, encryption_key=KEY), database_url)
    async with open_broker(make_settings(database_url, encryption_key=key), database_url) as b:
        transport = httpx.ASGITransport(app=create_app(b))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            (listed,) = (await client.get("/api/v1/messages?queue=vault")).json()["messages"]
            r = await client.get(f"/api/v1/messages/{listed['partitionId']}/"
                                 f"{listed['transactionId']}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["payload"], body["isEncrypted"]) == (None, True)
    assert body["payloadError"] == "its payload does not decrypt with this broker's key"
    assert body["id"] == str(stored.frame.message_id) and body["status"] == "pending"


@pytest.mark.parametrize(("key", "enabled", "reason", "malformed"), [
    (KEY, True, None, 0),
    (None, False, "no key: QUEEN_ENCRYPTION_KEY is not set", 0),
    ("abc", False, "bad key: QUEEN_ENCRYPTION_KEY has 3 characters; it must be 64 hexadecimal "
                   "characters (32 bytes)", 1),
    ("zz" * 32, False, "bad key: QUEEN_ENCRYPTION_KEY holds characters that are not "
                       "hexadecimal digits", 1),
], ids=["good", "unset", "short", "not-hex"])
async def test_whether_encryption_is_on_and_why_not_is_in_health_and_metrics(
        database_url, caplog, key, enabled, reason, malformed):
    # Issue 25, point 4: a malformed key disables encryption (the seed), impossible to miss.
    caplog.set_level(logging.WARNING, logger="queen_trio.encryption")
    async with open_broker(make_settings(database_url, encryption_key=key), database_url) as b:
        transport = httpx.ASGITransport(app=create_app(b))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            health = await client.get("/health")
            assert health.status_code == 200
            assert health.json()["status"] == "healthy" and health.json()["reason"] is None
            assert health.json()["encryption"] == {"enabled": enabled, "reason": reason}
            assert (await client.get("/metrics")).json()["encryption"] == {
                "enabled": enabled, "reason": reason}
            text = (await client.get("/metrics/prometheus")).text
    worker = f'worker_id="{b.identity.worker_id}"'
    assert f"queen_encryption_enabled{{{worker}}} {float(enabled)}" in text
    assert f"queen_encryption_key_malformed{{{worker}}} {float(malformed)}" in text
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ([f"encryption at rest disabled: {reason}; queues with encryptionEnabled "
                         "store plaintext"] if malformed else [])
