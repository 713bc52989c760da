"""The official client's admin and consumer-group calls (queen-mq 2.6.0), unchanged, against
a broker; prints one JSON report."""

from __future__ import annotations

import asyncio
import json
import sys

from queen import Queen


async def main(url: str) -> dict:
    r: dict = {}
    async with Queen(url) as q:
        await q.queue("adm.jobs").config({"retry_limit": 0}).create()
        await q.queue("adm.jobs").partition("p1").push([{"data": {"n": n}} for n in range(4)])
        await q.queue("adm.jobs").partition("p2").push([{"data": {"n": 9}}])
        popped = await q.queue("adm.jobs").partition("p1").group("workers").batch(2).wait(
            False).pop()
        await q.ack(popped[0], True, {"group": "workers"})
        await q.ack(popped[1], "dlq", {"group": "workers", "error": "broken"})
        a = q.admin
        r["overview"] = await a.get_overview()
        r["namespaces"] = await a.get_namespaces()
        r["tasks"] = await a.get_tasks()
        r["queues"] = await a.list_queues(limit=10)
        r["queue"] = await a.get_queue("adm.jobs")
        r["depth"] = await a.get_queue_depth("adm.jobs")
        r["depth_group"] = await a.get_queue_depth("adm.jobs", "workers")
        r["partitions"] = await a.get_partitions(queue="adm.jobs")
        r["messages"] = await a.list_messages(queue="adm.jobs", limit=10)
        first = popped[0]
        r["message"] = await a.get_message(first["partitionId"], first["transactionId"])
        dead = popped[1]
        r["retry"] = await a.retry_message(dead["partitionId"], dead["transactionId"])
        copy = await q.queue("adm.jobs").partition("p1").group("workers").batch(5).wait(
            False).pop()
        r["retried_copy"] = [(m["transactionId"], m["data"]) for m in copy]
        await q.ack(copy, True, {"group": "workers"})
        r["dlq_after_retry"] = (await q.queue("adm.jobs").dlq("workers").limit(10).get()).get(
            "total")
        await q.queue("adm.jobs").partition("p1").push([{"data": {"n": "gone"}}])
        gone = (await a.list_messages(queue="adm.jobs", partition="p1", limit=1))["messages"][0]
        r["deleted"] = await a.delete_message(gone["partitionId"], gone["transactionId"])
        r["messages_after_delete"] = len(
            (await a.list_messages(queue="adm.jobs", limit=100))["messages"])
        r["status"] = await a.get_status()
        r["queue_stats"] = await a.get_queue_stats(limit=10)
        r["queue_detail"] = await a.get_queue_detail("adm.jobs")
        r["analytics"] = await a.get_analytics(interval="hour")
        r["refresh"] = await a.refresh_consumer_stats()
        r["groups"] = await a.list_consumer_groups()
        r["group"] = await a.get_consumer_group("workers")
        r["lagging"] = await a.get_lagging_consumers(0)
        r["seek"] = await a.seek_consumer_group("workers", "adm.jobs", {"toEnd": True})
        r["health"] = await a.health()
        r["metrics"] = await a.metrics()
        r["system"] = await a.get_system_metrics()
        r["worker"] = await a.get_worker_metrics()
        r["timestamp"] = await q.update_consumer_group_timestamp("workers",
                                                                 "2000-01-01T00:00:00Z")
        r["delete_for_queue"] = await a.delete_consumer_group_for_queue(
            "workers", "adm.jobs", delete_metadata=False)
        r["delete"] = await q.delete_consumer_group("workers")
        r["delete_unknown"] = await q.delete_consumer_group("never-existed")
        r["groups_after"] = await a.list_consumer_groups()
    return r


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1])), default=str))
