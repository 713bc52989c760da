"""Refresh the dashboard's screenshots in docs/dashboard/ (docs/dashboard.md shows them).

    python bench/screenshots.py [--out docs/dashboard]

A broker (its own embedded PostgreSQL, or DATABASE_URL) gets the browser tests' data
(tests/support/dashboard.py) and six hours of samples (bench/dashboard_data.py, so the curves
have a shape), then a headless Chromium takes every page at 1280 px, a few at phone width and
in dark mode, and the seek and push dialogs. The tests take the same pages into
$QUEEN_SCREENSHOT_DIR when it is set.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import time
from pathlib import Path

import httpx
import trio
from common import ROOT, broker, database, log
from dashboard_data import write_samples

sys.path.insert(0, str(ROOT))
from tests.support.browser import DESKTOP, LOADED, PHONE, chromium  # noqa: E402
from tests.support.dashboard import TRACE, seed  # noqa: E402


def pages(dead: dict[str, str]) -> list[tuple[str, str, str]]:
    message = f"messages/{dead['partitionId']}/{dead['transactionId']}"
    return [("overview", "", "overview"), ("queues", "queues", "queues"),
            ("queue", "queues/orders.created", "queue"), ("groups", "groups", "groups"),
            ("group", "groups/billing", "group"),
            ("messages", "messages?queue=orders.created", "messages"),
            ("message", message, "message"), ("dlq", "dlq", "dlq"), ("traces", "traces", "traces"),
            ("trace", f"traces/{TRACE}", "trace"),
            ("analytics", "analytics?scope=namespace&name=orders&range=6h", "analytics"),
            ("system", "system", "system")]


def shoot(driver, out: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    time.sleep(0.3)  # the last frame of a chart's first draw
    shot = driver.execute_cdp_cmd("Page.captureScreenshot",
                                  {"format": "png", "captureBeyondViewport": True})
    (out / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))
    log(f"  {name}.png")


def visit(driver, route: str, page: str) -> None:  # type: ignore[no-untyped-def]
    driver.execute_script("delete document.getElementById('main').dataset.loaded;"
                          "location.hash = arguments[0];", f"#/{route}")
    deadline = time.monotonic() + 20
    while driver.execute_script(LOADED) != page:
        if time.monotonic() > deadline:
            raise SystemExit(f"{route} never loaded")
        time.sleep(0.05)
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    if errors:
        raise SystemExit(f"console errors on {route}: {errors}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with database() as url, broker(url) as (base, _proc, _):
        async def populate():  # type: ignore[no-untyped-def]
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                return await seed(client)

        seeded = trio.run(populate)
        asyncio.run(write_samples(url, hours=6, busy_queues=3, worker_id="demo-host:2"))
        log(f"writing {args.out}")
        with chromium(DESKTOP) as driver:
            driver.get(f"{base}/")
            for name, route, page in pages(seeded.dead_letter):
                visit(driver, route, page)
                shoot(driver, args.out, name)
            visit(driver, "groups/billing", "group")
            driver.find_element("css selector", "[data-key='seek-billing-orders.created-']").click()
            shoot(driver, args.out, "seek-dialog")
            driver.find_element("css selector", "dialog button.cancel").click()
            visit(driver, "queues/orders.created", "queue")
            driver.find_element("css selector", "#push-open").click()
            shoot(driver, args.out, "push-dialog")
            driver.find_element("css selector", "dialog button.cancel").click()
            driver.find_element("css selector", "#theme").click()
            driver.find_element("css selector", "#theme").click()  # auto -> light -> dark
            for name, route, page in [("overview-dark", "", "overview"),
                                      ("trace-dark", f"traces/{TRACE}", "trace")]:
                visit(driver, route, page)
                shoot(driver, args.out, name)
            driver.find_element("css selector", "#theme").click()  # back to auto
            driver.set_window_size(*PHONE)
            for name, route, page in [("overview-phone", "", "overview"),
                                      ("queue-phone", "queues/orders.created", "queue")]:
                visit(driver, route, page)
                shoot(driver, args.out, name)


if __name__ == "__main__":
    main()
