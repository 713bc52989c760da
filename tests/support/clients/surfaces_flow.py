"""What a newcomer meets with the official client (queen-mq 2.6.0), unchanged: what consume()
hands its handler when nothing sets the batch, and the 2.6 surfaces this broker does not have.
Prints one JSON report."""

from __future__ import annotations

import asyncio
import json
import sys

from queen import Queen


def refusal(exc: BaseException) -> dict:
    response = getattr(exc, "response", None)
    return {"type": type(exc).__name__, "code": getattr(exc, "code", None),
            "status": getattr(response, "status_code", None),
            "body": response.json() if response is not None else None}


async def main(url: str) -> dict:
    r: dict = {}
    async with Queen(url) as q:
        # Neither .batch() nor .each(): the broker sizes the batch and the handler gets a list,
        # even for a single message.
        await q.queue("sf.plain").push([{"data": {"n": 1}}])
        handed: list = []

        async def handler(messages):
            handed.append(type(messages).__name__)

        await q.queue("sf.plain").limit(1).wait(True).timeout_millis(2000).consume(handler)
        r["consume_handed"] = handed

        # Ephemeral queues are built (docs/ephemeral.md).
        r["ephemeral"] = await q.ephemeral.push("sf.presence", [{"user": "a"}])
        # KV is built (docs/kv-and-locks.md): a missing key is a result, not an error.
        r["kv"] = dict(await q.kv.get("sf", "key"))
        # A transaction's kv rider is honoured: the gate holds the second time.
        results = []
        for _ in range(2):
            done = await (q.transaction().once("sf", "job-1", forever=True)
                          .queue("sf.once").push([{"data": {"n": 1}}]).commit())
            results.append(bool(done))
        r["once"] = results
        r["once_pushed"] = await q.queue("sf.once").batch(5).wait(False).pop()
        # Still healthy after both: a 404 is not counted against the broker.
        r["push_after"] = await q.queue("sf.plain").push([{"data": {"n": 2}}])
    return r


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1])), default=str))
