"""The combined coverage data (`coverage combine` first) in two parts: the total, and every
module of queen_trio under the threshold, lowest first. It never fails on a number: coverage
is a map of what the tests leave untouched, not a gate.

    python tools/coverage_report.py [--under 80]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import coverage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--under", type=float, default=80.0,
                        help="list the modules below this percentage (default 80)")
    args = parser.parse_args()
    cov = coverage.Coverage()
    cov.load()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "coverage.json"
        cov.json_report(outfile=str(out))
        report = json.loads(out.read_text())
    low = sorted((summary["summary"]["percent_covered"], name)
                 for name, summary in report["files"].items()
                 if summary["summary"]["percent_covered"] < args.under)
    totals = report["totals"]
    print(f"total: {totals['percent_covered']:.1f} % of {totals['num_statements']} statements")
    print(f"modules under {args.under:g} %: {len(low)}")
    for percent, name in low:
        print(f"  {percent:5.1f} %  {name}")


if __name__ == "__main__":
    main()
