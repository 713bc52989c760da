"""Push orders to queen-trio with the official Python client (`pip install queen-mq`, 2.6).

    python examples/producer.py                 # 10 orders to http://localhost:6632
    python examples/producer.py --orders 100 --url http://broker:6632

Each customer's orders go to a partition of their own (`customer-N`): one partition delivers in
order, to one consumer at a time, and different partitions go to different consumers in
parallel. Each order carries a transaction id made fresh for this run, so running the script
again pushes new orders instead of duplicates (the broker drops a transaction id it saw within
the queue's dedup window, an hour by default). Every tenth order is broken (a negative amount):
examples/worker.py fails on it, and the broker moves it to the dead-letter queue.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

from queen import Queen

QUEUE = "orders"
CUSTOMERS = 3


async def main(url: str, orders: int) -> None:
    run = uuid.uuid4().hex[:8]  # a fresh transaction id per order and per run
    async with Queen(url) as queen:
        # retry_limit 0: a message whose handler fails once goes to the dead-letter queue.
        await queen.queue(QUEUE).config({"retry_limit": 0, "lease_time": 30}).create()
        for n in range(orders):
            customer = f"customer-{n % CUSTOMERS}"
            order = {"orderId": f"{run}-{n}", "customer": customer,
                     "amount": -1 if n % 10 == 9 else 10 + n}
            result = await queen.queue(QUEUE).partition(customer).push(
                [{"transactionId": order["orderId"], "data": order}])
            print(json.dumps({"pushed": order["orderId"], "partition": customer,
                              "status": result[0]["status"]}), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:6632")
    parser.add_argument("--orders", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.orders))
