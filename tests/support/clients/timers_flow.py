"""The official client's timers and offset reads (queen-mq 2.6.0), unchanged: every timer
call and status, and fetch / changed_since, against a broker URL. Prints one JSON report."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta

import zstandard
from queen import Queen


def plain(result) -> dict:
    return {**dict(result), "_bool": bool(result)}


async def popped(q, queue: str, n: int, partition: str | None = None) -> list:
    out: list = []
    for _ in range(200):
        qb = q.queue(queue)
        if partition:
            qb = qb.partition(partition)
        got = await qb.batch(50).wait(False).pop()
        if got:
            await q.ack(got, True)
            out.extend(got)
        if len(out) >= n:
            return out
        await asyncio.sleep(0.05)
    return out


async def main(url: str) -> dict:
    r: dict = {}
    async with Queen(url) as q:
        t = q.timers
        # Join the queue-mode group before anything fires (see test_timers.py).
        await q.queue("cf.t").batch(1).wait(False).pop()
        r["schedule"] = plain(await t.schedule("cf.t", "order-1/expire", {"order": 1},
                                               delay_ms=300, txn="cf-1"))
        r["reschedule"] = plain(await t.reschedule("cf.t", "order-1/expire", {"order": 1,
                                                   "v": 2}, delay=timedelta(milliseconds=400),
                                                   txn="cf-2"))
        r["peek"] = plain(await t.peek("cf.t", "order-1/expire"))
        r["peek_missing"] = plain(await t.peek("cf.t", "nope"))
        await t.schedule("cf.t", "cancel-me", "x", delay_ms=60_000, txn="cf-3")
        r["cancel"] = plain(await t.cancel("cf.t", "cancel-me"))
        r["cancel_again"] = plain(await t.cancel("cf.t", "cancel-me", txn="cf-3"))
        for n in range(5):
            await t.schedule("cf.list", f"k{n}", n, delay_ms=60_000)
        r["list"] = await t.list("cf.list", limit=2)
        r["list_all"] = [row["timerKey"] for row in await t.list_all("cf.list", limit=2)]
        r["batch"] = [plain(x) for x in await t.batch([
            {"op": "cancel", "queue": "cf.list", "timerKey": "k0"},
            {"op": "cancel", "queue": "cf.list", "timerKey": "k1"}])]
        # payloadZstd: the caller compresses (queen-mq[zstd]) and hands the bytes over.
        frame = zstandard.ZstdCompressor().compress(b'{"b": 1}')
        built = await q.timer("cf.t").key("built").payload(frame, zstd=True).after_ms(0) \
            .txn("cf-4").schedule()
        r["builder_zstd"] = plain(built)
        got = await popped(q, "cf.t", 2)
        r["delivered"] = sorted([(m["transactionId"], json.dumps(m["data"], sort_keys=True),
                                  m["id"]) for m in got])
        # The transaction rider: ack, push and a timer in one commit.
        await q.queue("cf.in").push([{"data": {"job": 1}}])
        (msg,) = await q.queue("cf.in").batch(1).wait(False).pop()
        await q.queue("cf.out").batch(1).wait(False).pop()
        tx = q.transaction().ack(msg).queue("cf.out").push([{"data": {"pushed": 1}}])
        tx.timer("cf.out").key("follow-up").payload({"timer": 1}).after_ms(0).txn("cf-5") \
            .schedule()
        res = await tx.commit()
        r["tx"] = dict(res)
        got = await popped(q, "cf.out", 2)
        r["tx_delivered"] = sorted(json.dumps(m["data"], sort_keys=True) for m in got)
        # A timer rider with no operation at all.
        tx = q.transaction()
        tx.timer("cf.out").key("alone").payload(1).after_ms(60_000).schedule()
        r["tx_alone"] = dict(await tx.commit())

        # Offset reads.
        await q.queue("cf.log").partition("a").push([{"data": {"n": n}} for n in range(5)])
        await q.queue("cf.log").partition("b").push([{"data": {"n": 10}}])
        read = await q.queue("cf.log").fetch(["a", "b", "never"])
        r["fetch"] = {name: {"offsets": [x["offset"] for x in p["records"]],
                             "payloads": [x["payload"] for x in p["records"]],
                             "hw": p["highWatermark"], "ls": p["logStartOffset"],
                             "next": p["nextOffset"]} for name, p in read.items()}
        later = await q.queue("cf.log").fetch("a", offsets={"a": 3})
        r["fetch_from_3"] = [x["offset"] for x in later["a"]["records"]]
        small = await q.queue("cf.log").fetch("a", max_bytes=1)
        r["fetch_small_budget"] = [x["offset"] for x in small["a"]["records"]]
        r["fetch_unknown_queue"] = {k: len(v["records"]) for k, v in
                                    (await q.queue("cf.none").fetch("a")).items()}
        changed = await q.queue("cf.log").changed_since()
        r["changed_all"] = [p["name"] for p in changed["partitions"]]
        r["safe_time"] = changed["safeTime"]
        again = await q.queue("cf.log").changed_since(changed["safeTime"])
        r["changed_after_safe"] = [p["name"] for p in again["partitions"]]
        await q.queue("cf.log").partition("b").push([{"data": {"n": 11}}])
        third = await q.queue("cf.log").changed_since(again["safeTime"])
        r["changed_after_write"] = [p["name"] for p in third["partitions"]]
        r["changed_unknown"] = (await q.queue("cf.none").changed_since())["partitions"]
    return r


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1])), default=str))
