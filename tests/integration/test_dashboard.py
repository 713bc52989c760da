"""The dashboard in a real headless Chromium against a real broker with real data.

One browser serves the whole module (tests/support/browser.py); each test has its own broker
on a real port and its own database. Every page is checked for console errors (a script
error, a failed request and a Content-Security-Policy violation all land there) and for the
values the API returns. Screenshots go to $QUEEN_SCREENSHOT_DIR when it is set.
"""

from __future__ import annotations

import json

import httpx
from selenium.webdriver.common.keys import Keys

from queen_trio.broker import open_broker
from queen_trio.settings import AuthSettings
from tests.support.auth import SECRET, bearer, token
from tests.support.brokers import make_settings, serve_on_port
from tests.support.browser import PHONE, Browser
from tests.support.dashboard import HOSTILE_PARTITION, TRACE, seed


async def visit(browser: Browser, route: str, page: str, shot: str | None = None) -> None:
    """Go to `route`, wait for its data, and check it logged no error and labels every
    control."""
    await browser.goto(route)
    await browser.loaded(page)
    assert await browser.console_errors() == []
    assert await browser.unlabelled() == []
    if shot:
        await browser.screenshot(shot)


async def row_texts(browser: Browser, css: str) -> list[str]:
    return [t for t in await browser.texts(css) if t]


