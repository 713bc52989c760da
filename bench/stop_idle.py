"""How long SIGTERM takes on a broker with no request open: its clients are done, or gone.

    python bench/stop_idle.py [--rounds 10] [--workers 1,2] [--scenarios closed,kept,abandoned]

Each round starts `queen-trio serve` on DATABASE_URL (else one embedded PostgreSQL for the
run), leaves its connections in one state, sends SIGTERM and measures until the process has
exited. The graceful deadline is 10 s (the default): a stop that waits for nothing takes well
under a second; one that waits for a connection nobody is on takes the whole deadline.

- closed: one GET on a fresh connection, which the client closes (what `curl` does);
- kept: one GET on a keep-alive connection the client keeps open through the stop;
- abandoned: 100 connections whose client hung up mid-request (50 long polls, 50 pushes
  whose body never came), as a load generator leaves them when it stops.

Every scenario also has the connection of its first request (configuring the queue), which
the client closed. Also counts the stops whose log said something was still running at the graceful deadline.
Results go to bench/results/stop_idle.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    ROOT,
    configure_queue,
    database,
    free_port,
    free_ports,
    log,
    wait_http,
    write_results,
)

DEADLINE_WORDS = "at the graceful deadline"


def leave_connections(port: int, scenario: str) -> list[socket.socket]:
    """Put the broker's connections in `scenario`'s state; what must stay open is returned."""
    if scenario == "closed":
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("GET", "/health")
        conn.getresponse().read()
        conn.close()
        return []
    if scenario == "kept":
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += sock.recv(65536)
        return [sock]
    assert scenario == "abandoned"
    for k in range(100):
        sock = socket.create_connection(("127.0.0.1", port))
        if k % 2:
            sock.sendall(b"GET /api/v1/pop/queue/bench.stop?wait=true&timeout=60000 HTTP/1.1"
                         b"\r\nHost: x\r\n\r\n")
        else:
            sock.sendall(b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/json\r\nContent-Length: 1000\r\n\r\n{\"items\": [")
        time.sleep(0.01)
        sock.close()
    time.sleep(0.5)
    return []


def one_round(database_url: str, workers: int, scenario: str) -> dict:
    port, base = free_port(), free_ports(workers)
    spool = tempfile.mkdtemp(prefix="queen-bench-spool-")
    env = {**os.environ, "DATABASE_URL": database_url, "FILE_BUFFER_DIR": spool,
           "LOG_LEVEL": "info"}
    cmd = [sys.executable, "-m", "queen_trio", "serve", "--host", "127.0.0.1", "--port",
           str(port), "--workers", str(workers), "--worker-ports", str(base)]
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            for k in range(workers):
                wait_http(f"http://127.0.0.1:{base + k}/health")
            configure_queue(port, "bench.stop")
            held = leave_connections(port, scenario)
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            exited = time.monotonic() - signalled
            for sock in held:
                sock.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        output = out.read().decode(errors="replace")
    return {"workers": workers, "scenario": scenario, "exited_s": round(exited, 3),
            "exit_code": proc.returncode, "deadline_lines": output.count(DEADLINE_WORDS)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--scenarios", default="closed,kept,abandoned")
    parser.add_argument("--name", default="stop_idle", help="results file name")
    args = parser.parse_args()
    rows = []
    with database() as url:
        for workers in [int(n) for n in args.workers.split(",")]:
            for scenario in args.scenarios.split(","):
                runs = []
                for r in range(args.rounds):
                    runs.append(one_round(url, workers, scenario))
                    log(f"workers={workers} {scenario} round {r + 1}/{args.rounds}: "
                        f"{json.dumps(runs[-1])}")
                times = [x["exited_s"] for x in runs]
                rows.append({"workers": workers, "scenario": scenario,
                             "median_s": statistics.median(times), "max_s": max(times),
                             "over_2s": sum(t > 2 for t in times),
                             "deadline_lines": sum(x["deadline_lines"] for x in runs),
                             "runs": runs})
    path = write_results(args.name, {"rounds": args.rounds, "results": rows})
    print(f"{'workers':>7} {'scenario':>10} {'median s':>9} {'max s':>7} {'>2 s':>5} "
          f"{'deadline lines':>14}")
    for row in rows:
        print(f"{row['workers']:>7} {row['scenario']:>10} {row['median_s']:>9.3f} "
              f"{row['max_s']:>7.3f} {row['over_2s']:>5} {row['deadline_lines']:>14}")
    print(f"results: {Path(path)}")


if __name__ == "__main__":
    main()
