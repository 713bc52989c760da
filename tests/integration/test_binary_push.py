"""The 2.6 client's binary push (docs/decisions.md#binary-push): a binary push is a push.

Every body here is built by the official client's own encoders (queen.http.push_binary), in
each of its forms: plain, with transaction ids, the body zstd-compressed, and the framed groups
(push_compression). Each rule is checked against the same push sent as JSON.
"""

from __future__ import annotations

import json
import struct
import sys
import uuid
from pathlib import Path

import httpx
import pytest
import trio
import zstandard
from queen.http.push_binary import (
    PushBatch,
    binary_push_body,
    encode_push_binary,
    encode_transaction_frames,
)

from queen_trio.broker import open_broker
from queen_trio.storage.encryption import PayloadCipher
from queen_trio.web.routes import create_app
from tests.support.auth import SECRET, authed_client, bearer, token
from tests.support.brokers import make_settings
from tests.support.consuming import configure, pop
from tests.support.db import db_fetchval
from tests.support.outage import database_cut_off
from tests.support.storage import stored_messages

CLIENTS = Path(__file__).parent.parent / "support" / "clients"
BINARY = {"Content-Type": "application/x-queen-push"}
KINDS = ["plain", "txn", "zstd", "frames"]
KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"


def batches_of(items: list[dict]) -> list[PushBatch]:
    out: list[PushBatch] = []
    for item in items:
        partition = item.get("partition", "Default")
        if not out or (out[-1].queue, out[-1].partition) != (item["queue"], partition):
            out.append(PushBatch(item["queue"], partition, [], []))
        out[-1].payloads.append(json.dumps(item["payload"], separators=(",", ":"),
                                             ensure_ascii=False).encode())
        assert out[-1].transaction_ids is not None
        out[-1].transaction_ids.append(item.get("transactionId", ""))
    return out


def encode(items: list[dict], kind: str) -> bytes:
    """The items as the client sends them in `kind` form."""
    if kind == "txn":
        body = binary_push_body(items, False)
        assert body is not None and body[4] & 4
        return body
    if kind == "frames":
        body = binary_push_body(items, True)
        assert body is not None and body[4] == 8
        return body
    batches = batches_of(items)
    if kind == "plain":
        assert not any(i.get("transactionId") for i in items)
        for b in batches:
            b.transaction_ids = None
        return encode_push_binary(batches)
    return encode_push_binary(batches, compress=True)


def renamed(items: list[dict], prefix: str) -> list[dict]:
    return [{**i, "queue": f"{prefix}.{i['queue']}"} for i in items]


async def push_both(client: httpx.AsyncClient, items: list[dict], kind: str,
                    headers: dict[str, str] | None = None) -> tuple[httpx.Response, httpx.Response]:
    j = await client.post("/api/v1/push", json={"items": renamed(items, "j")}, headers=headers)
    b = await client.post("/api/v1/push", content=encode(renamed(items, "b"), kind),
                          headers={**BINARY, **(headers or {})})
    return j, b


def generated(txid: str) -> bool:
    """A transaction id the caller did not give (the tests give none that is a UUID)."""
    try:
        uuid.UUID(txid)
    except ValueError:
        return False
    return True


def shape(reply: list[dict]) -> list[dict]:
    """A reply without its ids and queue names, the duplicates pointing at their winner."""
    ids = {e["message_id"]: n for n, e in enumerate(reply)}
    return [{**{k: v for k, v in e.items() if k not in ("message_id", "queueName")},
             "transaction_id": "generated" if generated(e["transaction_id"])
             else e["transaction_id"], "same_as": ids[e["message_id"]]} for e in reply]


