"""examples/producer.py and examples/worker.py, as printed, against a broker on a real port
(issue 25, point 5): the official client's consume() works on the first try, and a second run
pushes and handles new orders (its transaction ids are its own)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


async def run_example(script: str, *args: str) -> list[dict]:
    done = await trio.run_process([sys.executable, str(EXAMPLES / script), *args],
                                  capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    return [json.loads(line) for line in done.stdout.decode().splitlines()
            if line.startswith("{")]


async def test_the_producer_and_the_worker_work_on_the_first_try_and_the_second(http_url):
    for _ in range(2):
        pushed = await run_example("producer.py", "--url", http_url)
        assert [p["status"] for p in pushed] == ["queued"] * 10
        orders = [p["pushed"] for p in pushed]
        assert {p["partition"] for p in pushed} == {"customer-0", "customer-1", "customer-2"}

        lines = await run_example("worker.py", "--url", http_url, "--idle", "1")
        billing = [line for line in lines if line["group"] == "billing"]
        charged = [line["charged"] for line in billing if "charged" in line]
        assert sorted(charged) == sorted(orders[:9])
        assert [line["failed"] for line in billing if "failed" in line] == [orders[9]]
        # Each group sees every order; within a partition, in order.
        assert sorted(line["recorded"] for line in lines if line["group"] == "audit") == \
            sorted(orders)
        for partition in ("customer-0", "customer-1", "customer-2"):
            mine = [line["charged"] for line in billing
                    if line.get("partition") == partition]
            assert mine == [o for o in orders[:9] if o in mine]
        dead = {line["dead_letter"]: line["error"] for line in billing if "dead_letter" in line}
        assert dead[orders[9]] == f"order {orders[9]} has a negative amount"
