"""What a re-pushed batch costs: RSS growth and time, first push against the duplicate push.

    python bench/duplicates.py [--sizes 600,5000] [--payload-bytes 1024] [--memory-limit-mb 4096]

For each size N a fresh broker takes one POST of N items (1 KB payloads, one partition, each
with its own transactionId), then the same body again: every item is a duplicate. The script
reports the time of each POST and the broker's VmRSS before and after the duplicate push, and
its peak (VmHWM). The broker runs under an address-space limit and its database with a
temp_file_limit, so a cost that grows with the square of the batch fails instead of taking
the machine down; such a run is reported as failed with the error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx
from common import ROOT, database, free_port, log, wait_http, write_results


def status_kb(pid: int, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+)", text).group(1))  # type: ignore[union-attr]


def limit_temp_files(url: str, limit: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            name = await conn.fetchval("SELECT current_database()")
            await conn.execute(f'ALTER DATABASE "{name}" SET temp_file_limit = \'{limit}\'')
        except asyncpg.InsufficientPrivilegeError:
            log("not a superuser: temp_file_limit left as it is")
        finally:
            await conn.close()

    asyncio.run(run())


def start_broker(db_url: str, memory_limit_mb: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {"DATABASE_URL": db_url, "LOG_LEVEL": "warning",
           "FILE_BUFFER_DIR": tempfile.mkdtemp(prefix="queen-bench-spool-"),
           "PATH": "/usr/bin:/bin"}

    def cap() -> None:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.Popen([sys.executable, "-m", "queen_trio", "serve", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, cwd=ROOT, preexec_fn=cap)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health")
    return proc, url


def measure(db_url: str, size: int, payload_bytes: int, memory_limit_mb: int) -> dict:
    queue = f"bench.dup{size}"
    pad = "x" * max(payload_bytes - 20, 0)
    body = json.dumps({"items": [{"queue": queue, "transactionId": f"t-{i}",
                                  "payload": {"i": i, "pad": pad}} for i in range(size)]})
    proc, url = start_broker(db_url, memory_limit_mb)
    result: dict = {"size": size, "body_mb": round(len(body) / 1e6, 2)}
    try:
        with httpx.Client(base_url=url, timeout=600,
                          headers={"content-type": "application/json"}) as client:
            started = time.perf_counter()
            first = client.post("/api/v1/push", content=body)
            result["first_s"] = round(time.perf_counter() - started, 3)
            assert first.status_code == 201, first.text[:300]
            before = status_kb(proc.pid, "VmRSS")
            started = time.perf_counter()
            try:
                again = client.post("/api/v1/push", content=body)
            except httpx.HTTPError as exc:
                result["error"] = f"{type(exc).__name__}: {exc}"
                again = None
            result["duplicate_s"] = round(time.perf_counter() - started, 3)
            if again is not None:
                result["duplicate_status"] = again.status_code
                entries = again.json()
                if isinstance(entries, list):
                    statuses = {e["status"] for e in entries}
                    result["duplicate_statuses"] = sorted(statuses)
                    if statuses == {"duplicate"}:
                        ids = [e["message_id"] for e in first.json()]
                        result["original_ids_answered"] = ids == [
                            e["message_id"] for e in entries]
                    else:
                        result["error"] = next((e.get("error") for e in entries
                                                if e.get("error")), None)
                else:
                    result["error"] = entries.get("error")
            if proc.poll() is None:
                after = status_kb(proc.pid, "VmRSS")
                result.update(rss_before_mb=round(before / 1024, 1),
                              rss_after_mb=round(after / 1024, 1),
                              rss_growth_mb=round((after - before) / 1024, 1),
                              rss_peak_mb=round(status_kb(proc.pid, "VmHWM") / 1024, 1))
            else:
                result["error"] = f"broker exited {proc.returncode}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="600,5000")
    parser.add_argument("--payload-bytes", type=int, default=1024)
    parser.add_argument("--memory-limit-mb", type=int, default=4096)
    parser.add_argument("--temp-file-limit", default="2GB")
    parser.add_argument("--out", default="duplicates",
                        help="results file name under bench/results (without .json)")
    args = parser.parse_args()
    results = []
    with database() as db_url:
        limit_temp_files(db_url, args.temp_file_limit)
        for size in (int(s) for s in args.sizes.split(",")):
            log(f"size {size}")
            results.append(measure(db_url, size, args.payload_bytes, args.memory_limit_mb))
            log(json.dumps(results[-1]))
    print(f"{'items':>6} {'first s':>8} {'dup s':>8} {'RSS before':>10} {'growth MB':>9} "
          f"{'peak MB':>8}  outcome")
    for r in results:
        outcome = r.get("error") or ("duplicates, original ids" if r.get("original_ids_answered")
                                     else str(r.get("duplicate_statuses")))
        print(f"{r['size']:>6} {r['first_s']:>8} {r.get('duplicate_s', '-'):>8} "
              f"{r.get('rss_before_mb', '-'):>10} {r.get('rss_growth_mb', '-'):>9} "
              f"{r.get('rss_peak_mb', '-'):>8}  {outcome}")
    path = write_results(args.out, {"payload_bytes": args.payload_bytes, "runs": results})
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
