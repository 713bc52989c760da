"""The dashboard's Timers pages in a real headless Chromium: pending timers per queue, one
queue's timers with a payload and a cancel, and the queue page's Timers card."""

from __future__ import annotations

import base64
import json


def sched(queue, key, value, delay_ms):
    return {"op": "schedule", "queue": queue, "timerKey": key, "delayMs": delay_ms,
            "payload": base64.b64encode(json.dumps(value).encode()).decode(),
            "txn": f"txn-{key}"}


async def test_the_timers_pages_show_pending_timers_their_payload_and_cancel(browser, client,
                                                                            http_url):
    await client.post("/api/v1/push", json={"items": [{"queue": "orders", "payload": 1}]})
    r = await client.post("/api/v1/timers", json={"operations": [
        sched("orders", "order-1/expire", {"order": 1, "action": "expire"}, 1_800_000),
        sched("orders", "order-2/expire", {"order": 2}, 3_600_000),
        sched("reminders", "user-7", {"remind": "renew"}, 86_400_000)]})
    assert r.status_code == 200
    await browser.start(http_url, "timers")
    await browser.loaded("timers")
    assert await browser.console_errors() == []
    rows = [t for t in await browser.texts("[aria-labelledby=timer-queues] tbody tr") if t]
    assert rows[0].startswith("orders") and "2" in rows[0] and "in 30 min" in rows[0]
    assert rows[1].startswith("reminders")
    await browser.screenshot("timers")

    await browser.goto("timers/orders")
    await browser.loaded("timers")
    text = await browser.text("[aria-labelledby=timers]")
    assert "order-1/expire" in text and "txn-order-2/expire" in text and "scheduled" in text
    await browser.click("[data-key='peek-order-1/expire']")
    await browser.wait(lambda d: '"action": "expire"' in d.find_element(
        "css selector", "[aria-labelledby=timers]").text)
    await browser.screenshot("timers-queue")
    await browser.click("[data-key='cancel-orders-order-1/expire']")
    assert "Cancels timer order-1/expire of orders" in await browser.text("dialog")
    await browser.click("dialog button[type=submit]")
    await browser.wait(lambda d: "order-1/expire" not in d.find_element(
        "css selector", "[aria-labelledby=timers]").text)
    assert (await client.get("/api/v1/timers/orders/order-1/expire")).json()["found"] is False
    assert await browser.console_errors() == []

    await browser.goto("queues/orders")
    await browser.loaded("queue")
    assert "1 pending; next due" in await browser.text("[aria-labelledby=queue-timers]")
    await browser.screenshot("queue-timers")
    assert await browser.console_errors() == []