async def test_the_page_is_served_at_the_root_with_a_strict_policy(client):
    for path in ("/", "/dashboard", "/dashboard/"):
        r = await client.get(path)
        assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
        assert r.headers["content-security-policy"].startswith("default-src 'self'")
        assert r.headers["x-content-type-options"] == "nosniff"
    page = r.text
    # No inline script or style: every script has a src, nothing carries style= or <style>.
    assert page.count("<script") == page.count("<script src=") + page.count(
        '<script type="module" src=')
    assert "style=" not in page and "<style" not in page and "://" not in page
    for asset in ("/dashboard/js/main.js", "/dashboard/app.css",
                  "/dashboard/vendor/uplot/uPlot.iife.min.js", "/dashboard/vendor/uplot/LICENSE"):
        a = await client.get(asset)
        assert a.status_code == 200, asset
        assert "content-security-policy" in a.headers
        again = await client.get(asset, headers={"if-none-match": a.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
    js = await client.get("/dashboard/js/main.js")
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    missing = await client.get("/dashboard/js/nope.js")
    assert missing.status_code == 404 and missing.json() == {"error": "No dashboard file js/nope.js"}


async def test_every_page_shows_what_the_api_returns(browser, client, http_url):
    seeded = await seed(client)
    await browser.start(http_url)
    await browser.loaded("overview")
    assert await browser.console_errors() == []
    overview = (await client.get("/api/v1/resources/overview")).json()
    assert await browser.text("[data-tile=queues] dd") == str(overview["queues"])
    assert await browser.text("[data-tile=total] dd") == str(overview["messages"]["total"])
    assert await browser.text("[data-tile=deadLetter] dd") == "1"
    assert "orders.created" in await browser.text("#main")  # top queues by pending
    await browser.screenshot("overview")

    await visit(browser, "queues", "queues", "queues")
    listed = (await client.get("/api/v1/resources/queues")).json()["queues"]
    for q in listed:
        row = await browser.text(f"tr[data-row='{q['name']}']")
        assert row.startswith(q["name"]) and str(q['messages']['pending']) in row.split()

    await visit(browser, "queues/orders.created", "queue", "queue")
    detail = (await client.get("/api/v1/resources/queues/orders.created")).json()
    for p in detail["partitions"]:
        row = await browser.text(f"#main tr[data-row='{p['id']}']")
        assert row.split()[:2] == [p["name"], str(p["stats"]["pending"])]
    assert await browser.count("[data-group=billing]") == 1
    assert await browser.count("[data-group=audit]") == 1
    assert "leaseTime\n120" in await browser.text("#main")

    await visit(browser, "groups", "groups", "groups")
    for g in (await client.get("/api/v1/consumer-groups")).json():
        key = json.dumps([g["name"], g["queueName"]], separators=(",", ":"))
        row = await browser.text(f"tr[data-row='{key}']")
        assert g["state"] in row and str(g['totalLag']) in row.split()

    await visit(browser, "groups/billing", "group", "group")
    cursors = (await client.get("/api/v1/consumer-groups/billing")).json()
    for r in cursors["orders.created"]["partitions"]:
        row = await browser.text(f"tr[data-row='{r['partitionId']}']")
        assert row.split()[:3] == [r["partition"], str(r["totalConsumed"]), str(r["offsetLag"])]

    await visit(browser, "messages?queue=orders.created", "messages", "messages")
    msgs = (await client.get("/api/v1/messages", params={"queue": "orders.created"})).json()
    assert await row_texts(browser, "#main tbody th") == [
        m["transactionId"] for m in msgs["messages"]]

    d = seeded.dead_letter
    await visit(browser, f"messages/{d['partitionId']}/{d['transactionId']}", "message", "message")
    one = (await client.get(f"/api/v1/messages/{d['partitionId']}/{d['transactionId']}")).json()
    shown = await browser.text("#main pre.code")
    assert shown == json.dumps(one["payload"], indent=2)
    assert "card declined: insufficient funds" in await browser.text("#main")

    await visit(browser, "dlq", "dlq", "dlq")
    letters = (await client.get("/api/v1/dlq")).json()
    assert letters["total"] == 1
    assert letters["messages"][0]["errorMessage"] in await browser.text("#main tbody")

    await visit(browser, "traces", "traces", "traces")
    names = (await client.get("/api/v1/traces/names")).json()["trace_names"]
    row = await browser.text(f"tr[data-row='{TRACE}']")
    assert row.split()[:3] == [TRACE, str(names[0]["trace_count"]), str(names[0]["message_count"])]

    await visit(browser, "analytics", "analytics", "analytics")
    assert "61 buckets of 1 min" in await browser.text("#main")
    await visit(browser, "analytics?scope=queue&name=orders.created&range=6h&bucketMinutes=15",
                "analytics")
    assert "25 buckets of 15 min" in await browser.text("#main")
    assert "orders.created" in await browser.text("#main table[aria-label='Per queue over the range']")

    await visit(browser, "system", "system", "system")
    metrics = (await client.get("/metrics")).json()
    pg = (await client.get("/api/v1/analytics/postgres-stats")).json()
    text = await browser.text("#main")
    assert metrics["workerId"] in text and pg["database"]["version"] in text

    await visit(browser, "nowhere", "not-found")
    assert "Page not found" in await browser.text("#main")
    # A hash that does not percent-decode (a lone %, bytes that are not UTF-8) is no page either.
    for malformed in ("queues/%", "messages/%E0%A4%A/x", "groups/%FF"):
        await visit(browser, malformed, "not-found")
        assert "Page not found" in await browser.text("#main")


async def test_phone_width_and_dark_mode(browser, client, http_url):
    await seed(client)
    await browser.start(http_url, size=PHONE)
    await browser.loaded("overview")
    # The sidebar folds into the menu button; nothing is wider than the screen.
    assert await browser.script("return getComputedStyle(document.getElementById('nav')).display") == "none"
    await browser.click("#menu")
    assert await browser.script("return getComputedStyle(document.getElementById('nav')).display") == "block"
    await browser.click("#nav a[data-page=queues]")
    await browser.loaded("queues")
    assert await browser.script("return document.documentElement.scrollWidth") <= PHONE[0]
    await browser.screenshot("queues-phone")
    await visit(browser, "", "overview", "overview-phone")
    # The theme button cycles auto, light, dark; dark changes the colours.
    light = await browser.script("return getComputedStyle(document.body).backgroundColor")
    await browser.click("#theme")
    await browser.click("#theme")
    assert await browser.text("#theme") == "Theme: dark"
    dark = await browser.script("return getComputedStyle(document.body).backgroundColor")
    assert dark != light
    await browser.start(http_url, "queues/orders.created")  # a fresh page: the theme is reset
    await browser.script("document.documentElement.dataset.theme = 'dark'")
    await browser.loaded("queue")
    await browser.screenshot("queue-dark")
    assert await browser.console_errors() == []


async def test_a_seek_from_the_page_moves_the_cursor(browser, client, http_url):
    await seed(client)
    before = (await client.get("/api/v1/consumer-groups")).json()
    billing = next(g for g in before if g["name"] == "billing")
    assert billing["totalLag"] > 0
    await browser.start(http_url, "groups/billing")
    await browser.loaded("group")
    await browser.click("[data-key='seek-billing-orders.created-']")
    text = await browser.text("dialog")
    assert "consumer group billing" in text and "every partition of queue orders.created" in text
    await browser.screenshot("seek-dialog")
    await browser.click("dialog button[type=submit]")
    await browser.wait(lambda d: not d.find_elements("css selector", "dialog"))
    after = (await client.get("/api/v1/consumer-groups")).json()
    assert next(g for g in after if g["name"] == "billing")["totalLag"] == 0
    await browser.wait(lambda d: "Seek done" in d.find_element("css selector", "#toasts").text)
    assert await browser.console_errors() == []


async def test_a_dead_letter_retry_from_the_page_delivers_it_again(browser, client, http_url):
    seeded = await seed(client)
    d = seeded.dead_letter
    await browser.start(http_url, "dlq")
    await browser.loaded("dlq")
    await browser.click(f"[data-key='retry-{d['partitionId']}-{d['transactionId']}-billing']")
    assert d["transactionId"] in await browser.text("dialog")
    await browser.click("dialog button[type=submit]")
    await browser.wait(lambda d: not d.find_elements("css selector", "dialog"))
    # billing's next pop of the partition is the dead letter again.
    r = await client.get(f"/api/v1/pop/queue/{d['queue']}/partition/{d['partition']}",
                         params={"consumerGroup": "billing"})
    assert r.status_code == 200
    assert [m["transactionId"] for m in r.json()["messages"]] == [d["transactionId"]]
    assert await browser.console_errors() == []


async def test_a_trace_timeline_shows_its_events_in_order(browser, client, http_url):
    seeded = await seed(client)
    await browser.start(http_url, f"traces/{TRACE}")
    await browser.loaded("trace")
    assert await browser.texts(".event .badge") == seeded.trace_events
    stamps = await browser.script(
        "return [...document.querySelectorAll('.event time')].map((t) => t.getAttribute('datetime'))")
    assert stamps == sorted(stamps) and len(stamps) == 3
    # Two lanes: orders.created/customer-1 under billing, emails.welcome in queue mode (its
    # internal name, __QUEUE_MODE__, stays in the API: issue 25, point 12).
    lanes = await browser.texts(".lane-label")
    assert lanes == ["orders.created / customer-1 · billing",
                     "emails.welcome / Default · queue mode"]
    # Each event carries its message's payload.
    assert '"orderId": 1' in await browser.script(
        "return document.querySelector('.event details pre').textContent")
    await browser.screenshot("trace")
    # From a message, a link to its own timeline.
    await browser.click(".event a[href^='#/messages/']")
    await browser.loaded("message")
    await browser.click("#main a[href^='#/traces/message/']")
    await browser.loaded("trace")
    assert await browser.texts(".event .badge") == ["received", "charged"]
    # Back works: the hash routes are history entries.
    await browser.call(browser.driver.back)
    await browser.loaded("message")
    assert await browser.console_errors() == []


async def test_hostile_names_and_payloads_are_shown_as_text(browser, client, http_url):
    seeded = await seed(client, hostile=True)
    h = seeded.hostile
    await browser.start(http_url, "queues/hostile")
    await browser.loaded("queue")
    for route, page in [("queues/hostile", "queue"),
                        ("messages?queue=hostile", "messages"),
                        (f"messages/{h['partitionId']}/{h['transactionId']}", "message")]:
        await visit(browser, route, page)
        assert HOSTILE_PARTITION in await browser.text("#main")
    assert "<script>window.__pwned='payload'</script>" in await browser.text("#main pre.code")
    assert "onerror" in await browser.text("#main pre.code")
    await browser.screenshot("hostile")
    # Nothing ran, and nothing became markup.
    assert await browser.script("return window.__pwned === undefined") is True
    assert await browser.count("#main script, #main img") == 0
    assert await browser.console_errors() == []


async def test_push_pop_search_and_live_refresh(browser, client, http_url):
    await seed(client)
    await browser.start(http_url)
    await browser.loaded("overview")
    # Ctrl-K jumps to the search; a queue, a group and a trace name are all found.
    await browser.call(lambda: browser.driver.find_element("css selector", "body").send_keys(
        Keys.CONTROL, "k"))
    assert await browser.script("return document.activeElement.id") == "search"
    await browser.type("#search", "bill")
    await browser.wait(lambda d: "billing" in d.find_element("css selector", "#search-results").text)
    await browser.type("#search", "order")
    await browser.wait(lambda d: TRACE in d.find_element("css selector", "#search-results").text)
    assert "orders.created" in await browser.text("#search-results")
    await browser.call(lambda: browser.driver.find_element("css selector", "#search").send_keys(Keys.ENTER))
    await browser.loaded("queue")
    assert await browser.script("return location.hash") == "#/queues/orders.created"

    # Push from the header form, with the queue of the page filled in.
    await browser.click("#push-open")
    await browser.type("dialog [name=payload]", '{"from": "the page"}')
    await browser.type("dialog [name=transactionId]", "from-the-page")
    await browser.screenshot("push-dialog")
    await browser.click("dialog button[type=submit]")
    await browser.wait(lambda d: not d.find_elements("css selector", "dialog"))
    listed = (await client.get("/api/v1/status/queues/orders.created/messages")).json()
    mine = next(m for m in listed if m["transactionId"] == "from-the-page")
    one = (await client.get(f"/api/v1/messages/{mine['partitionId']}/from-the-page")).json()
    assert one["payload"] == {"from": "the page"}

    # Pop it back in a group of its own, and ack it from the form.
    await browser.click("#pop-open")
    await browser.type("dialog [name=partition]", "Default")
    await browser.type("dialog [name=consumerGroup]", "tryout")
    await browser.click("dialog button[type=submit]")
    await browser.wait(lambda d: "from-the-page" in d.find_element("css selector", "dialog").text)
    await browser.click("dialog .pop-results button.primary")
    await browser.wait(lambda d: "Acked 1 as completed" in d.find_element("css selector", "dialog").text)
    await browser.click("dialog button.cancel")  # Cancel closes it
    detail = (await client.get("/api/v1/consumer-groups/tryout")).json()
    assert sum(p["totalConsumed"] for p in detail["orders.created"]["partitions"]) == 1

    # Live: the figures follow the broker without a reload, at the interval set (1-60 s).
    await browser.goto("")
    await browser.loaded("overview")
    await browser.set_value("#interval", "1")
    total = int(await browser.text("[data-tile=total] dd"))
    marker = await browser.script("return window.performance.timeOrigin")
    await client.post("/api/v1/push", json={"items": [{"queue": "live", "payload": 1}]})
    await browser.wait(lambda d: d.find_element("css selector", "[data-tile=total] dd").text
                       == str(total + 1))
    assert await browser.script("return window.performance.timeOrigin") == marker  # no reload
    await browser.click("#pause")
    assert await browser.text("#pause") == "Resume"
    await browser.wait(lambda d: d.find_element("css selector", "#live-state").text == "Paused")
    await browser.set_value("#interval", "99")
    assert await browser.script("return document.getElementById('interval').value") == "60"
    assert await browser.console_errors() == []


async def test_destructive_actions_confirm_and_name_what_they_change(browser, client, http_url):
    seeded = await seed(client)
    d = seeded.dead_letter
    await browser.start(http_url, f"messages/{d['partitionId']}/{d['transactionId']}")
    await browser.loaded("message")
    await browser.click("[data-action=delete-message]")
    assert f"Hides message {d['transactionId']} of orders.created/{d['partition']}" in \
        await browser.text("dialog")
    await browser.click("dialog button.cancel")  # Cancel: nothing changes
    gone = await client.get(f"/api/v1/messages/{d['partitionId']}/{d['transactionId']}")
    assert gone.status_code == 200
    await browser.click("[data-action=delete-message]")
    await browser.click("dialog button[type=submit]")
    await browser.loaded("messages")
    gone = await client.get(f"/api/v1/messages/{d['partitionId']}/{d['transactionId']}")
    assert gone.status_code == 404

    await visit(browser, "groups/audit", "group")
    await browser.click("[data-key='delete-audit-']")
    assert "every cursor, lease and subscription of consumer group audit" in \
        await browser.text("dialog")
    await browser.click("dialog button[type=submit]")
    await browser.wait(lambda d: not d.find_elements("css selector", "dialog"))
    assert (await client.get("/api/v1/consumer-groups/audit")).json() == {}

    await visit(browser, "queues/invoices", "queue")
    await browser.click("[data-action=delete-queue]")
    assert "Deletes queue invoices with its partitions, its 1 messages" in \
        await browser.text("dialog")
    await browser.type("dialog input", "invoice")  # not the name: refused
    await browser.click("dialog button[type=submit]")
    await browser.wait(lambda d: "Type invoices exactly" in d.find_element("css selector", "dialog").text)
    assert (await client.get("/api/v1/resources/queues/invoices")).status_code == 200
    await browser.type("dialog input", "invoices")
    await browser.click("dialog button[type=submit]")
    await browser.loaded("queues")
    assert (await client.get("/api/v1/resources/queues/invoices")).status_code == 404
    assert await browser.console_errors() == []


async def test_with_authentication_each_level_sees_what_it_may_do(browser, database_url,
                                                                   nursery):
    auth = AuthSettings.from_env({"JWT_ENABLED": "true", "JWT_SECRET": SECRET})
    async with open_broker(make_settings(database_url, auth=auth), database_url) as broker:
        (url,) = [str(u) for u in await nursery.start(serve_on_port, broker)]
        admin = bearer(token(role="admin", sub="boss"))
        async with httpx.AsyncClient(base_url=url, headers=admin) as api:
            await seed(api)
        # No token: the page asks for one, and says why a bad one is refused.
        await browser.start(url)
        await browser.wait(lambda d: d.find_elements("css selector", "dialog textarea"))
        assert "This broker asks for a token" in await browser.text("dialog")
        assert "Authentication required" in await browser.text("dialog")
        await browser.screenshot("token-prompt")
        await browser.type("dialog textarea", token(key="another-secret-another-secret-0123"))
        await browser.click("dialog button[type=submit]")
        await browser.wait(lambda d: "Not signed in" in d.find_element(
            "css selector", "dialog .dialog-error").text)
        # A read-only token: every page reads, and no action is offered.
        await browser.type("dialog textarea", token(role="read-only", sub="ann"))
        await browser.click("dialog button[type=submit]")
        await browser.loaded("overview")
        # The refused whoami calls are the console's only errors (Chromium logs a 401).
        assert all("401" in e for e in await browser.console_errors())
        assert await browser.text("#who") == "read-only · ann"
        assert await browser.script("return sessionStorage.getItem('queen-trio.token') !== null")
        assert not await browser.script("return document.getElementById('push-open').offsetParent")
        async with httpx.AsyncClient(base_url=url, headers=admin) as api:
            d = (await api.get("/api/v1/dlq")).json()["messages"][0]
        for route, page in [("queues/orders.created", "queue"), ("groups", "groups"),
                            ("groups/billing", "group"), ("dlq", "dlq"),
                            (f"messages/{d['partitionId']}/{d['transactionId']}", "message"),
                            ("system", "system")]:
            await visit(browser, route, page)
            assert await browser.count("[data-action]") == 0, route
            assert await browser.count("#main button.danger") == 0, route
        await visit(browser, "queues/orders.created", "queue", "read-only")
        # A read-write token may seek and retry, but not delete queues or groups (admin).
        await browser.start(url, "queues/orders.created", token=token(role="read-write"))
        await browser.loaded("queue")
        assert await browser.count("[data-action=seek]") > 0
        assert await browser.count("[data-action=delete-queue], [data-action=delete-group]") == 0
        # A write-only token may push and read nothing: the page says so, not a blank.
        await browser.start(url, "queues", token=token(role="write-only"))
        await browser.loaded("queues")
        assert "may push messages but read nothing" in await browser.text("#main")
        assert await browser.script("return !!document.getElementById('push-open').offsetParent")
        assert await browser.console_errors() == []


async def test_an_expired_token_is_asked_for_again_with_the_reason(browser, database_url,
                                                                     nursery):
    auth = AuthSettings.from_env({"JWT_ENABLED": "true", "JWT_SECRET": SECRET})
    async with open_broker(make_settings(database_url, auth=auth), database_url) as broker:
        (url,) = [str(u) for u in await nursery.start(serve_on_port, broker)]
        expired = token(role="admin", exp=-3600)
        await browser.start(url, "queues", token=expired)
        await browser.wait(lambda d: d.find_elements("css selector", "dialog textarea"))
        assert "expired" in (await browser.text("dialog .error")).lower()
        await browser.click("dialog button.cancel")  # Cancel
        await browser.loaded("signed-out")
        assert "needs a token" in await browser.text("#main")
        # The console shows the refused whoami (a 401 is a failed load to Chromium), nothing
        # else.
        errors = await browser.console_errors()
        assert errors and all("401" in e for e in errors)


async def test_first_contact_figures_encryption_and_plain_words(browser, database_url, nursery):
    """Issue 25: a bad encryption key is on the System page and on an encrypted queue's page
    (points 4); the counts add up and say what they count (10); the maintenance chart says
    what it plots (11); queue mode goes by its name (12)."""
    settings = make_settings(database_url, encryption_key="not-a-key")
    async with open_broker(settings, database_url) as broker:
        (url,) = [str(u) for u in await nursery.start(serve_on_port, broker)]
        async with httpx.AsyncClient(base_url=url) as api:
            await seed(api)
            r = await api.post("/api/v1/configure", json={
                "queue": "vault", "options": {"encryptionEnabled": True}})
            assert r.status_code == 200
            await api.post("/api/v1/push", json={"items": [{"queue": "vault", "payload": 1}]})
            await api.post("/api/v1/stats/refresh")
            overview = (await api.get("/api/v1/resources/overview")).json()["messages"]
        await browser.start(url)
        await browser.loaded("overview")
        tiles = {key: int((await browser.text(f"[data-tile={key}] dd")).replace(",", ""))
                 for key in ("total", "pending", "processing", "consumed", "deadLetter")}
        assert tiles["total"] == overview["total"]
        assert tiles["total"] == tiles["pending"] + tiles["processing"] + tiles["consumed"]
        assert "dead letters are every group's" in await browser.text(".figures-note")

        await visit(browser, "system", "system", "system-bad-key")
        await browser.wait(lambda d: d.find_elements("css selector", "[data-tile=encryption]"))
        assert await browser.text("[data-tile=encryption] dd") == "off (bad key)"
        notice = await browser.text("#main [data-notice=encryption]")
        assert notice.startswith("encryption disabled: bad key: QUEEN_ENCRYPTION_KEY has 9 "
                                 "characters")

        await visit(browser, "queues/vault", "queue", "queue-bad-key")
        await browser.wait(lambda d: d.find_elements("css selector", "[data-notice=encryption]"))
        assert "encryption disabled: bad key" in await browser.text("[data-notice=encryption]")
        await visit(browser, "queues/orders.created", "queue")
        assert await browser.count("[data-notice=encryption]") == 0  # it asks for none

        await visit(browser, "analytics", "analytics")
        card = await browser.text("section[aria-labelledby=retention]")
        assert "remove nothing" in card and "what maintenance removed" not in card

        await visit(browser, "groups", "groups")
        shown = await browser.text("#main")
        assert "queue mode" in shown and "__QUEUE_MODE__" not in shown
    assert await browser.console_errors() == []
