"""Ephemeral queues through the official client (queen-mq 2.6.0), unchanged; prints a JSON
report. `ephemeral_flow.py URL [flow]`: `main` (every verb and option), `before` and `after`
(a restart between them), `relay` (push and pop each through their own URL)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

from queen import Queen
from queen.errors import EphemeralError, EphemeralQueueNotFoundError

# A 429 is answered once, not retried ten times (the reject bound's test).
ONE_TRY = {"max_attempts": 1}


async def main_flow(url: str) -> dict:
    r: dict = {}
    async with Queen(url, retry_429=ONE_TRY) as q:
        eph = q.ephemeral
        r["configure"] = await eph.configure("eph.jobs", lease_seconds=2, retry_limit=1,
                                             max_length=100, window_buffer={"ms": 0, "count": 0})
        r["push"] = await eph.push("eph.jobs", [{"n": 0}, {"n": 1}, {"n": 2}])
        first = await eph.pop("eph.jobs", batch=10)
        r["first"] = [(m["payload"], m["attempts"], m["partition"]) for m in first["messages"]]
        ms = first["messages"]
        r["ack1"] = await eph.ack("eph.jobs", [ms[0], {"id": ms[1]["id"], "status": "failed"},
                                               {"id": ms[2]["id"], "status": "retry"}])
        again = await eph.pop("eph.jobs", batch=10)
        r["again"] = [(m["payload"], m["attempts"]) for m in again["messages"]]
        r["ack2"] = await eph.ack("eph.jobs", again["messages"], status=False)
        r["ack_twice"] = await eph.ack("eph.jobs", ms[0])
        r["depth"] = await eph.depth("eph.jobs")
        try:
            await eph.depth("eph.missing")
        except EphemeralQueueNotFoundError as exc:
            r["missing"] = exc.code

        # A waiting pop woken by a push.
        async def later() -> None:
            await asyncio.sleep(0.3)
            await eph.push("eph.wake", {"hello": "world"}, partition="p1")

        started = time.monotonic()
        pusher = asyncio.create_task(later())
        woke = await eph.pop("eph.wake", partition="p1", wait=True, timeout=20000)
        await pusher
        r["woken"] = [m["payload"] for m in woke["messages"]]
        r["woken_before_timeout"] = time.monotonic() - started < 20
        await eph.ack("eph.wake", woke["messages"])

        # Fan-out to two groups (subscribed: each has popped once).
        for group in ("a", "b"):
            await eph.pop("eph.fan", group=group)
        await eph.push("eph.fan", [{"k": 1}, {"k": 2}])
        r["fan_a"] = [m["payload"] for m in (await eph.pop("eph.fan", group="a", batch=5,
                                                            commit_on_delivery=True))["messages"]]
        r["fan_b"] = [m["payload"] for m in (await eph.pop("eph.fan", group="b", batch=5,
                                                            auto_ack=True))["messages"]]
        r["fan_a_again"] = (await eph.pop("eph.fan", group="a", batch=5))["messages"]

        # Competing consumers in one group: nothing twice while leases hold.
        await eph.configure("eph.work", lease_seconds=30)
        await eph.push("eph.work", [{"i": i} for i in range(40)])
        seen: list = []

        async def worker() -> None:
            while True:
                got = await eph.pop("eph.work", group="w", batch=3)
                if not got["messages"]:
                    return
                seen.extend(m["payload"]["i"] for m in got["messages"])
                await eph.ack("eph.work", got["messages"], group="w")

        await asyncio.gather(*(worker() for _ in range(4)))
        r["competing"] = seen

        # Redelivery after a lease expires, up to retryLimit, then dropped and counted.
        await eph.configure("eph.lease", {"leaseSeconds": 1, "retryLimit": 1})
        await eph.push("eph.lease", {"x": 1})
        lease1 = await eph.pop("eph.lease")
        await asyncio.sleep(1.3)
        lease2 = await eph.pop("eph.lease", wait=True, timeout=3000)
        await asyncio.sleep(1.3)
        lease3 = await eph.pop("eph.lease")
        r["lease"] = [[m["attempts"] for m in x["messages"]] for x in (lease1, lease2, lease3)]
        r["lease_late_ack"] = await eph.ack("eph.lease", lease1["messages"])
        r["lease_depth"] = await eph.depth("eph.lease")

        # Both bound policies.
        await eph.configure("eph.reject", max_length=2, policy="reject")
        await eph.push("eph.reject", [1, 2])
        try:
            await eph.push("eph.reject", [3])
        except EphemeralError as exc:
            r["reject"] = {"code": exc.code, "status": exc.response.status_code}
        r["reject_all_or_nothing"] = None
        try:
            await eph.configure("eph.reject2", max_length=3, policy="reject")
            await eph.push("eph.reject2", [1, 2])
            await eph.push("eph.reject2", [3, 4])
        except EphemeralError:
            r["reject_all_or_nothing"] = (await eph.depth("eph.reject2"))["pending"]
        await eph.configure("eph.drop", max_length=3, policy="dropOldest")
        await eph.push("eph.drop", [1, 2, 3, 4, 5])
        r["drop_oldest"] = [m["payload"] for m in
                            (await eph.pop("eph.drop", batch=10, auto_ack=True))["messages"]]
        r["drop_depth"] = await eph.depth("eph.drop")
        await eph.configure("eph.bytes", max_bytes=10, policy="dropOldest")
        await eph.push("eph.bytes", ["aaaa", "bbbb", "cccc"])  # 6 bytes each as JSON
        r["drop_bytes"] = [m["payload"] for m in
                           (await eph.pop("eph.bytes", batch=10, auto_ack=True))["messages"]]

        # TTL.
        await eph.configure("eph.ttl", ttl_seconds=1)
        await eph.push("eph.ttl", ["old"])
        await asyncio.sleep(1.2)
        r["ttl"] = (await eph.pop("eph.ttl"))["messages"]
        r["ttl_depth"] = await eph.depth("eph.ttl")

        # windowBuffer: a waiting pop fills its batch.
        await eph.configure("eph.window", window_buffer={"ms": 3000, "count": 3})

        async def trickle() -> None:
            for i in range(3):
                await asyncio.sleep(0.1)
                await eph.push("eph.window", {"w": i})

        task = asyncio.create_task(trickle())
        windowed = await eph.pop("eph.window", batch=10, wait=True, timeout=10000,
                                 auto_ack=True)
        await task
        r["window"] = [m["payload"] for m in windowed["messages"]]

        # The buffered producer.
        for i in range(25):
            await eph.push("eph.buffered", {"b": i}, buffered={"message_count": 10,
                                                               "time_millis": 100})
        await eph.flush("eph.buffered")
        got = await eph.pop("eph.buffered", batch=100, auto_ack=True)
        r["buffered"] = [m["payload"]["b"] for m in got["messages"]]

        r["queues"] = await eph.queues()
        r["reset"] = await eph.reset("eph.work")
        r["reset_missing"] = await eph.reset("eph.nothing")
        r["delete"] = await eph.delete("eph.drop")
        r["delete_missing"] = await eph.delete("eph.nothing")
    return r


async def before_restart(url: str) -> dict:
    async with Queen(url) as q:
        eph = q.ephemeral
        await eph.configure("eph.kept", lease_seconds=30)
        await eph.push("eph.kept", [{"a": 1}])
        await eph.push("eph.implicit", [{"b": 1}])
        popped = await eph.pop("eph.kept")
        return {"ids": [m["id"] for m in popped["messages"]]}


async def after_restart(url: str, ids: list[str]) -> dict:
    r: dict = {}
    async with Queen(url) as q:
        eph = q.ephemeral
        r["ack"] = await eph.ack("eph.kept", ids)
        r["pop"] = (await eph.pop("eph.kept"))["messages"]
        r["queues"] = [(x["queue"], x["tier"], x["depth"]) for x in
                       (await eph.queues())["queues"]]
        try:
            await eph.depth("eph.implicit")
        except EphemeralQueueNotFoundError as exc:
            r["implicit"] = exc.code
    return r


async def relay_flow(push_url: str, pop_url: str) -> dict:
    """Push through one process, consume through the other, competing in one group."""
    r: dict = {}
    async with Queen(push_url) as producer, Queen(pop_url) as consumer:
        woke = asyncio.create_task(consumer.ephemeral.pop("eph.rr", wait=True, timeout=20000))
        await asyncio.sleep(0.3)
        await producer.ephemeral.push("eph.rr", {"req": 1})
        got = await woke
        r["woken"] = [m["payload"] for m in got["messages"]]
        r["ack"] = await producer.ephemeral.ack("eph.rr", got["messages"])
        await producer.ephemeral.push("eph.many", [{"i": i} for i in range(60)])
        seen: list = []

        async def worker(client: Queen) -> None:
            while True:
                got = await client.ephemeral.pop("eph.many", group="g", batch=4)
                if not got["messages"]:
                    return
                seen.extend(m["payload"]["i"] for m in got["messages"])
                await client.ephemeral.ack("eph.many", got["messages"], group="g")

        await asyncio.gather(worker(producer), worker(consumer), worker(producer),
                             worker(consumer))
        r["competing"] = seen
        r["depth"] = await consumer.ephemeral.depth("eph.many")
    return r


if __name__ == "__main__":
    flow = sys.argv[2] if len(sys.argv) > 2 else "main"
    if flow == "main":
        result = asyncio.run(main_flow(sys.argv[1]))
    elif flow == "before":
        result = asyncio.run(before_restart(sys.argv[1]))
    elif flow == "after":
        result = asyncio.run(after_restart(sys.argv[1], json.loads(sys.argv[3])))
    else:
        result = asyncio.run(relay_flow(sys.argv[1], sys.argv[3]))
    print(json.dumps(result, default=str))
