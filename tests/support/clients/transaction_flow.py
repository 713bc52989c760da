"""The official client's transaction builder, unchanged: ack an input, push an output."""

from __future__ import annotations

import asyncio
import json
import sys

from queen import Queen


async def main(url: str) -> dict:
    r: dict = {}
    async with Queen(url) as q:
        await q.queue("tx.in").push([{"data": {"job": 1}}])
        (message,) = await q.queue("tx.in").batch(1).wait(False).pop()
        result = await (q.transaction().ack(message)
                        .queue("tx.out").push([{"data": {"done": 1}}]).commit())
        r["commit"] = dict(result)
        r["input_left"] = await q.queue("tx.in").batch(5).wait(False).pop()
        out = await q.queue("tx.out").batch(5).wait(False).pop()
        r["output"] = [m["data"] for m in out]
        await q.ack(out, True)

        # msg["trace"](...) inside consume(), as the official client attaches it.
        await q.queue("tx.traced").push([{"data": {"n": 1}}])
        traced: list = []

        async def handler(message):
            traced.append(await message["trace"]({"traceName": "client-flow", "eventType": "step",
                                                 "data": {"seen": message["data"]["n"]}}))

        await q.queue("tx.traced").batch(1).limit(1).wait(True).timeout_millis(2000).consume(handler)
        r["trace_results"] = traced
    return r


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1])), default=str))
