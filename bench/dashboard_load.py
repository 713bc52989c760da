"""Cold load of the dashboard's overview and queue list on a loaded broker.

    python bench/dashboard_load.py [--queues 1000] [--messages 100000] [--hours 24] [--runs 5]
                                   [--fresh-browser]

A broker (its own embedded PostgreSQL, or DATABASE_URL) gets `--queues` queues holding
`--messages` messages (two partitions each; a consumer group on a tenth of them, partly read)
and `--hours` of samples (bench/dashboard_data.py). Then, for each page and run, the browser's
HTTP cache is emptied (CDP Network.clearBrowserCache) and the page opened from about:blank; the
time from navigation start to the `queen:loaded` performance mark, which the page sets with its
`data-loaded` marker once its first data is on screen (charts drawn, tables filled), is read
from the page itself. With --fresh-browser every run starts a new Chromium with a new profile
instead (that adds the browser's own start-up to the first navigation). Also reported: the
load average, and each API call of the page timed alone. Target: under 1 s for both pages.

Results go to bench/results/dashboard_load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import urllib.request

from common import ROOT, broker, database, log, write_results
from dashboard_data import get, post, push_queues, write_samples

sys.path.insert(0, str(ROOT))
from tests.support.browser import DESKTOP, chromium  # noqa: E402

MARK = """
const mark = performance.getEntriesByName('queen:loaded')[0];
const nav = performance.getEntriesByType('navigation')[0];
return mark ? {loaded: mark.startTime, domContentLoaded: nav.domContentLoadedEventEnd,
               transferred: performance.getEntriesByType('resource')
                 .reduce((t, r) => t + r.transferSize, 0) + nav.transferSize,
               requests: performance.getEntriesByType('resource').length + 1} : null;
"""
PAGES = {"overview": "", "queues": "queues"}
API = {
    "overview": ["/api/v1/auth/whoami", "/api/v1/resources/overview", "/api/v1/status",
                 "/api/v1/resources/queues?limit=1000", "/api/v1/consumer-groups"],
    "queues": ["/api/v1/auth/whoami", "/api/v1/resources/queues?limit=1000",
               "/api/v1/resources/namespaces", "/api/v1/resources/tasks"],
}


def measure(driver, base: str, route: str) -> dict[str, float]:
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    driver.get("about:blank")
    driver.get(f"{base}/#/{route}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        figures = driver.execute_script(MARK)
        if figures:
            errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            if errors:
                raise SystemExit(f"console errors on {route!r}: {errors}")
            return figures  # type: ignore[no-any-return]
        time.sleep(0.01)
    raise SystemExit(f"{route!r} never set its loaded mark")


def cold_loads(base: str, route: str, runs: int, fresh: bool) -> list[dict[str, float]]:
    if fresh:
        out = []
        for _ in range(runs):
            with chromium(DESKTOP) as driver:
                out.append(measure(driver, base, route))
        return out
    with chromium(DESKTOP) as driver:
        measure(driver, base, route)  # the browser process and the broker warm up once
        return [measure(driver, base, route) for _ in range(runs)]


def api_time(base: str, path: str, rounds: int = 3) -> dict[str, float]:
    times, size = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        with urllib.request.urlopen(base + path, timeout=60) as reply:
            size = len(reply.read())
        times.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(times), 1), "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fresh-browser", action="store_true")
    args = parser.parse_args()
    with database() as url, broker(url) as (base, _proc, _):
        started = time.monotonic()
        push_queues(base, queues=args.queues, messages=args.messages)
        # A group on every tenth queue reads half of it.
        for q in range(0, args.queues, 10):
            for partition in ("p0", "p1"):
                reply = post_pop(base, f"bench.q{q:04d}", partition)
                if reply:
                    post(base, "/api/v1/ack/batch", {"consumerGroup": "workers", "acknowledgments": [
                        {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                         "leaseId": m["leaseId"], "status": "completed"} for m in reply["messages"]]})
        seeded = time.monotonic() - started
        rows = asyncio.run(write_samples(url, hours=args.hours, busy_queues=args.queues // 10))
        overview = get(base, "/api/v1/resources/overview")
        log(f"seeded in {seeded:.1f} s: {overview['queues']} queues, "  # type: ignore[index]
            f"{overview['messages']['total']} messages; samples {rows}")  # type: ignore[index]
        results: dict[str, object] = {
            "queues": overview["queues"], "messages": overview["messages"]["total"],  # type: ignore[index]
            "sample_rows": rows, "hours": args.hours, "runs": args.runs,
            "fresh_browser": args.fresh_browser, "cpus": os.cpu_count(), "pages": {}}
        for page, route in PAGES.items():
            load_before = os.getloadavg()[0]
            runs = cold_loads(base, route, args.runs, args.fresh_browser)
            loaded = [r["loaded"] for r in runs]
            figures = {
                "loaded_ms": {"median": round(statistics.median(loaded), 1),
                              "max": round(max(loaded), 1), "all": [round(x, 1) for x in loaded]},
                "dom_content_loaded_ms": round(statistics.median(r["domContentLoaded"] for r in runs), 1),
                "requests": runs[0]["requests"], "transferred_bytes": runs[0]["transferred"],
                "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                "api": {path: api_time(base, path) for path in API[page]},
            }
            results["pages"][page] = figures  # type: ignore[index]
            log(f"{page}: cold load median {figures['loaded_ms']['median']} ms, "
                f"max {figures['loaded_ms']['max']} ms over {args.runs} runs; "
                f"{figures['requests']} requests, {figures['transferred_bytes']} bytes; "
                f"load average {figures['load_average']}")
            for path, api in figures["api"].items():  # type: ignore[union-attr]
                log(f"    {path}: {api['median_ms']} ms, {api['bytes']} bytes")
        path = write_results("dashboard_load-fresh" if args.fresh_browser else "dashboard_load",
                             results)
        log(f"results: {path}")


def post_pop(base: str, queue: str, partition: str) -> dict | None:
    url = f"{base}/api/v1/pop/queue/{queue}/partition/{partition}?consumerGroup=workers&batch=25"
    with urllib.request.urlopen(url, timeout=60) as reply:
        body = reply.read()
    return json.loads(body) if body else None


if __name__ == "__main__":
    main()
