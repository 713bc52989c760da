"""Helpers for consumption tests: push, pop and ack over the ASGI client."""

from __future__ import annotations

from typing import Any


async def push(client, queue: str, *payloads: Any, partition: str = "Default",
               txids: list[str] | None = None) -> list[dict]:
    items = []
    for i, payload in enumerate(payloads):
        item = {"queue": queue, "partition": partition, "payload": payload}
        if txids:
            item["transactionId"] = txids[i]
        items.append(item)
    r = await client.post("/api/v1/push", json={"items": items})
    assert r.status_code == 201, r.text
    return r.json()


async def pop(client, queue: str, partition: str | None = None, **params: Any):
    path = f"/api/v1/pop/queue/{queue}" + (f"/partition/{partition}" if partition else "")
    # None leaves a parameter out (consumerGroup=None is queue mode, not a group named "None").
    query = {k: (str(v).lower() if isinstance(v, bool) else str(v))
             for k, v in params.items() if v is not None}
    r = await client.get(path, params=query, timeout=60)
    if r.status_code == 204:
        assert r.content == b""
        return None
    assert r.status_code == 200, r.text
    return r.json()


def data(reply) -> list[Any]:
    return [m["data"] for m in (reply or {"messages": []})["messages"]]


async def ack(client, message: dict, status: str = "completed", *, group: str | None = None,
              lease: bool = True, error: str | None = None) -> dict:
    body = {"transactionId": message["transactionId"], "partitionId": message["partitionId"],
            "status": status, "consumerGroup": group, "error": error}
    if lease:
        body["leaseId"] = message["leaseId"]
    r = await client.post("/api/v1/ack", json=body)
    assert r.status_code == 200, r.text
    (result,) = r.json()
    return result


async def ack_batch(client, messages: list[dict], status: str = "completed", *,
                    group: str | None = None, error: str | None = None) -> list[dict]:
    body = {"consumerGroup": group, "acknowledgments": [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
         "status": status, "leaseId": m["leaseId"], "error": error} for m in messages]}
    r = await client.post("/api/v1/ack/batch", json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def consume_all(client, queue: str, group: str | None, batch: int = 10) -> list[Any]:
    """Pop and ack (`/ack/batch`) until the group has nothing left; the payloads, in order."""
    got: list[Any] = []
    while (reply := await pop(client, queue, batch=batch, consumerGroup=group)) is not None:
        got += data(reply)
        await ack_batch(client, reply["messages"], group=group)
    return got


async def configure(client, queue: str, **options: Any) -> None:
    r = await client.post("/api/v1/configure", json={"queue": queue, "options": options})
    assert r.status_code == 200, r.text


def park_pop(nursery, client, queue: str, **params: Any) -> dict:
    """Start a long poll in `nursery`; its reply lands under "reply" in the returned dict."""
    result: dict = {}

    async def waiter() -> None:
        result["reply"] = await pop(client, queue, wait=True, timeout=20_000, **params)

    nursery.start_soon(waiter)
    return result
