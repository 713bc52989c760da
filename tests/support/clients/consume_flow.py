"""Consumption through the official client (queen-mq 2.6.0), unchanged; prints a JSON report."""

from __future__ import annotations

import asyncio
import json
import sys

from queen import Queen


async def main(url: str) -> dict:
    r: dict = {}
    async with Queen(url) as q:
        await q.queue("cf.jobs").config({"retry_limit": 1}).create()
        await q.queue("cf.jobs").push([{"data": {"n": n}} for n in range(3)])

        # pop, then ack True / False.
        popped = await q.queue("cf.jobs").batch(1).wait(False).pop()
        r["pop_one"] = [m["data"] for m in popped]
        r["ack_true"] = await q.ack(popped[0], True)
        popped = await q.queue("cf.jobs").batch(1).wait(False).pop()
        r["nack"] = await q.ack(popped[0], False)
        again = await q.queue("cf.jobs").batch(10).wait(False).pop()
        r["after_nack"] = [m["data"] for m in again]
        r["renew"] = await q.renew(again[0])
        r["ack_list"] = await q.ack(again, True)

        # consume with batch 1 and batch 10 (the client acks after the handler).
        await q.queue("cf.single").push([{"data": n} for n in range(4)])
        seen_single: list = []

        async def on_one(message):
            seen_single.append(message["data"])

        await q.queue("cf.single").batch(1).limit(4).wait(True).timeout_millis(2000).consume(on_one)
        r["consume_single"] = seen_single

        await q.queue("cf.batch").push([{"data": n} for n in range(25)])
        seen_batches: list = []

        async def on_batch(messages):
            seen_batches.append([m["data"] for m in messages])

        await q.queue("cf.batch").batch(10).limit(25).wait(True).timeout_millis(2000).consume(on_batch)
        r["consume_batches"] = seen_batches

        # Groups: each sees every message; subscription "new" skips history.
        await q.queue("cf.fan").push([{"data": n} for n in range(3)])
        for group in ("g1", "g2"):
            got: list = []

            async def on_group(messages, got=got):
                got.extend(m["data"] for m in (messages if isinstance(messages, list) else [messages]))

            await q.queue("cf.fan").group(group).batch(10).limit(3).wait(True).timeout_millis(2000).consume(on_group)
            r[f"group_{group}"] = got
        late = await q.queue("cf.fan").group("late").subscription_mode("new").batch(10).wait(False).pop()
        r["late_before"] = [m["data"] for m in late]
        await q.queue("cf.fan").push([{"data": "fresh"}])
        late = await q.queue("cf.fan").group("late").subscription_mode("new").batch(10).wait(False).pop()
        r["late_after"] = [m["data"] for m in late]
        await q.ack(late, True, {"group": "late"})

        # A handler that always fails: retries, then the DLQ.
        await q.queue("cf.poison").config({"retry_limit": 1}).create()
        await q.queue("cf.poison").push([{"data": "bad"}])

        async def explode(message):
            raise RuntimeError("cannot handle")

        await q.queue("cf.poison").batch(1).limit(2).wait(True).timeout_millis(1000).consume(explode)
        dlq = await q.queue("cf.poison").dlq().limit(10).get()
        r["dlq"] = {"total": dlq.get("total"),
                    "data": [m.get("data") for m in dlq.get("messages", [])],
                    "errors": [m.get("errorMessage") for m in dlq.get("messages", [])]}

        # Transaction-free flow with explicit partitions.
        await q.queue("cf.parts").partition("p1").push([{"data": "one"}])
        got = await q.queue("cf.parts").partition("p1").batch(5).wait(False).pop()
        r["partition_pop"] = [(m["partition"], m["data"]) for m in got]
        await q.ack(got, True)

        r["deleted"] = await q.queue("cf.parts").delete()
    return r


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1])), default=str))
