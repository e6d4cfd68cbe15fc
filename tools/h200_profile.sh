#!/usr/bin/env bash
# Nsight Compute on the producers (prebuilt bench_producers in .devbin/, as in
# tools/h200_prebuilt.sh): one kernel of each named benchmark, clocks left alone.
#   PROFILE="rmsnorm_quant/row_major/1/ group_quant/row_major/1/" bash tools/h200_profile.sh
#   KERNEL (ncu -k, default 'regex:Quant|moveBytes'), SECTIONS (extra ncu
#   sections, e.g. "SchedulerStats InstructionStats"), SOURCE=1: also the
#   per-instruction table (SASS, executions, warp stall samples) of each
#   profiled kernel as CSV, $OUT/ncu_<bench>_source.csv (ncu --page source).
#   METRICS (comma-separated ncu metric names): also collect these, e.g.
#   "dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread".
# The benchmark binary runs its copy baseline first: KERNEL must not match
# copyKernel.
# (Google Benchmark appends "/iterations:3/manual_time" to every name, so end
# a pattern with "/", not "$".)
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devbin:${LD_LIBRARY_PATH:-}
for bench in ${PROFILE:-rmsnorm_quant/row_major/1/ group_quant/row_major/1/ group_quant/row_major/8192/}; do
  name=$(echo "$bench" | tr -c 'A-Za-z0-9_\n' '_')
  extra=()
  for s in ${SECTIONS:-}; do extra+=(--section "$s"); done
  [ "${SOURCE:-0}" = 1 ] && extra+=(--section SourceCounters -f -o "$OUT/ncu_$name")
  [ -n "${METRICS:-}" ] && extra+=(--metrics "$METRICS")
  timeout 120 ncu --clock-control none --cache-control none --graph-profiling node -k "${KERNEL:-regex:Quant|moveBytes}" -c 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis ${extra[@]+"${extra[@]}"} \
    .devbin/bench_producers --benchmark_filter="$bench" > "$OUT/ncu_$name.txt" 2>&1
  echo "== $bench (exit $?)"
  if [ "${SOURCE:-0}" = 1 ]; then
    # With -o the metrics go to the report, not to stdout: print them from it.
    ncu -i "$OUT/ncu_$name.ncu-rep" > "$OUT/ncu_$name.txt" 2>&1
    ncu -i "$OUT/ncu_$name.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_${name}_source.csv" 2>&1
    rm -f "$OUT/ncu_$name.ncu-rep"
  fi
  [ -n "${METRICS:-}" ] && grep -E "^\s+(${METRICS//,/|}) " "$OUT/ncu_$name.txt" | awk '{print "  " $1, $(NF-1), $NF}'
  grep -E "Duration|Elapsed Cycles|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Stall|L2 Hit|Waves Per SM|Issue Slots|Issued Ipc|No Eligible|Executed Instructions " "$OUT/ncu_$name.txt" | head -30
done
