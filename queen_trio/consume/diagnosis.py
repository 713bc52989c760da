"""Why a pop found nothing, in words: asked only when debug logging is on (it costs a query).

The reasons mirror the claim's conditions (queen.pop_claim): no such queue, nothing pending,
every pending partition leased, delayed (`delayedProcessing`), held by the window buffer,
waiting out a retry delay, before the group's subscription start, or skipped because a
concurrent pop was claiming it.
"""

from __future__ import annotations

from ..storage.database import Database
from ..storage.sql import Q
from ..wire import format_millis


def _partitions(n: int) -> str:
    return f"{n} partition{'' if n == 1 else 's'}"


async def why_nothing(db: Database, queue: str | None, partition: str | None,
                      namespace: str | None, task: str | None, group: str) -> list[str]:
    """One sentence per queue and reason, e.g. "orders: 2 partitions leased until ..."."""
    rows = await db.fetch(Q.pop_nothing_why, queue=queue, partition=partition,
                          namespace=namespace, task=task, consumer_group=group)
    if not rows:
        if queue is not None:
            return [f"{queue}: no such queue"]
        return ["no queue matches the namespace and task"]
    reasons = []
    for row in rows:
        until = f" until {format_millis(row['until'])}" if row["until"] is not None else ""
        reason, held = row["reason"], _partitions(row["partitions"])
        text = {
            "no such partition": f"no partition named {partition!r}",
            "subscription start": f"nothing pending since the group's subscription start"
                                  f"{until.replace(' until', '')}",
            "nothing pending": "nothing pending",
            "leased": f"{held} leased{until}",
            "retry delay": f"{held} waiting out a retry delay{until}",
            "delayed": f"{held} delayed by delayedProcessing{until}",
            "window buffer": f"{held} held by the window buffer{until}",
        }.get(reason, f"{held} {reason}")
        reasons.append(f"{row['queue']}: {text}")
    return reasons
