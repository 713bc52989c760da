"""Real data for the dashboard's browser tests and screenshots, made through the HTTP API:
queues with partitions, consumer groups at different places, a dead letter, a trace across
two queues, and (on request) a message whose payload and partition name are hostile HTML."""

from __future__ import annotations

from typing import Any

import attrs
import httpx

HOSTILE_PARTITION = "<script>window.__pwned='partition'</script>"
HOSTILE_PAYLOAD = {"note": "<script>window.__pwned='payload'</script>",
                   "img": "<img src=x onerror=\"window.__pwned='img'\">"}
TRACE = "order-7-flow"


@attrs.frozen
class Seeded:
    dead_letter: dict[str, Any]  # {partitionId, transactionId, queue, partition, group}
    trace_events: list[str]  # the trace's event types, in the order they were recorded
    hostile: dict[str, Any] | None  # {partitionId, transactionId} of the hostile message


async def push(client: httpx.AsyncClient, queue: str, partition: str, tx: str,
               payload: Any) -> None:
    reply = await client.post("/api/v1/push", json={"items": [
        {"queue": queue, "partition": partition, "transactionId": tx, "payload": payload}]})
    assert reply.status_code == 201, reply.text


async def pop(client: httpx.AsyncClient, queue: str, group: str | None,
              batch: int = 1) -> dict[str, Any]:
    reply = await client.get(f"/api/v1/pop/queue/{queue}",
                             params={"batch": batch, **({"consumerGroup": group} if group else {})})
    assert reply.status_code == 200, reply.text
    return reply.json()  # type: ignore[no-any-return]


async def ack(client: httpx.AsyncClient, delivery: dict[str, Any], status: str,
              error: str | None = None) -> None:
    reply = await client.post("/api/v1/ack/batch", json={
        "consumerGroup": delivery["consumerGroup"], "acknowledgments": [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
             "leaseId": m["leaseId"], "status": status, "error": error}
            for m in delivery["messages"]]})
    assert reply.status_code == 200 and all(a["success"] for a in reply.json()), reply.text


async def trace(client: httpx.AsyncClient, message: dict[str, Any], event: str,
                data: Any, group: str | None) -> None:
    reply = await client.post("/api/v1/traces", json={
        "transactionId": message["transactionId"], "partitionId": message["partitionId"],
        "data": data, "eventType": event, "traceNames": [TRACE], "consumerGroup": group})
    assert reply.status_code == 201, reply.text


async def seed(client: httpx.AsyncClient, *, hostile: bool = False) -> Seeded:
    await client.post("/api/v1/configure", json={"queue": "orders.created",
                                                   "options": {"leaseTime": 120, "retryLimit": 2}})
    for n in range(1, 7):
        await push(client, "orders.created", f"customer-{n % 3}", f"order-{n}",
                   {"orderId": n, "amountCents": n * 1250, "items": [{"sku": f"sku-{n}", "qty": n}]})
    for n in range(1, 4):
        await push(client, "emails.welcome", "Default", f"welcome-{n}",
                   {"to": f"user{n}@example.com"})
    await push(client, "invoices", "Default", "invoice-1", {"invoice": 1})

    # billing reads orders: the first delivery is charged and emailed, then a poison message.
    first = await pop(client, "orders.created", "billing")
    charged = first["messages"][0]
    await trace(client, charged, "received", {"step": "received"}, "billing")
    await trace(client, charged, "charged", {"step": "charged", "amountCents": 1250}, "billing")
    await ack(client, first, "completed")
    second = await pop(client, "orders.created", "billing")
    poison = second["messages"][0]
    await ack(client, second, "dlq", "card declined: insufficient funds")
    # audit joins orders and reads nothing yet; emails are read in queue mode.
    await pop(client, "orders.created", "audit")  # leased: one message in flight
    welcome = await pop(client, "emails.welcome", None)
    await trace(client, welcome["messages"][0], "emailed", {"template": "welcome"}, None)
    await ack(client, welcome, "completed")

    hostile_ids = None
    if hostile:
        await push(client, "hostile", HOSTILE_PARTITION, "hostile-1", HOSTILE_PAYLOAD)
        listed = (await client.get("/api/v1/status/queues/hostile/messages")).json()
        hostile_ids = {"partitionId": listed[0]["partitionId"], "transactionId": "hostile-1"}
    # One sample now, so the curves and the broker processes have a point.
    assert (await client.post("/api/v1/stats/refresh")).status_code == 200
    return Seeded(
        dead_letter={"partitionId": poison["partitionId"],
                     "transactionId": poison["transactionId"], "queue": "orders.created",
                     "partition": poison["partition"], "group": "billing"},
        trace_events=["received", "charged", "emailed"],
        hostile=hostile_ids)