ITEMS = [
    {"queue": "mix", "partition": "a", "payload": {"n": 1, "s": "é"}},
    {"queue": "mix", "partition": "a", "payload": [1, 2, None]},
    {"queue": "mix", "partition": "b", "payload": "text"},
    {"queue": "mix", "partition": "a", "payload": None},
    {"queue": "other", "payload": 3.5},
]
WITH_IDS = [
    {"queue": "d", "partition": "p", "transactionId": "t-1", "payload": {"n": 1}},
    {"queue": "d", "partition": "p", "transactionId": "t-2", "payload": {"n": 2}},
    {"queue": "d", "partition": "p", "transactionId": "t-1", "payload": {"n": 3}},
    {"queue": "d", "partition": "q", "transactionId": "t-1", "payload": {"n": 4}},
    {"queue": "d", "partition": "p", "payload": {"n": 5}},
]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_binary_push_answers_and_stores_as_the_json_push(client, broker, kind):
    items = ITEMS if kind == "plain" else WITH_IDS
    j, b = await push_both(client, items, kind)
    assert (j.status_code, b.status_code) == (201, 201)
    assert b.headers["content-type"] == "application/json"
    assert shape(b.json()) == shape(j.json())
    assert [e["queueName"] for e in b.json()] == [f"b.{i['queue']}" for i in items]
    # The ids are the broker's (version 7, fresh), and each one answered is the one stored.
    for entry in b.json():
        assert uuid.UUID(entry["message_id"]).version == 7
    for queue, partition in {(i["queue"], i.get("partition", "Default")) for i in items}:
        jm = await stored_messages(broker.db, f"j.{queue}", partition)
        bm = await stored_messages(broker.db, f"b.{queue}", partition)
        assert [json.loads(m.frame.payload) for m in bm] == [
            json.loads(m.frame.payload) for m in jm]
        # Id order is offset order within a partition.
        ids = [m.frame.message_id for m in bm]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        answered = {e["message_id"] for e in b.json()}
        assert {str(i) for i in ids} <= answered
        given = {i["transactionId"] for i in items if i.get("transactionId")
                 and (i["queue"], i.get("partition", "Default")) == (queue, partition)}
        assert given <= {m.frame.transaction_id for m in bm}


@pytest.mark.parametrize("kind", ["txn", "zstd", "frames"])
async def test_dedup_across_requests_answers_the_original_id(client, kind):
    items = [{"queue": "dd", "partition": "p", "transactionId": "same", "payload": 1}]
    first = (await client.post("/api/v1/push", content=encode(items, kind), headers=BINARY)).json()
    again = (await client.post("/api/v1/push", content=encode(items, kind), headers=BINARY)).json()
    as_json = (await client.post("/api/v1/push", json={"items": items})).json()
    assert first[0]["status"] == "queued"
    assert again[0]["status"] == as_json[0]["status"] == "duplicate"
    assert again[0]["message_id"] == as_json[0]["message_id"] == first[0]["message_id"]


async def test_a_framed_retry_lands_once(client, broker):
    """The client sends a retry's framed body byte for byte: its carried ids dedup it."""
    body = binary_push_body([{"queue": "retry", "payload": {"n": 1}}], True)
    assert body is not None
    first = (await client.post("/api/v1/push", content=body, headers=BINARY)).json()
    again = (await client.post("/api/v1/push", content=body, headers=BINARY)).json()
    assert [first[0]["status"], again[0]["status"]] == ["queued", "duplicate"]
    assert again[0]["message_id"] == first[0]["message_id"]
    (stored,) = await stored_messages(broker.db, "retry")
    assert str(stored.frame.message_id) == first[0]["message_id"]
    # The carried transaction id is the client's id text; the stored id is the broker's.
    assert stored.frame.transaction_id != first[0]["message_id"]


@pytest.mark.parametrize("kind", KINDS)
async def test_producer_sub_is_stamped_from_the_token(database_url, kind):
    async with authed_client(database_url, JWT_SECRET=SECRET) as client:
        headers = bearer(token(sub="bin-producer"))
        items = [{"queue": "secure", "payload": {"n": 1}}]
        if kind in ("txn", "frames"):
            items = [{**items[0], "transactionId": "x"}]
        r = await client.post("/api/v1/push", content=encode(items, kind),
                              headers={**BINARY, **headers})
        assert r.status_code == 201, r.text
        got = await client.get("/api/v1/pop/queue/secure", params={"wait": "false"},
                               headers=headers)
        assert got.json()["messages"][0]["producerSub"] == "bin-producer"
        assert got.json()["messages"][0]["data"] == {"n": 1}


