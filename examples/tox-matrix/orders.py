"""A tiny producer/consumer app on queen-trio: the shop places orders, the warehouse ships
them. Plain HTTP (httpx), so the tests can run it against a real broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

QUEUE = "orders"
WAREHOUSE = "warehouse"


def place_order(client: httpx.Client, order_id: int, items: list[str]) -> str:
    """Push the order; placing it twice is harmless (its transaction id is the order's)."""
    r = client.post("/api/v1/push", json={"items": [{
        "queue": QUEUE, "transactionId": f"order-{order_id}",
        "payload": {"order": order_id, "items": items}}]})
    r.raise_for_status()
    return str(r.json()[0]["status"])


def ship_orders(client: httpx.Client, ship: Callable[[dict[str, Any]], None], *,
                batch: int = 10) -> int:
    """Ship what is waiting; an order whose shipping fails is retried later. The number
    shipped."""
    r = client.get(f"/api/v1/pop/queue/{QUEUE}",
                   params={"consumerGroup": WAREHOUSE, "batch": str(batch)})
    if r.status_code == 204:
        return 0
    r.raise_for_status()
    shipped = 0
    for message in r.json()["messages"]:
        try:
            ship(message["data"])
        except Exception as exc:
            status, error = "failed", str(exc)
        else:
            status, error, shipped = "completed", None, shipped + 1
        client.post("/api/v1/ack", json={
            "transactionId": message["transactionId"], "partitionId": message["partitionId"],
            "leaseId": message["leaseId"], "consumerGroup": WAREHOUSE, "status": status,
            "error": error}).raise_for_status()
    return shipped
