"""A known state to read the operations routes against (docs/api.md: Resources).

Queue "shop.orders", group g1:
  partition a: 5 messages; g1 popped 3 and acked the first 2   -> 1 in flight, 2 pending
  partition b: 3 messages; g1 dead-lettered the first          -> 1 dead letter, 2 pending
  partition c: 2 messages; g1 popped both and nacked them      -> 2 pending, 1 failed delivery
Queue "plain": 2 messages, no consumer                          -> 2 pending
"""

from __future__ import annotations

from typing import Any

from tests.support.consuming import ack, ack_batch, pop, push

GROUP = "g1"


async def known_state(client: Any) -> dict[str, Any]:
    await push(client, "shop.orders", *range(5), partition="a")
    await push(client, "shop.orders", *range(3), partition="b")
    await push(client, "shop.orders", *range(2), partition="c")
    await push(client, "plain", "x", "y")
    a = await pop(client, "shop.orders", "a", batch=3, consumerGroup=GROUP)
    for message in a["messages"][:2]:
        assert (await ack(client, message, group=GROUP))["success"]
    b = await pop(client, "shop.orders", "b", batch=1, consumerGroup=GROUP)
    assert (await ack(client, b["messages"][0], "dlq", group=GROUP, error="bad"))["dlq"]
    c = await pop(client, "shop.orders", "c", batch=2, consumerGroup=GROUP)
    results = await ack_batch(client, c["messages"], "failed", group=GROUP)
    assert all(r["success"] for r in results)
    return {"a": a, "b": b, "c": c}
