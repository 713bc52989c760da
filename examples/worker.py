"""Handle orders from queen-trio with the official Python client (`pip install queen-mq`, 2.6).

    python examples/worker.py                   # runs until Ctrl-C
    python examples/worker.py --idle 5          # stops after 5 s without a message

Two consumer groups read the same queue, each at its own pace: `billing` charges every order,
`audit` records every order. Within a group each message is delivered to one consumer; start
the script twice and the partitions are shared out between the two.

`.each()` hands the handler one message at a time; without it (and without `.batch(1)`) 2.6's
`consume()` hands it a *list*, even of one message. When the handler returns, the client acks
the message; when it raises, the client nacks it, and with the queue's `retry_limit` 0 (see
examples/producer.py) the broker dead-letters it at once. The client does not print what the
handler raised (set QUEEN_CLIENT_LOG=true to see its log): this script prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from queen import Queen

QUEUE = "orders"


class BadOrder(Exception):
    pass


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def charge(message: dict) -> None:
    order = message["data"]
    if order["amount"] < 0:
        say(group="billing", failed=order["orderId"], error="negative amount")
        raise BadOrder(f"order {order['orderId']} has a negative amount")
    say(group="billing", charged=order["orderId"], amount=order["amount"],
        partition=message["partition"])


async def record(message: dict) -> None:
    say(group="audit", recorded=message["data"]["orderId"])


async def main(url: str, idle_seconds: float | None) -> None:
    async with Queen(url) as queen:
        def consumer(group: str):
            builder = (queen.queue(QUEUE).group(group)
                       .each()          # one message per handler call
                       .partitions(4)   # a pop may take up to 4 partitions (parallel work)
                       .batch(10))      # and up to 10 messages across them
            if idle_seconds is not None:  # a long poll no longer than the idle time
                millis = int(idle_seconds * 1000)
                builder = builder.idle_millis(millis).timeout_millis(millis)
            return builder

        await asyncio.gather(consumer("billing").consume(charge),
                             consumer("audit").consume(record))
        # What failed is in the dead-letter queue, with the error the handler raised.
        dead = await queen.queue(QUEUE).dlq("billing").limit(100).get()
        for letter in dead.get("messages", []):
            say(group="billing", dead_letter=letter["data"]["orderId"],
                error=letter.get("errorMessage"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:6632")
    parser.add_argument("--idle", type=float, default=None, metavar="SECONDS",
                        help="stop after this many seconds without a message")
    args = parser.parse_args()
    try:
        asyncio.run(main(args.url, args.idle))
    except KeyboardInterrupt:
        pass