@pytest.mark.parametrize("kind", KINDS)
async def test_encryption_happens_before_packing(database_url, kind):
    settings = make_settings(database_url, encryption_key=KEY)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            await configure(client, "vault", encryptionEnabled=True)
            payload = {"card": "4111-1111-1111-1111"}
            items = [{"queue": "vault", "payload": payload, "transactionId": "c"}]
            if kind in ("plain", "zstd"):
                items = [{"queue": "vault", "payload": payload}]
            r = await client.post("/api/v1/push", content=encode(items, kind), headers=BINARY)
            assert r.status_code == 201, r.text
            (message,) = await stored_messages(broker.db, "vault")
            assert message.frame.encrypted is True and b"4111" not in message.frame.payload
            assert json.loads(PayloadCipher(KEY).decrypt(message.frame.payload)) == payload
            assert (await pop(client, "vault"))["messages"][0]["data"] == payload


@pytest.mark.parametrize("kind", KINDS)
async def test_max_size_answers_429_per_group(client, kind):
    await configure(client, "small", maxSize=1)
    items = [{"queue": "small", "partition": "a", "payload": 1},
             {"queue": "small", "partition": "a", "payload": 2},
             {"queue": "fine", "payload": 3}]
    if kind in ("txn", "frames"):
        items = [{**i, "transactionId": f"m{n}"} for n, i in enumerate(items)]
    r = await client.post("/api/v1/push", content=encode(items, kind), headers=BINARY)
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert [e["status"] for e in r.json()] == ["failed", "failed", "queued"]
    assert r.json()[0]["error"] == "queue full"


async def test_buffered_goes_through_the_spool(client, broker, admin_url):
    items = [{"queue": "spooled", "transactionId": f"s{n}", "payload": {"n": n}} for n in range(3)]
    async with database_cut_off(admin_url, broker.settings.database_url):
        r = await client.post("/api/v1/push", content=encode(items, "frames"), headers=BINARY)
        assert r.status_code == 201
        assert [e["status"] for e in r.json()] == ["buffered"] * 3
    with trio.fail_after(20):
        while (await client.get("/api/v1/status/buffers")).json()["pending"]:
            await trio.sleep(0.1)
    stored = await stored_messages(broker.db, "spooled")
    assert [(m.frame.transaction_id, json.loads(m.frame.payload)) for m in stored] == [
        (f"s{n}", {"n": n}) for n in range(3)]
    assert [str(m.frame.message_id) for m in stored] == [e["message_id"] for e in r.json()]


async def test_an_empty_binary_push_is_an_empty_array(client):
    r = await client.post("/api/v1/push", content=encode_push_binary([]), headers=BINARY)
    assert (r.status_code, r.json()) == (201, [])


# -- bad bodies -----------------------------------------------------------------------------

def u16(n: int) -> bytes:
    return struct.pack("<H", n)


def u32(n: int) -> bytes:
    return struct.pack("<I", n)


def group(queue: bytes, partition: bytes, *payloads: bytes) -> bytes:
    return (u16(len(queue)) + queue + u16(len(partition)) + partition + u32(len(payloads))
            + b"".join(u32(len(p)) + p for p in payloads))


def framed_group(queue: bytes, frames: bytes, n: int, z: bytes | None = None) -> bytes:
    z = zstandard.ZstdCompressor(write_content_size=True).compress(frames) if z is None else z
    return u16(len(queue)) + queue + u16(1) + b"p" + u32(n) + u32(len(z)) + z


def frame(payload: bytes, txid: bytes = b"t", kind: int = 0) -> bytes:
    inner = bytes([kind]) + b"\x01" * 16 + u16(len(txid)) + txid + payload
    return u32(len(inner)) + inner


def zstd(data: bytes, content_size: bool = True) -> bytes:
    cctx = zstandard.ZstdCompressor(write_content_size=content_size)
    if content_size:
        return cctx.compress(data)
    obj = cctx.compressobj()
    return obj.compress(data) + obj.flush()


