"""Offset reads over raw HTTP (docs/offset-reads.md): fetch's bounds, errors, paging and
byte budget; partitions/changed's order, cursor and safeTime, which a follower can trust
while writes are held open."""

from __future__ import annotations

import random

import pytest
import trio

from queen_trio.push.bundle import Segment, run_bundle
from queen_trio.push.items import Group
from queen_trio.push.parse import build_item
from tests.support.consuming import push
from tests.support.db import db_execute


async def fetch(client, *entries, status=200, **body):
    r = await client.post("/api/v1/fetch", json={"entries": list(entries), **body})
    assert r.status_code == status, r.text
    return r.json()["entries"] if status == 200 else r.json()


async def changed(client, *entries, status=200):
    r = await client.post("/api/v1/partitions/changed", json={"entries": list(entries)})
    assert r.status_code == status, r.text
    return r.json()


async def test_fetch_reads_records_by_offset_with_both_bounds(client):
    await push(client, "r.q", *[{"n": n} for n in range(6)], partition="p")
    [e] = await fetch(client, {"queue": "r.q", "partition": "p", "offset": 2})
    assert e["highWatermark"] == 6 and e["logStartOffset"] == 0 and "error" not in e
    assert [r["offset"] for r in e["records"]] == [2, 3, 4, 5]
    assert [r["payload"] for r in e["records"]] == [{"n": n} for n in range(2, 6)]
    assert all(r["transactionId"] and r["ts"].endswith("Z") for r in e["records"])
    assert len(e["records"][0]["ts"]) == len("2026-01-01T00:00:00.000000Z")


async def test_fetch_errors_empty_logs_and_the_end(client, broker):
    await push(client, "r.q", 1, 2, 3, partition="p")
    unknown, never, end, past, below_zero_ok = await fetch(
        client, {"queue": "none", "partition": "p", "offset": 0},
        {"queue": "r.q", "partition": "never", "offset": 0},
        {"queue": "r.q", "partition": "p", "offset": 3},
        {"queue": "r.q", "partition": "p", "offset": 4},
        {"queue": "r.q", "partition": "p", "offset": 0})
    assert unknown["error"] == "UNKNOWN_TOPIC_OR_PARTITION" and unknown["records"] == []
    assert never == {"queue": "r.q", "partition": "never", "records": [],
                     "highWatermark": 0, "logStartOffset": 0}
    assert end["records"] == [] and "error" not in end and end["highWatermark"] == 3
    assert past["error"] == "OFFSET_OUT_OF_RANGE" and past["records"] == []
    assert len(below_zero_ok["records"]) == 3
    # Retention under a reader: the first segment goes; offset 0 is now below logStart.
    await db_execute(broker.db, "DELETE FROM queen.segments WHERE first_offset = 0")
    [gone] = await fetch(client, {"queue": "r.q", "partition": "p", "offset": 0})
    assert gone["error"] == "OFFSET_OUT_OF_RANGE" and gone["records"] == []
    assert gone["logStartOffset"] == gone["highWatermark"] == 3


async def test_fetch_pages_by_budget_and_always_delivers_the_first_record(client):
    big = "x" * 5000
    await push(client, "r.b", big, "small", big, partition="p")
    [e] = await fetch(client, {"queue": "r.b", "partition": "p", "offset": 0, "maxBytes": 10})
    assert [r["offset"] for r in e["records"]] == [0]  # alone past the budget: still sent
    [e] = await fetch(client, {"queue": "r.b", "partition": "p", "offset": 1,
                               "maxBytes": 6000})
    assert [r["offset"] for r in e["records"]] == [1, 2]
    # The call's budget spans entries: the second entry gets nothing once it is spent.
    a, b = await fetch(client, {"queue": "r.b", "partition": "p", "offset": 0},
                       {"queue": "r.b", "partition": "p", "offset": 1}, maxBytes=100)
    assert [r["offset"] for r in a["records"]] == [0] and b["records"] == []


@pytest.mark.parametrize(("body", "text"), [
    ({"entries": [{"queue": "q", "offset": -1}]}, "offset"),
    ({"entries": [{"queue": "q", "offset": "0"}]}, "offset"),
    ({"entries": [{"offset": 0}]}, "queue"),
    ({"entries": [{"queue": "q", "offset": 0}] * 1025}, "1024"),
    ({"entries": 1}, "entries"),
])
async def test_fetch_refuses_bad_bodies(client, body, text):
    r = await client.post("/api/v1/fetch", json=body)
    assert r.status_code == 400 and text in r.json()["error"], r.text


async def test_a_numeric_partition_and_a_missing_one(client):
    await push(client, "r.n", 1, partition="7")
    await push(client, "r.n", 2)
    seven, default = await fetch(client, {"queue": "r.n", "partition": 7, "offset": 0},
                                 {"queue": "r.n", "offset": 0})
    assert seven["records"][0]["payload"] == 1 and default["records"][0]["payload"] == 2


