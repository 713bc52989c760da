"""The official client with binary_push (and push_compression when asked), unchanged: pushes,
duplicates, and a transaction whose pushes come before its ack."""

from __future__ import annotations

import asyncio
import json
import sys

from queen import Queen


async def main(url: str, compression: bool) -> dict:
    r: dict = {}
    async with Queen(url, binary_push=True, push_compression=compression) as q:
        r["pushed"] = await q.queue("bin.orders").partition("c-1").push([
            {"transactionId": "o-1", "data": {"orderId": 1}},
            {"data": {"orderId": 2}},
            {"transactionId": "o-1", "data": {"orderId": 3}}])
        r["again"] = await q.queue("bin.orders").partition("c-1").push([
            {"transactionId": "o-1", "data": {"orderId": 1}}])
        r["string"] = await q.queue("bin.orders").push([{"data": "just a string"}])
        popped = await q.queue("bin.orders").partition("c-1").batch(10).wait(False).pop()
        r["popped"] = [m["data"] for m in popped]
        await q.ack(popped, True)

        await q.queue("bin.in").push([{"data": {"job": 1}}])
        (message,) = await q.queue("bin.in").batch(1).wait(False).pop()
        result = await (q.transaction()
                        .queue("bin.out").partition("a").push([{"data": {"n": 1}}])
                        .ack(message)
                        .queue("bin.out").partition("b").push([{"data": {"n": 2}},
                                                              {"data": {"n": 3}}])
                        .commit())
        r["commit"] = dict(result)
        r["input_left"] = await q.queue("bin.in").batch(5).wait(False).pop()
        out = await q.queue("bin.out").batch(10).wait(False).pop()
        r["output"] = sorted(m["data"]["n"] for m in out)
    return r


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2] == "compressed")), default=str))