def lying_frame(real: bytes, claimed: int) -> bytes:
    """A zstd frame of `real` whose header claims `claimed` bytes."""
    z = bytearray(zstd(real))
    fhd = z[4]
    single, fcs_flag, dict_flag = (fhd >> 5) & 1, fhd >> 6, fhd & 3
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    value = claimed - 256 if size == 2 else claimed
    z[at:at + size] = value.to_bytes(size, "little")
    return bytes(z)


OK_GROUP = group(b"q", b"p", b"1")
BAD_BODIES = {
    "magic only": b"QPB1",
    "unknown flag": b"QPB1\x10" + u32(0),
    "counts only (flag 2)": b"QPB1\x02" + u32(1) + OK_GROUP,
    "truncated group count": b"QPB1\x00\x01\x00",
    "truncated payload": b"QPB1\x00" + u32(1) + group(b"q", b"p", b"12")[:-1],
    "trailing bytes": b"QPB1\x00" + u32(1) + OK_GROUP + b"x",
    "too many groups": b"QPB1\x00" + u32(3) + OK_GROUP,
    "payload not JSON": b"QPB1\x00" + u32(1) + group(b"q", b"p", b"{nope}"),
    "empty payload": b"QPB1\x00" + u32(1) + group(b"q", b"p", b""),
    "payload trailing comma": b"QPB1\x00" + u32(1) + group(b"q", b"p", b'{"a":1,}'),
    "payload bad UTF-8": b"QPB1\x00" + u32(1) + group(b"q", b"p", b'"\xff"'),
    "payload too deep": b"QPB1\x00" + u32(1) + group(b"q", b"p", b"[" * 200 + b"]" * 200),
    "two payloads in one": b"QPB1\x00" + u32(1) + group(b"q", b"p", b"1 2"),
    "queue not UTF-8": b"QPB1\x00" + u32(1) + group(b"\xff", b"p", b"1"),
    "empty queue": b"QPB1\x00" + u32(1) + group(b"", b"p", b"1"),
    "queue too long": b"QPB1\x00" + u32(1) + group(b"q" * 300, b"p", b"1"),
    "NUL in partition": b"QPB1\x00" + u32(1) + group(b"q", b"p\x00", b"1"),
    "transaction id too long": b"QPB1\x04" + u32(1) + u16(1) + b"q" + u16(1) + b"p" + u32(1)
        + u16(300) + b"t" * 300 + u32(1) + b"1",
    "zstd body not zstd": b"QPB1\x01" + u32(10) + b"not a zstd frame",
    "zstd raw_len mismatch": b"QPB1\x01" + u32(5) + zstd(u32(1) + OK_GROUP),
    "zstd without content size": b"QPB1\x01" + u32(len(u32(1) + OK_GROUP))
        + zstd(u32(1) + OK_GROUP, content_size=False),
    "zstd trailing bytes": b"QPB1\x01" + u32(len(u32(1) + OK_GROUP)) + zstd(u32(1) + OK_GROUP)
        + b"junk",
    "zstd frame lies about its size": b"QPB1\x01" + u32(300) + lying_frame(
        u32(1) + group(b"q", b"p", b'"' + b"a" * 2000 + b'"'), 300),
    "frames with flag 1": b"QPB1\x09" + u32(0),
    "frame of unknown type": b"QPB1\x08" + u32(1) + framed_group(b"q", frame(b"1", kind=1), 1),
    "frame too short": b"QPB1\x08" + u32(1) + framed_group(b"q", u32(3) + b"\x00\x00\x00", 1),
    "fewer frames than n": b"QPB1\x08" + u32(1) + framed_group(b"q", frame(b"1"), 2),
    "more frames than n": b"QPB1\x08" + u32(1) + framed_group(b"q", frame(b"1") * 2, 1),
    "frame payload not JSON": b"QPB1\x08" + u32(1) + framed_group(b"q", frame(b"{"), 1),
    "frames not zstd": b"QPB1\x08" + u32(1) + framed_group(b"q", b"", 1, z=b"garbage!"),
    "transaction: unknown flag": b"QTB1\x01" + u32(0) + u32(0),
    "transaction: counts only": b"QTB1\x02" + u32(0) + u32(0),
    "transaction: head not JSON": b"QTB1\x00" + u32(3) + b"{no" + u32(1)
        + framed_group(b"q", frame(b"1"), 1),
    "transaction: head truncated": b"QTB1\x00" + u32(50) + b"{}",
    "transaction: nothing at all": b"QTB1\x00" + u32(0) + u32(0),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
async def test_a_bad_binary_body_is_a_json_400_and_writes_nothing(client, broker, name):
    body = BAD_BODIES[name]
    route = "/api/v1/transaction" if name.startswith("transaction") else "/api/v1/push"
    r = await client.post(route, content=body, headers=BINARY)
    assert r.status_code == 400, (name, r.text)
    assert r.headers["content-type"] == "application/json"
    assert isinstance(r.json()["error"], str) and r.json()["error"]
    if "flag 2" in name or "counts" in name:
        assert r.json()["code"] == "counts_not_supported"
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0
    # The partition still takes pushes.
    r = await client.post("/api/v1/push", content=b"QPB1\x00" + u32(1) + OK_GROUP, headers=BINARY)
    assert r.status_code == 201


async def test_decompression_bombs_are_413_before_anything_is_allocated(database_url):
    settings = make_settings(database_url, max_body_bytes=64 * 1024)
    async with open_broker(settings, database_url) as broker:
        transport = httpx.ASGITransport(app=create_app(broker))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as client:
            # 1 GiB of zeros in a few tens of kilobytes, as the body and as a group's frames.
            big = 1 << 30
            cctx = zstandard.ZstdCompressor(write_content_size=True)
            chunks = cctx.compressobj(size=big)
            bomb = b"".join(chunks.compress(b"\x00" * (1 << 20)) for _ in range(1024)) + \
                chunks.flush()
            assert len(bomb) < 60 * 1024 and zstandard.frame_content_size(bomb) == big
            bodies = [
                b"QPB1\x01" + u32(big) + bomb,                     # raw_len says so
                b"QPB1\x01" + u32(1000) + bomb,                    # raw_len lies, the frame not
                b"QPB1\x08" + u32(1) + framed_group(b"q", b"", 1, z=bomb),
                b"QTB1\x00" + u32(0) + u32(1) + framed_group(b"q", b"", 1, z=bomb),
            ]
            # Under the cap frame by frame, over it together.
            half = frame(b'"' + b"a" * (40 * 1024) + b'"')
            bodies.append(b"QPB1\x08" + u32(2) + framed_group(b"q", half, 1)
                          + framed_group(b"q", half, 1))
            for n, body in enumerate(bodies):
                route = "/api/v1/transaction" if body.startswith(b"QTB1") else "/api/v1/push"
                r = await client.post(route, content=body, headers=BINARY)
                if n == 1:
                    # raw_len and the frame disagree: refused before decompressing.
                    assert r.status_code in (400, 413), r.text
                else:
                    assert r.status_code == 413, (n, r.text)
                assert "error" in r.json()
            assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0


# -- the binary transaction ---------------------------------------------------------------------

async def test_binary_transaction_lists_head_operations_then_the_pushes(client, broker):
    await client.post("/api/v1/push", json={"items": [{"queue": "in", "payload": {"job": 1}}]})
    (message,) = (await pop(client, "in"))["messages"]
    head = json.dumps({"operations": [{"type": "ack", "transactionId": message["transactionId"],
                                       "partitionId": message["partitionId"],
                                       "leaseId": message["leaseId"], "status": "completed"}],
                       "requiredLeases": [message["leaseId"]]}).encode()
    body = encode_transaction_frames(head, [
        PushBatch("out", "a", [b'{"n":1}', b'{"n":2}'], ["x1", ""]),
        PushBatch("out", "b", [b'{"n":3}'], None)])
    r = await client.post("/api/v1/transaction", content=body, headers=BINARY)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["success"] is True
    assert [(x["index"], x["type"]) for x in reply["results"]] == [
        (0, "ack"), (1, "push"), (2, "push"), (3, "push")]
    assert [x["status"] for x in reply["results"][1:]] == ["queued"] * 3
    assert reply["results"][1]["transactionId"] == "x1"
    stored = await stored_messages(broker.db, "out", "a")
    assert [str(m.frame.message_id) for m in stored] == [
        x["messageId"] for x in reply["results"][1:3]]
    assert await pop(client, "in", wait=False) is None  # the ack landed with the pushes


async def test_binary_transaction_head_keeps_the_rider_rules(client, broker):
    head = json.dumps({"operations": [], "kv": [{"op": "set", "key": "k", "value": 1}]}).encode()
    body = encode_transaction_frames(head, [PushBatch("rider", "p", [b"1"], None)])
    r = await client.post("/api/v1/transaction", content=body, headers=BINARY)
    as_json = await client.post("/api/v1/transaction", json={
        "operations": [{"type": "push", "items": [{"queue": "rider", "payload": 1}]}],
        "kv": [{"op": "set", "key": "k", "value": 1}]})
    assert (r.status_code, r.json()) == (as_json.status_code, as_json.json())
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0


async def test_binary_transaction_with_a_lost_lease_commits_nothing(client, broker):
    head = json.dumps({"operations": [], "requiredLeases": [str(uuid.uuid4())]}).encode()
    body = encode_transaction_frames(head, [PushBatch("gone", "p", [b"1"], None)])
    r = await client.post("/api/v1/transaction", content=body, headers=BINARY)
    assert r.status_code == 200 and r.json()["success"] is False
    assert await db_fetchval(broker.db, "SELECT count(*) FROM queen.segments") == 0


async def test_binary_push_with_two_workers_and_two_brokers(database_url):
    """Nothing per process: two brokers on one database take framed pushes to one partition,
    each answer's ids are stored, in offset order."""
    a_settings = make_settings(database_url)
    b_settings = make_settings(database_url)
    async with open_broker(a_settings, database_url) as a, open_broker(b_settings, database_url) as b:
        ca = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(a)), base_url="http://a")
        cb = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(b)), base_url="http://b")
        answered: list[str] = []

        async def producer(c: httpx.AsyncClient, tag: str) -> None:
            for n in range(10):
                items = [{"queue": "shared", "payload": {"t": tag, "n": n, "k": k}}
                         for k in range(5)]
                r = await c.post("/api/v1/push", content=encode(items, "frames"), headers=BINARY)
                assert r.status_code == 201
                answered.extend(e["message_id"] for e in r.json())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer, ca, "a")
            nursery.start_soon(producer, cb, "b")
        stored = await stored_messages(a.db, "shared")
        assert sorted(str(m.frame.message_id) for m in stored) == sorted(answered)
        assert len(stored) == 100
        await ca.aclose()
        await cb.aclose()


