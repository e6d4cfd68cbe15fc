#!/usr/bin/env bash
# A/B of two bench_producers builds on the H200, in alternating runs, so that
# clock and thermal drift fall on both sides alike:
#   .devbin/bench_old  the baseline build      .devbin/bench_producers  the change
# device run with carry [".devbin"]:
#   AB_FILTER='regex' AB_ROUNDS=2 bash tools/h200_ab.sh
# Each run: every entry 3 times in random interleaving, medians. Prints one
# line per entry: the old and new medians of each round (us) and new/old of
# their means.
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devbin:${LD_LIBRARY_PATH:-}
filter=${AB_FILTER:-'_quant/(row|col)_major/(1|64|8192|16384|65536)(/|$)'}
flags="--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true"
for r in $(seq 1 "${AB_ROUNDS:-2}"); do
  for side in old new; do
    bin=.devbin/bench_producers; [ "$side" = old ] && bin=.devbin/bench_old
    timeout "${AB_TIMEOUT:-200}" "$bin" $flags --benchmark_filter="$filter" \
      --benchmark_out="$OUT/ab_${side}_$r.json" --benchmark_out_format=json > /dev/null 2>&1 ||
      echo "$side round $r: exit $?"
  done
done
python3 - "$OUT" "${AB_ROUNDS:-2}" <<'PY'
import json, re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def medians(path):
    res = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            name = re.sub(r"/iterations:\d+|/manual_time", "", b["run_name"])
            res[name] = b["us_per_call"]
    return res
old = [medians(f"{out}/ab_old_{r}.json") for r in range(1, rounds + 1)]
new = [medians(f"{out}/ab_new_{r}.json") for r in range(1, rounds + 1)]
for name in sorted(old[0]):
    o = [d[name] for d in old if name in d]
    n = [d[name] for d in new if name in d]
    if not n:
        continue
    print(f"{name:44s} old " + " ".join(f"{x:8.2f}" for x in o) + "  new " +
          " ".join(f"{x:8.2f}" for x in n) + f"  new/old {sum(n) / len(n) / (sum(o) / len(o)):.3f}")
PY
