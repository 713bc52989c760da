"""The official client's coordination surface (queen-mq 2.6.0, unchanged) against a broker:
client.kv, client.lock, client.semaphore, tx.once, tx.guard and a consume with supervision().
argv: one or more broker URLs (with several, the client spreads its calls over them).
Prints one JSON report."""

from __future__ import annotations

import asyncio
import json
import sys

from queen import Queen


def refusal(exc: BaseException) -> dict:
    response = getattr(exc, "response", None)
    return {"type": type(exc).__name__, "code": getattr(exc, "code", None),
            "reason": getattr(exc, "reason", None),
            "status": getattr(response, "status_code", None)}


async def main(urls: list[str]) -> dict:
    r: dict = {}
    async with Queen(urls if len(urls) > 1 else urls[0]) as q:
        kv = q.kv
        put = await kv.put("flow", "a", {"n": 1}, forever=True)
        r["put"] = {"applied": bool(put), "version": put["version"]}
        got = await kv.get("flow", "a")
        r["get"] = {"found": bool(got), "value": got["value"], "version": got["version"]}
        r["get_missing"] = bool(await kv.get("flow", "missing"))
        r["cas_stale"] = dict(await kv.put("flow", "a", 2, forever=True, expect=put["version"] + 99))
        r["cas_ok"] = bool(await kv.put("flow", "a", 2, forever=True, expect=put["version"]))
        r["pia_first"] = bool(await kv.put_if_absent("flow", "p", "x", ttl_seconds=30))
        r["pia_second"] = dict(await kv.put_if_absent("flow", "p", "y", ttl_seconds=30))
        r["incr"] = [dict(await kv.incr("flow", "n", delta=1, max=2, ttl_seconds=30))["applied"]
                     for _ in range(3)]
        r["check"] = bool(await kv.check("flow", "a", expect=0))
        r["delete"] = bool(await kv.delete("flow", "p"))
        r["delete_again"] = dict(await kv.delete("flow", "p"))
        many = await kv.get_many("flow", ["a", "zz"])
        r["get_many"] = {"rows": [row["key"] for row in many["rows"]], "missing": many["missing"]}
        for n in range(5):
            await kv.put("flow", f"list/{n}", n, forever=True)
        page = await kv.get_prefix("flow", "list/", limit=2)
        r["get_prefix"] = {"keys": [row["key"] for row in page["rows"]],
                           "truncated": page["truncated"]}
        r["list_all"] = [row["key"] for row in await kv.list_all("flow", "list/", limit=2)]
        r["once"] = [await kv.once("flow", "job-9", forever=True),
                     await kv.once("flow", "job-9", forever=True)]
        try:
            await kv.put("Flow", "a", 1, forever=True)
        except Exception as exc:  # noqa: BLE001 -- the refusal is what is reported
            r["bad_ns"] = refusal(exc)

        # tx.once alone, then again: the second commits nothing.
        first = await q.transaction().once("flow", "tx-1", forever=True).commit()
        second = await (q.transaction().once("flow", "tx-1", forever=True)
                        .queue("flow.once").push([{"data": {"n": 1}}]).commit())
        r["tx_once"] = [bool(first), bool(second), second.get("reason"), second.get("kvReason")]
        r["tx_once_pushed"] = await q.queue("flow.once").batch(5).wait(False).pop()

        # A lock, a guarded transaction, a second handle refused, a semaphore.
        lock = q.lock("flow-lock", ttl_seconds=2)
        r["lock_acquired"] = await lock.acquire()
        r["lock_token"] = lock.token
        other = q.lock("flow-lock", ttl_seconds=2)
        r["other_acquired"] = await other.acquire()
        tx = await (q.transaction().guard(lock).queue("flow.guarded").push([{"data": 1}])
                    .kv.incr("flow", "guarded", delta=1, forever=True).commit())
        r["guarded"] = bool(tx)
        await lock.renew()
        r["token_after_renew"] = lock.token
        r["lock_get"] = dict(await q.locks.get("flow-lock"))["holders"][0]["token"]
        r["released"] = await lock.release()
        sem = [q.semaphore("flow-sem", 2, ttl_seconds=2) for _ in range(3)]
        r["semaphore"] = [await s.acquire() for s in sem]
        for s in sem:
            if s.held:
                await s.release()

        # A consume with supervision: its records land in KV while it runs.
        await q.queue("flow.sup").push([{"data": {"n": 1}}])
        handled: list = []

        async def handler(message):
            handled.append(message)

        await (q.queue("flow.sup").supervision({"group": "flow-app"}).limit(1).wait(True)
               .timeout_millis(2000).each().consume(handler))
        rows = await kv.get_prefix("queen-supervisor", "flow-app/", limit=10)
        r["supervision_keys"] = sorted(row["key"].split("/", 2)[2] for row in rows["rows"])
    return r


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:])), default=str))
