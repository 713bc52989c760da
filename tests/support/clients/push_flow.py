"""Drive the broker with the official client (queen-mq), unchanged; print one JSON report.

Run as a subprocess: the client installs signal handlers, which only a main thread may do.
"""

from __future__ import annotations

import asyncio
import json
import sys

from queen import Queen


async def main(url: str) -> dict:
    report: dict = {}
    async with Queen(url) as client:
        created = await client.queue("client.orders").config({"lease_time": 120,
                                                              "retry_limit": 2}).create()
        report["created"] = created
        first = await client.queue("client.orders").partition("c-1").push(
            [{"transactionId": "order-1", "data": {"orderId": 1, "total": 1.50}},
             {"data": {"orderId": 2}}])
        report["first"] = first
        again = await client.queue("client.orders").partition("c-1").push(
            [{"transactionId": "order-1", "data": {"orderId": 1}}])
        report["again"] = again
        report["default_partition"] = await client.queue("client.orders").push(
            {"data": "just a string"})
        # Buffered push: kept in the client, flushed as one POST.
        for n in range(25):
            await client.queue("client.buffered").buffer(
                {"message_count": 100, "time_millis": 60_000}).push({"data": {"n": n}})
        await client.flush_all_buffers()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
