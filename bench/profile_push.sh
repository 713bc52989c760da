#!/usr/bin/env bash
# Profile the broker under push load: py-spy samples the broker process while wrk runs.
#   bench/profile_push.sh BATCH SECONDS OUT.txt   (needs py-spy: pip install py-spy)
set -euo pipefail
batch=${1:-10}; seconds=${2:-10}; out=${3:-/tmp/push-profile.txt}
cd "$(dirname "$0")"
python - "$batch" "$seconds" "$out" <<'PY'
import subprocess, sys
from common import broker, database, wrk
from push import lua_script
batch, seconds, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
script = lua_script(batch, 100)
with database() as db_url, broker(db_url) as (url, proc):
    wrk(url + "/api/v1/push", script, connections=64, seconds=2)
    spy = subprocess.Popen(["py-spy", "record", "-p", str(proc.pid), "-d", str(seconds + 1),
                            "-f", "raw", "-o", out + ".raw", "-r", "200"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(wrk(url + "/api/v1/push", script, connections=64, seconds=seconds))
    spy.wait()
PY
python - "$out" <<'PY'
import collections, sys
out = sys.argv[1]
own = collections.Counter(); total = collections.Counter(); n = 0
for line in open(out + ".raw"):
    stack, _, count = line.rstrip().rpartition(" ")
    count = int(count); n += count
    frames = stack.split(";")
    own[frames[-1]] += count
    for f in set(frames):
        total[f] += count
with open(out, "w") as f:
    f.write(f"samples {n}\n== self ==\n")
    for k, v in own.most_common(40):
        f.write(f"{100*v/n:5.1f}% {k}\n")
    f.write("== inclusive ==\n")
    for k, v in total.most_common(80):
        f.write(f"{100*v/n:5.1f}% {k}\n")
print(open(out).read()[:6000])
PY
