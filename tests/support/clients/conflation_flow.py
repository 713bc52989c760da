"""Conflation through the official client (queen-mq 2.6.0), unchanged; prints a JSON report.
One raw request states `conflation=false` for the group `pinned` (the client never sends
`false`)."""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from queen import Queen


async def main(url: str) -> dict:
    r: dict = {}
    async with Queen(url) as q:
        await q.queue("cx.prices").config({"lease_time": 2}).create()
        async with httpx.AsyncClient(base_url=url) as raw:
            stated = await raw.get("/api/v1/pop/queue/cx.prices",
                                   params={"consumerGroup": "pinned", "conflation": "false"})
            r["pinned_stated"] = [stated.status_code, stated.json()]
        await q.queue("cx.prices").partition("eur").push([{"data": {"n": n}} for n in range(1, 6)])

        # The conflating group gets the newest of the partition, and acks it.
        latest = await q.queue("cx.prices").partition("eur").group("latest").conflation() \
            .batch(10).wait(False).pop()
        r["latest"] = [m["data"] for m in latest]
        r["latest_ack"] = await q.ack(latest, True, context={"group": "latest"})
        # Nothing left for it: an empty answer, not ConflationUnsupportedError, with or
        # without a long poll.
        r["latest_again"] = [m["data"] for m in await q.queue("cx.prices").group("latest")
                             .conflation().batch(10).wait(False).pop()]
        r["latest_waited"] = [m["data"] for m in await q.queue("cx.prices").group("latest")
                              .conflation().batch(10).wait(True).timeout_millis(300).pop()]
        # Another group, not conflating: every message.
        every = await q.queue("cx.prices").group("every").batch(10).wait(False).pop()
        r["every"] = [m["data"] for m in every]
        # The stored policy of `pinned` is "every message": the conflating declaration is
        # ignored (the client warns) and the oldest comes first.
        pinned = await q.queue("cx.prices").group("pinned").conflation().batch(1).wait(False).pop()
        r["pinned"] = [m["data"] for m in pinned]
        # consume() with conflation: the handler sees the newest only.
        await q.queue("cx.prices").partition("eur").push([{"data": {"n": n}} for n in (6, 7)])
        seen: list = []

        async def handler(messages):
            batch = messages if isinstance(messages, list) else [messages]
            seen.extend(m["data"] for m in batch)

        await q.queue("cx.prices").group("consumer").conflation().batch(10).limit(1) \
            .wait(True).timeout_millis(500).idle_millis(3000).consume(handler)
        r["consumed"] = seen
        # conflation with commit_on_delivery: the broker's 400, raised to the caller.
        try:
            await q.queue("cx.prices").group("auto").conflation().commit_on_delivery() \
                .wait(False).pop()
            r["auto_ack"] = "no error"
        except Exception as exc:  # the client raises the HTTP error
            r["auto_ack"] = getattr(getattr(exc, "response", None), "status_code", str(exc))
    return r


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