async def test_changed_lists_in_creation_order_pages_with_a_cursor_and_filters_by_since(client):
    for name in ("c", "a", "b"):
        await push(client, "r.c", 1, partition=name)
    body = await changed(client, {"queue": "r.c", "limit": 2})
    [e] = body["entries"]
    assert [p["name"] for p in e["partitions"]] == ["c", "a"] and e["next"]
    p = e["partitions"][0]
    assert p["lastOffset"] == 0 and p["logStart"] == 0 and p["id"]
    [e2] = (await changed(client, {"queue": "r.c", "limit": 2, "after": e["next"]}))["entries"]
    assert [p["name"] for p in e2["partitions"]] == ["b"] and e2["next"] is None
    safe = body["safeTime"]
    assert len(safe) == len("2026-01-01T00:00:00.000000Z") and safe.endswith("Z")
    await push(client, "r.c", 2, partition="a")
    [e3] = (await changed(client, {"queue": "r.c", "since": safe}))["entries"]
    # "a", and any other written at or after safeTime (a transaction of the broker's own open
    # since before the first pushes puts safeTime before them too), in the order of their last
    # writes: c and b as first written, then a again.
    first_writes = {p["name"]: p["lastWriteAt"] for p in e["partitions"] + e2["partitions"]}
    assert [p["name"] for p in e3["partitions"]] == [
        n for n in ("c", "b") if first_writes[n] >= safe] + ["a"]
    # A cursor of the other mode, or garbage: BAD_CURSOR.
    [bad] = (await changed(client, {"queue": "r.c", "since": safe,
                                    "after": e["next"]}))["entries"]
    assert bad["error"] == "BAD_CURSOR"
    [bad] = (await changed(client, {"queue": "r.c", "after": "garbage"}))["entries"]
    assert bad["error"] == "BAD_CURSOR"
    [unknown] = (await changed(client, {"queue": "nope"}))["entries"]
    assert unknown["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert (await changed(client))["entries"] == []
    r = await client.post("/api/v1/partitions/changed",
                          json={"entries": [{"queue": "r.c", "since": "yesterday"}]})
    assert r.status_code == 400 and "yesterday" in r.json()["error"]


async def _held_write(broker, queue, partition, payload, seconds):
    """The push SQL on a connection of its own, inside BEGIN ... COMMIT held open."""
    item = build_item(0, queue, partition, None, payload)
    group = Group(queue, partition, [item])
    segment = Segment.fuse([broker.publisher.pack(group, None)])

    async def work(conn):
        async with conn.transaction():
            await run_bundle(conn, [segment])
            import asyncio

            await asyncio.sleep(seconds)

    await broker.db.call(work)


async def test_safe_time_is_a_watermark_a_follower_can_trust(client, broker):
    """Writers on many partitions, some writes held open 5 to 7 s; a follower copies from
    safeTime to safeTime with changed + fetch. Its copy equals the source: nothing missed,
    nothing twice."""
    parts = [f"p{n}" for n in range(8)]
    await push(client, "r.s", "first", partition="p0")
    copy: dict[str, list] = {p: [] for p in parts}
    stop = trio.Event()

    async def follow_once(since):
        body = await changed(client, {"queue": "r.s", **({"since": since} if since else {})})
        for p in body["entries"][0]["partitions"]:
            start = len(copy[p["name"]])
            while True:
                [e] = await fetch(client, {"queue": "r.s", "partition": p["name"],
                                           "offset": start})
                copy[p["name"]].extend(r["payload"] for r in e["records"])
                start = len(copy[p["name"]])
                if start >= e["highWatermark"] or not e["records"]:
                    break
        return body["safeTime"]

    async def writer(n):
        rng = random.Random(n)
        i = 0
        while not stop.is_set():
            # Not the held partitions: nothing written after a held write may hide it.
            await push(client, "r.s", f"w{n}-{i}", partition=rng.choice(parts[:4]))
            i += 1
            await trio.sleep(0.01)

    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(writer, n)
        for n, seconds in enumerate((5, 6, 7)):
            nursery.start_soon(_held_write, broker, "r.s", parts[n + 4],
                               f'"held-{n}"'.encode(), seconds)
        since = None
        with trio.move_on_after(8):
            while True:
                since = await follow_once(since)
                await trio.sleep(0.1)
        stop.set()
    # Everything has committed: follow until the watermark passes it all.
    for _ in range(3):
        since = await follow_once(since)
        await trio.sleep(0.05)
    for p in parts:
        [e] = await fetch(client, {"queue": "r.s", "partition": p, "offset": 0})
        assert copy[p] == [r["payload"] for r in e["records"]], p
    assert sorted(v for vs in copy.values() for v in vs if v.startswith("held-")) == [
        "held-0", "held-1", "held-2"]
