"""How long SIGTERM takes with only idle long polls parked on the broker.

    python bench/shutdown.py [--waiters 1,100] [--rounds 3] [--external]

Each round starts `queen-trio serve` (its own embedded PostgreSQL in a fresh data directory,
or DATABASE_URL / a shared embedded cluster with --external), parks N long polls on an empty
queue (`wait=true&timeout=60000`), sends SIGTERM, and measures:

- until every long poll has its answer (and which status it got: 204 expected);
- until the process has exited (this includes stopping the embedded cluster).

Target: under 2 s with only idle waiters. Results go to bench/results/shutdown.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

from common import ROOT, configure_queue, database, free_port, log, wait_http, write_results


def long_poll(port: int, results: list, ready: threading.Barrier) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.connect()
    ready.wait()
    conn.request("GET", "/api/v1/pop/queue/bench.shutdown?wait=true&timeout=60000")
    try:
        response = conn.getresponse()
        response.read()
        results.append((response.status, time.monotonic()))
    except (OSError, http.client.HTTPException) as exc:
        results.append((type(exc).__name__, time.monotonic()))
    finally:
        conn.close()


def one_round(waiters: int, database_url: str | None) -> dict:
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="queen-bench-shutdown-"))
    env = {**os.environ, "LOG_LEVEL": "warning", "QUEEN_DATA_DIR": str(data_dir)}
    if database_url:
        env["DATABASE_URL"] = database_url
        env["FILE_BUFFER_DIR"] = str(data_dir / "spool")
    else:
        env.pop("DATABASE_URL", None)
    cmd = [sys.executable, "-m", "queen_trio", "serve", "--host", "127.0.0.1",
           "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    try:
        wait_http(f"http://127.0.0.1:{port}/health")
        configure_queue(port, "bench.shutdown")
        results: list = []
        ready = threading.Barrier(waiters + 1)
        threads = [threading.Thread(target=long_poll, args=(port, results, ready))
                   for _ in range(waiters)]
        for t in threads:
            t.start()
        ready.wait()
        time.sleep(1.0)  # let every long poll park
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(60)
        answered = max(at for _, at in results) - signalled
        proc.wait(60)
        exited = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
    statuses: dict[str, int] = {}
    for status, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {"waiters": waiters, "answered_s": round(answered, 3), "exited_s": round(exited, 3),
            "exit_code": proc.returncode, "statuses": statuses}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--waiters", default="1,100")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--external", action="store_true",
                        help="DATABASE_URL (or one embedded cluster for the run) instead of "
                             "each broker's own embedded cluster")
    args = parser.parse_args()
    counts = [int(n) for n in args.waiters.split(",")]
    rows = []
    with database() if args.external else nullcontext() as url:
        for n in counts:
            runs = []
            for r in range(args.rounds):
                log(f"{n} idle long polls, round {r + 1}/{args.rounds} ...")
                runs.append(one_round(n, url))
                log(json.dumps(runs[-1]))
            rows.append({"waiters": n,
                         "median_answered_s": statistics.median(x["answered_s"] for x in runs),
                         "median_exited_s": statistics.median(x["exited_s"] for x in runs),
                         "max_exited_s": max(x["exited_s"] for x in runs),
                         "runs": runs})
    path = write_results("shutdown", {"external_database": args.external,
                                      "rounds": args.rounds, "results": rows})
    print(f"{'waiters':>7} {'answered s':>10} {'exited s':>9} {'max exited s':>12}  statuses")
    for row in rows:
        statuses = row["runs"][-1]["statuses"]
        print(f"{row['waiters']:>7} {row['median_answered_s']:>10.3f} "
              f"{row['median_exited_s']:>9.3f} {row['max_exited_s']:>12.3f}  {statuses}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
