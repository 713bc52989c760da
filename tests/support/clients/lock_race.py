"""One competitor of the lock-safety test (queen-mq 2.6.0, unchanged). argv: mode, rounds,
then broker URLs. Each round: acquire the lock "race" (TTL 1 s), read the counter, and commit
`counter + 1` under tx.guard(lock); a line `RACE <json>` per guarded commit:
{"token", "wrote", "success", "kvReason"}.

Modes: `work` (renews in the background, releases after each round); `pause` (no renewals:
sleeps 2.5 s between taking its guard and sending its commit, past its TTL, while others take
the lock);
`hold` (acquires, prints {"holding": token}, then sleeps until it is killed)."""

from __future__ import annotations

import asyncio
import json
import sys

from queen import Queen


def say(**fields: object) -> None:
    print("RACE " + json.dumps(fields), flush=True)


async def main(mode: str, rounds: int, urls: list[str]) -> None:
    async with Queen(urls if len(urls) > 1 else urls[0]) as q:
        for _ in range(rounds):
            lock = q.lock("race", ttl_seconds=1, auto_renew=mode != "pause")
            if not await lock.acquire(wait=20):
                say(acquired=False)
                continue
            token = lock.token
            if mode == "hold":
                say(holding=token)
                await asyncio.sleep(3600)
            current = await q.kv.get("race", "counter")
            n = current["value"] if current else 0
            if mode == "pause":
                # A holder frozen between building its bundle and the broker judging it: the
                # guard it built while it held the permit arrives after the permit moved on.
                guard = lock.guard()
                await asyncio.sleep(2.5)
                tx = q.transaction().kv.check(guard["ns"], guard["key"], expect=guard["expect"],
                                              required=True)
            elif lock.held:
                tx = q.transaction().guard(lock)
            else:
                say(lost_before_commit=token)
                continue
            result = await tx.kv.put("race", "counter", n + 1, forever=True).commit()
            say(token=token, wrote=n + 1, success=bool(result.get("success")),
                kvReason=result.get("kvReason"))
            if lock.held:
                await lock.release()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
