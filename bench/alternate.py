"""One benchmark script, run from two checkouts in alternating rounds: before/after ratios
that machine drift cannot fake.

    python bench/alternate.py --before ../before [--rounds 5] -- push.py --seconds 8 --rounds 1

Each round runs `bench/SCRIPT ARGS` in the checkout `--before` (with its own `.venv`), then in
this one or `--after` (the order flips every round), reads the JSON result the script wrote
(`bench/results/<script>.json`; put back as it was afterwards) and takes every `msg_per_s`
figure in it. Printed per case: the median of each side and the median of the per-round
ratios (after/before) with their spread. Results go to bench/results/alternate-<script>.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import log

HERE = Path(__file__).resolve().parent.parent


def figures(result: object, path: str = "") -> dict[str, float]:
    """Every `msg_per_s` in a result, keyed by where it sits ("runs/batch=10", "autoack/1")."""
    found: dict[str, float] = {}
    if isinstance(result, dict):
        if "msg_per_s" in result:
            found[path or "."] = float(result["msg_per_s"])
        for key, value in result.items():
            found.update(figures(value, f"{path}/{key}".strip("/")))
    elif isinstance(result, list):
        for n, value in enumerate(result):
            name = f"batch={value['batch']}" if isinstance(value, dict) and "batch" in value else n
            found.update(figures(value, f"{path}/{name}".strip("/")))
    return found


def run_once(checkout: Path, script: str, args: list[str]) -> dict[str, float]:
    results = checkout / "bench" / "results" / f"{Path(script).stem}.json"
    kept = results.read_bytes() if results.exists() else None
    try:
        subprocess.run([str(checkout / ".venv" / "bin" / "python"), f"bench/{script}", *args],
                       cwd=checkout, check=True)
        return figures(json.loads(results.read_text()))
    finally:
        if kept is None:
            results.unlink(missing_ok=True)
        else:
            results.write_bytes(kept)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True, help="the other checkout")
    parser.add_argument("--after", type=Path, default=HERE,
                        help="the checkout measured against it (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for side in order:
            log(f"round {r + 1}/{args.rounds}: {side} ({sides[side]})")
            runs[side].append(run_once(sides[side], args.script, args.args))
    table = {}
    for case in runs["after"][0]:
        before = [run[case] for run in runs["before"] if case in run]
        after = [run[case] for run in runs["after"]]
        ratios = [a / b for a, b in zip(after, before, strict=False) if b]
        table[case] = {"before": statistics.median(before), "after": statistics.median(after),
                       "ratio_median": round(statistics.median(ratios), 3),
                       "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
                       "before_rounds": before, "after_rounds": after}
        print(f"| {case} | {table[case]['before']:.0f} | {table[case]['after']:.0f} | "
              f"{table[case]['ratio_median']:.3f} ({table[case]['ratio_min']:.3f}-"
              f"{table[case]['ratio_max']:.3f}) |")
    out = HERE / "bench" / "results" / f"alternate-{Path(args.script).stem}.json"
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False) as tmp:
        json.dump({"script": args.script, "args": args.args, "rounds": args.rounds,
                   "before": str(sides["before"]), "cases": table}, tmp, indent=1)
    shutil.move(tmp.name, out)


if __name__ == "__main__":
    main()