# -- the official client --------------------------------------------------------------------

@pytest.mark.parametrize("compression", ["plain", "compressed"])
async def test_official_client_binary_push(http_url, broker, compression):
    done = await trio.run_process(
        [sys.executable, str(CLIENTS / "binary_flow.py"), http_url, compression],
        capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    r = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert [e["status"] for e in r["pushed"]] == ["queued", "queued", "duplicate"]
    assert r["pushed"][2]["message_id"] == r["pushed"][0]["message_id"]
    assert r["again"][0]["status"] == "duplicate"
    assert r["again"][0]["message_id"] == r["pushed"][0]["message_id"]
    assert r["string"][0]["status"] == "queued"
    assert r["popped"] == [{"orderId": 1}, {"orderId": 2}]
    stored = await stored_messages(broker.db, "bin.orders", "c-1")
    assert [str(m.frame.message_id) for m in stored] == [
        e["message_id"] for e in r["pushed"][:2]]
    commit = r["commit"]
    assert commit["success"] is True
    # The caller's order, whatever order the broker answered in.
    assert [(x["index"], x["type"]) for x in commit["results"]] == [
        (0, "push"), (1, "ack"), (2, "push"), (3, "push")]
    assert r["input_left"] == []
    assert r["output"] == [1, 2, 3]
    # The client did send binary bodies: the metrics count them by form.
    figures = broker.activity.statistics().binary_bodies
    if compression == "compressed":
        assert figures.get("frames", 0) >= 4 and figures.get("transaction") == 1
        assert stored[1].frame.transaction_id != str(stored[1].frame.message_id)
    else:
        assert figures.get("plain", 0) >= 4 and "transaction" not in figures
