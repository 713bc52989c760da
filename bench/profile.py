"""Where the broker's CPU goes: py-spy samples one broker process while wrk loads it.

    python bench/profile.py CASE [--seconds 10] [--out /tmp/profile.txt]   (needs py-spy)

CASE: push1, push10 or push100 (pushes at batch 1, 10 or 100 over 100 partitions),
binary100 (the 2.6 client's binary push body at batch 100), autoack1, autoack10,
popack1 or popack10 (autoAck pops, or pops each followed by an ack, at batch 1 or 10, on a
prefilled queue). The raw samples go to OUT.raw; OUT gets the self and inclusive shares of
the hottest frames, and the samples split into hypercorn (sending the response; reading, h11
and its tasks), queen-trio's request handling, database calls (trio-asyncio and asyncpg), the
lane and fusion tasks, and the trio scheduler. Idle threads (trio's thread cache waiting for
work) are left out.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess

from common import broker, database, wrk
from pop import AUTOACK_LUA, POPACK_LUA, lua_file, prefill
from push import lua_script


def category(stack: str) -> str:
    if "App._send" in stack:
        return "hypercorn: sending the response"
    if "trio_asyncio" in stack or "asyncpg" in stack:
        return "database calls (trio-asyncio, asyncpg)"
    if "App.__call__" in stack:
        return "queen-trio request handling"
    if "lane.py" in stack or "fusion.py" in stack:
        return "lane and fusion tasks"
    if "hypercorn" in stack or "_TimedStream" in stack:
        return "hypercorn: reading, h11, its tasks"
    return "trio scheduler and the rest"


def summarise(raw: str) -> str:
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    split: collections.Counter[str] = collections.Counter()
    samples = 0
    with open(raw) as f:
        for line in f:
            stack, _, count_text = line.rstrip().rpartition(" ")
            if "WorkerThread._work" in stack:  # an idle thread of trio's cache
                continue
            count = int(count_text)
            samples += count
            frames = stack.split(";")
            own[frames[-1]] += count
            for frame in set(frames):
                total[frame] += count
            split[category(stack)] += count
    lines = [f"samples {samples}", "== split =="]
    lines += [f"{100 * v / samples:5.1f}% {k}" for k, v in split.most_common()]
    lines.append("== self ==")
    lines += [f"{100 * v / samples:5.1f}% {k}" for k, v in own.most_common(40)]
    lines.append("== inclusive ==")
    lines += [f"{100 * v / samples:5.1f}% {k}" for k, v in total.most_common(80)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["push1", "push10", "push100", "binary100", "autoack1",
                                         "autoack10", "popack1", "popack10"])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--out", default="/tmp/profile.txt")
    args = parser.parse_args()
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    with database() as db_url, broker(db_url) as (url, proc, _):
        if args.case.startswith("push"):
            script = lua_script(int(args.case.removeprefix("push")), 100)
            target = url + "/api/v1/push"
        elif args.case == "binary100":  # the 2.6 client's binary body (binary_push=True)
            script, target = lua_script(100, 100, "plain"), url + "/api/v1/push"
        else:
            batch = int(args.case.removeprefix("autoack").removeprefix("popack"))
            # Per partition: more than a run consumes at either batch.
            prefill(url, "bench.profile", 100, min(300 * batch, 1000), {"orderId": 8891})
            template = AUTOACK_LUA if args.case.startswith("autoack") else POPACK_LUA
            script, target = lua_file(template % ("bench.profile", batch)), url
        wrk(target, script, connections=64, seconds=2)  # warm
        sampler = subprocess.Popen(
            [spy, "record", "-p", str(proc.pid), "-d", str(args.seconds), "-f", "raw",
             "-o", args.out + ".raw", "-r", "250"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(wrk(target, script, connections=64, seconds=args.seconds + 1))
        sampler.wait()
    text = summarise(args.out + ".raw")
    with open(args.out, "w") as f:
        f.write(text)
    print(text[:3000])


if __name__ == "__main__":
    main()
