#!/usr/bin/env bash
# Nsight Compute on the producers (prebuilt bench_producers in .devbin/, as in
# tools/h200_prebuilt.sh): one kernel of each named benchmark, clocks left alone.
#   PROFILE="rmsnorm_quant/row_major/1/ group_quant/row_major/1/" bash tools/h200_profile.sh
# (Google Benchmark appends "/iterations:3/manual_time" to every name, so end
# a pattern with "/", not "$".)
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devbin:${LD_LIBRARY_PATH:-}
for bench in ${PROFILE:-rmsnorm_quant/row_major/1/ group_quant/row_major/1/ group_quant/row_major/8192/}; do
  name=$(echo "$bench" | tr -c 'A-Za-z0-9_\n' '_')
  timeout 120 ncu --clock-control none --graph-profiling node -k 'regex:Quant' -c 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis \
    .devbin/bench_producers --benchmark_filter="$bench" > "$OUT/ncu_$name.txt" 2>&1
  echo "== $bench (exit $?)"
  grep -E "Duration|Elapsed Cycles|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Stall|L2 Hit|Waves Per SM" "$OUT/ncu_$name.txt" | head -24
done
