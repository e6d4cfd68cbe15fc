#!/usr/bin/env bash
# A/B of two bench_producers builds on the H200, in alternating runs, so that
# clock and thermal drift fall on both sides alike:
#   .devbin/bench_old        the baseline build
#   .devbin/bench_producers  the change
#   .devbin/libbenchmark.so.1debian (as for tools/h200_prebuilt.sh)
# on the H200, from the repository root with .devbin/ copied there:
#   AB_FILTER='regex' AB_ROUNDS=3 bash tools/h200_ab.sh
#   AB_FILTER: Google Benchmark filter (names end in /iterations:3/manual_time:
#     end a pattern with "/", not "$"); AB_ROUNDS (default 3); AB_TIMEOUT
#     seconds per run (default 200); OUT: where the JSONs go.
# Odd rounds run old then new, even rounds new then old. Each run: every entry
# 3 times in random interleaving, medians. Prints one line per entry: the old
# and new medians of each round (us) and new/old of their means.
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devbin:${LD_LIBRARY_PATH:-}
filter=${AB_FILTER:-'^(group|rmsnorm|silu_clamp)_quant/(row|col)_major/(1|64|8192|16384|65536)/'}
rounds=${AB_ROUNDS:-3}
flags="--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true"
for r in $(seq 1 "$rounds"); do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for side in $order; do
    bin=.devbin/bench_producers; [ "$side" = old ] && bin=.devbin/bench_old
    timeout "${AB_TIMEOUT:-200}" "$bin" $flags --benchmark_filter="$filter" \
      --benchmark_out="$OUT/ab_${side}_$r.json" --benchmark_out_format=json > /dev/null 2>&1 ||
      echo "$side round $r: exit $?"
  done
done
python3 - "$OUT" "$rounds" <<'PY'
import json, re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def medians(path):
    try:
        data = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"{path}: no result ({e})")
        return {}
    res = {}
    for b in data.get("benchmarks", []):
        if b.get("aggregate_name") == "median":
            res[re.sub(r"/iterations:\d+|/manual_time", "", b["run_name"])] = b["us_per_call"]
    return res
old = [medians(f"{out}/ab_old_{r}.json") for r in range(1, rounds + 1)]
new = [medians(f"{out}/ab_new_{r}.json") for r in range(1, rounds + 1)]
for name in sorted(set().union(*old, *new)):
    o = [d[name] for d in old if name in d]
    n = [d[name] for d in new if name in d]
    ratio = f"{sum(n) / len(n) / (sum(o) / len(o)):.3f}" if o and n else "-"
    print(f"{name:44s} old " + " ".join(f"{x:8.2f}" for x in o) + "  new " +
          " ".join(f"{x:8.2f}" for x in n) + f"  new/old {ratio}")
PY
