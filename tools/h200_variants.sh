#!/usr/bin/env bash
# Several bench_producers builds on the H200 in rotating order, so that clock
# and thermal drift fall on all of them alike (tools/h200_ab.sh does two):
#   .devbin/<name> for each name in BINS (the first is the reference), and
#   .devbin/libbenchmark.so.1debian (as for tools/h200_prebuilt.sh)
# on the H200, from the repository root with .devbin/ copied there:
#   BINS="bench_producers bench_x bench_y" ROUNDS=5 FILTER='regex' bash tools/h200_variants.sh
#   (BINS required; ROUNDS default 3; FILTER, a Google Benchmark filter, default '^odd_m/')
# Round r runs the builds starting at index r mod n. Each run: every entry
# 3 times in random interleaving, medians. Prints per entry the median over
# rounds of each build and its ratio to the first build. JSONs go to $OUT.
set -u
OUT=${OUT:-/tmp/fp8scale-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devbin:${LD_LIBRARY_PATH:-}
: "${BINS:?set BINS to the .devbin/ binaries to compare, reference first}"
ROUNDS=${ROUNDS:-3}
FILTER=${FILTER:-'^odd_m/'}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
bins=($BINS)
flags="--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true"
for r in $(seq 1 $ROUNDS); do
  n=${#bins[@]}
  for i in $(seq 0 $((n-1))); do
    b=${bins[$(( (i + r) % n ))]}
    timeout 120 .devbin/$b $flags --benchmark_filter="$FILTER" --benchmark_out="$OUT/m_${b}_$r.json" --benchmark_out_format=json > /dev/null 2>&1 || echo "$b $r exit $?"
  done
done
python3 - "$OUT" "$ROUNDS" $BINS <<'PY'
import json, re, sys, statistics
out, rounds, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = {b: {} for b in bins}
for b in bins:
    for r in range(1, rounds + 1):
        try: d = json.load(open(f"{out}/m_{b}_{r}.json"))
        except Exception as e: print(b, r, e); continue
        for x in d["benchmarks"]:
            if x.get("aggregate_name") == "median":
                res[b].setdefault(re.sub(r"/iterations:\d+|/manual_time", "", x["run_name"]), []).append(x["us_per_call"])
names = sorted(set().union(*[set(v) for v in res.values()]))
print(f"{'entry':52s}" + "".join(f"{b:>14s}" for b in bins) + "   (median over rounds, us; ratio to first)")
for n in names:
    base = statistics.median(res[bins[0]].get(n, [float('nan')]))
    cells = []
    for b in bins:
        v = res[b].get(n)
        if not v: cells.append(f"{'-':>14s}"); continue
        m = statistics.median(v)
        cells.append(f"{m:8.2f} {m/base:5.3f}")
    print(f"{n:52s}" + "".join(cells))
PY
