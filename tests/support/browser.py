"""A real headless Chromium for the dashboard: Debian's `chromium` driven through its
`chromium-driver` by Selenium (.ci/run installs both). Nothing is downloaded: the driver and
the browser are named by path, so Selenium Manager never runs.

The driver's calls block, and the broker under test serves from the test's own Trio loop, so
a Trio test calls the browser through `Browser.call` (a worker thread).
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import trio

CHROMIUM = os.environ.get("QUEEN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("QUEEN_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]
DESKTOP = (1280, 900)
PHONE = (390, 844)
LOADED = "return document.getElementById('main').dataset.loaded || null"
# Visible controls without an accessible name (a label, aria-label or text).
UNLABELLED = """
return [...document.querySelectorAll('input, select, textarea, button')]
  .filter((el) => el.offsetParent !== null)
  .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                  && !(el.textContent || '').trim())
  .map((el) => el.outerHTML.slice(0, 120));
"""
T = TypeVar("T")


@contextmanager
def chromium(size: tuple[int, int] = DESKTOP) -> Iterator[Any]:
    """A fresh browser (its own profile directory, so an empty cache), closed afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_AVOID_STATS", "true")
    profile = Path(tempfile.mkdtemp(prefix="queen-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}"]:
        options.add_argument(flag)
    # Console messages (errors, CSP violations, failed loads) for browser.console().
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


class Browser:
    """One Chromium shared by a test session, pointed at each test's broker in turn."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.base = ""

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args)

    async def start(self, base_url: str, route: str = "", *, size: tuple[int, int] = DESKTOP,
                    token: str | None = None) -> None:
        """A full page load of the dashboard at `route` (a fresh document: this broker's
        origin), optionally with a token already in sessionStorage."""
        self.base = base_url.rstrip("/")

        def load() -> None:
            self.driver.set_window_size(*size)
            self.driver.get(f"{self.base}/dashboard/favicon.svg")  # this origin, no page
            self.driver.execute_script("sessionStorage.clear(); localStorage.clear();"
                                       "if (arguments[0]) sessionStorage.setItem("
                                       "'queen-trio.token', arguments[0]);", token)
            self.driver.get_log("browser")  # start the console afresh
            self.driver.get(f"{self.base}/#/{route}")

        await self.call(load)

    async def goto(self, route: str) -> None:
        """Navigate inside the page (a hash change, as a click on a link would)."""
        await self.call(self.driver.execute_script,
                        "delete document.getElementById('main').dataset.loaded;"
                        "location.hash = arguments[0];", f"#/{route}")

    async def loaded(self, page: str, seconds: float = 15) -> None:
        """Wait for the page to set its data-loaded marker (its first data is on screen)."""
        await self.wait(lambda d: d.execute_script(LOADED) == page, seconds,
                        f"page {page} never set data-loaded")

    async def wait(self, condition: Callable[[Any], Any], seconds: float = 15,
                   message: str = "") -> Any:
        from selenium.common.exceptions import (
            NoSuchElementException,
            StaleElementReferenceException,
        )
        from selenium.webdriver.support.ui import WebDriverWait

        # A live refresh may replace an element between finding it and reading it.
        ignored = (NoSuchElementException, StaleElementReferenceException)
        return await self.call(lambda: WebDriverWait(
            self.driver, seconds, 0.05, ignored_exceptions=ignored).until(condition, message))

    async def text(self, css: str) -> str:
        """The rendered text of the first match, read in one step (a refresh cannot cut in)."""
        text = await self.script("const el = document.querySelector(arguments[0]);"
                                 "return el === null ? null : el.innerText;", css)
        assert text is not None, f"nothing matches {css}"
        return str(text).strip()

    async def texts(self, css: str) -> list[str]:
        return list(await self.script("return [...document.querySelectorAll(arguments[0])]"
                                      ".map((el) => el.innerText.trim());", css))

    async def unlabelled(self) -> list[str]:
        """The visible controls of the page that have no accessible name (an empty list
        when every one has)."""
        return list(await self.script(UNLABELLED))

    async def count(self, css: str) -> int:
        return int(await self.script("return document.querySelectorAll(arguments[0]).length;", css))

    async def click(self, css: str) -> None:
        await self.call(lambda: self.driver.find_element("css selector", css).click())

    async def type(self, css: str, text: str) -> None:
        def type_() -> None:
            element = self.driver.find_element("css selector", css)
            element.clear()
            element.send_keys(text)

        await self.call(type_)

    async def set_value(self, css: str, value: str) -> None:
        """Set a control's value as a person would, ending with its change event."""
        await self.script("const el = document.querySelector(arguments[0]); el.value = arguments[1];"
                          "el.dispatchEvent(new Event('input', {bubbles: true}));"
                          "el.dispatchEvent(new Event('change', {bubbles: true}));", css, value)

    async def script(self, source: str, *args: Any) -> Any:
        return await self.call(self.driver.execute_script, source, *args)

    async def console(self) -> list[dict[str, Any]]:
        """Console messages since the last call."""
        return list(await self.call(self.driver.get_log, "browser"))

    async def console_errors(self) -> list[str]:
        return [entry["message"] for entry in await self.console()
                if entry["level"] == "SEVERE"]

    async def screenshot(self, name: str) -> None:
        """`$QUEEN_SCREENSHOT_DIR/<name>.png` when the variable is set (the tree stays clean
        otherwise); bench/screenshots.py points it at docs/dashboard/."""
        folder = os.environ.get("QUEEN_SCREENSHOT_DIR")
        if not folder:
            return
        await self.call(self._full_page, Path(folder) / f"{name}.png")

    def _full_page(self, path: Path) -> None:
        # The whole page, not only the window: Chromium's own full-page capture.
        result = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(result["data"]))
