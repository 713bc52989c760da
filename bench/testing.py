"""How fast the test broker (queen_trio.testing, the pytest plugin) starts and isolates tests.

    python bench/testing.py [--rounds 3] [--isolations 50] [--tests 100]

1. Cold start: a fresh process with an empty template cache (QUEEN_TRIO_CACHE_DIR in a new
   temporary directory) until `TestBroker()` answers: the template is built (initdb,
   migrations), copied and started. Target: under 3 s.
2. Warm start: the same with the template cached (later sessions). Target: under 1.5 s.
   Both are measured from the start of the process (the interpreter and
   `import queen_trio.testing` included) and from the `TestBroker()` call.
3. Per-test isolation, both ways (target: under 100 ms), each after a little traffic
   (a push of 10 messages, a grouped pop, a trace):
   - `reset()`: the broker keeps running, its tables are emptied, its caches forgotten;
   - a template clone: a new database cloned from the migrated template and a new broker on
     it (`BrokerHost.open_broker`), the previous broker closed and its database dropped.
4. The plugin in a real pytest run, on a warm cache: what one more test using `queen_url`
   costs (the slope between a run of N/4 and one of N tests), minus what one more test
   costs without it.

Results go to bench/results/testing.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx
from common import ROOT, log, write_results

# Run in a fresh interpreter: T is its first instant, t1 the TestBroker() call, t2 ready.
STARTER = """
import time
T = time.time()
t0 = time.perf_counter()
from queen_trio.testing import TestBroker
t1 = time.perf_counter()
with TestBroker() as broker:
    t2 = time.perf_counter()
print(T, t2 - t0, t2 - t1)
"""


def process_start(cache_dir: Path) -> dict:
    """Seconds until a TestBroker answers: from the process's launch (the interpreter's
    start-up included), from `import queen_trio.testing`, and from the `TestBroker()` call."""
    env = {**os.environ, "QUEEN_TRIO_CACHE_DIR": str(cache_dir)}
    launched = time.time()
    done = subprocess.run([sys.executable, "-c", STARTER], env=env, capture_output=True,
                          text=True, check=True)
    first_instant, since_import, since_call = (float(x) for x in done.stdout.split())
    return {"from_process_start_s": round(first_instant - launched + since_import, 3),
            "from_import_s": round(since_import, 3), "from_call_s": round(since_call, 3)}


def summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 4),
            "p90": round(ordered[max(0, int(len(ordered) * 0.9) - 1)], 4),
            "min": round(ordered[0], 4), "max": round(ordered[-1], 4), "n": len(ordered)}


def traffic(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        client.post("/api/v1/push", json={"items": [
            {"queue": "bench.iso", "payload": {"n": i}} for i in range(10)]})
        r = client.get("/api/v1/pop/queue/bench.iso",
                       params={"consumerGroup": "g", "batch": "3"})
        m = r.json()["messages"][0]
        client.post("/api/v1/traces", json={
            "transactionId": m["transactionId"], "partitionId": m["partitionId"],
            "consumerGroup": "g", "data": {"step": 1}, "traceNames": ["bench"]})


def isolation(rounds: int) -> dict:
    from queen_trio.testing import BrokerHost

    with BrokerHost() as host:
        broker = host.open_broker()
        resets = []
        for _ in range(rounds):
            traffic(broker.url)
            started = time.perf_counter()
            broker.reset()
            resets.append(time.perf_counter() - started)
        clones = []
        for _ in range(rounds):
            traffic(broker.url)
            started = time.perf_counter()
            fresh = host.open_broker()
            broker.close()
            clones.append(time.perf_counter() - started)
            broker = fresh
        broker.close()
    return {"reset_ms": summary([s * 1000 for s in resets]),
            "template_clone_ms": summary([s * 1000 for s in clones])}


def pytest_run(folder: Path, tests: int, use_fixture: bool) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    argument = "queen_url" if use_fixture else ""
    (folder / "test_many.py").write_text(textwrap.dedent(f"""
        import pytest

        @pytest.mark.parametrize("n", range({tests}))
        def test_one(n, {argument}):
            pass
    """))
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "-p", "no:asyncio", "-p", "no:trio", str(folder)], cwd=folder,
                   check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--isolations", type=int, default=50)
    parser.add_argument("--tests", type=int, default=100)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="queen-bench-testing-"))
    load_before = os.getloadavg()[0]
    try:
        cold, warm = [], []
        for i in range(args.rounds):
            cache = scratch / f"cache-{i}"
            cold.append(process_start(cache))
            log(f"cold start {i + 1}: {cold[-1]}")
            for _ in range(2):
                warm.append(process_start(cache))
                log(f"warm start: {warm[-1]}")
        log("isolation ...")
        iso = isolation(args.isolations)
        log(f"isolation: {iso}")
        # Per-test cost: the slope between a short and a long run (the session's start cancels
        # out), with the fixture minus without it (pytest's own cost per test).
        short, long_ = max(1, args.tests // 4), args.tests
        slopes = {}
        for use in (False, True):
            times = {n: min(pytest_run(scratch / f"pytest-{use}-{n}", n, use) for _ in range(2))
                     for n in (short, long_)}
            slopes[use] = (times[long_] - times[short]) / (long_ - short)
            log(f"pytest {'with' if use else 'without'} queen_url: {times}")
        results = {
            "command": "python bench/testing.py " + " ".join(sys.argv[1:]),
            # The machine is shared: its load says how far the figures are from an idle one's.
            "machine": {"cpus": os.cpu_count(),
                        "load_average_1m": [round(load_before, 2),
                                            round(os.getloadavg()[0], 2)]},
            "cold_start_s": {key: summary([c[key] for c in cold]) for key in cold[0]},
            "warm_start_s": {key: summary([w[key] for w in warm]) for key in warm[0]},
            "isolation": iso,
            "pytest": {"tests": [short, long_],
                       "per_test_ms_with_queen_url": round(slopes[True] * 1000, 2),
                       "per_test_ms_without": round(slopes[False] * 1000, 2),
                       "isolation_per_test_ms": round((slopes[True] - slopes[False]) * 1000, 2)},
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    path = write_results("testing", results)
    log(f"results in {path.relative_to(ROOT)}")
    print(results)


if __name__ == "__main__":
    main()
