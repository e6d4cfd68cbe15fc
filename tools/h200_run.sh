#!/usr/bin/env bash
# On the H200 machine, from the repository root: build with nvcc (sm_90a), run the whole
# test suite (host + device), optionally the benchmarks and the sanitizers,
# and, with GEN_GOLDEN=1, regenerate the golden fp8 data first. Logs and JSON
# go to $OUT; a short summary goes to stdout.
#   GEN_GOLDEN=1   regenerate tests/data from the hardware (then commit it)
#   BENCH=full|quick|0   run bench_producers (default full)
#   SANITIZE=1     compute-sanitizer memcheck + racecheck on the device tests
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
cmake -S . -B build/h200 -G Ninja -DFP8SCALE_CUDA=ON -DFP8SCALE_AMD_ISA=OFF -DCMAKE_BUILD_TYPE=Release \
  > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
start=$(date +%s)
cmake --build build/h200 -j16 > "$OUT/build.log" 2>&1 || { grep -B2 -A10 -E "error" "$OUT/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
if [ "${GEN_GOLDEN:-0}" = 1 ]; then
  mkdir -p tests/data
  build/h200/tests/device/gen_fp8_golden tests/data || exit 1
  python3 tools/gen_mldtypes_reference.py tests/data || exit 1
  cp tests/data/*.golden "$OUT/"
fi
start=$(date +%s)
ctest --test-dir build/h200 --output-on-failure -j4 > "$OUT/ctest.log" 2>&1
rc=$?
echo "ctest: $(( $(date +%s) - start )) s"
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  " "$OUT/ctest.log" | head -20
build/h200/tests/device/fp8scale_device_tests > "$OUT/device_tests.log" 2>&1
echo "device tests: exit $?"
grep -E "^\[ (bf16|fp16|fp32|e4m3)|PASSED|FAILED|Failure" "$OUT/device_tests.log" | head -60
# 3 repetitions in random interleaving, medians (as tools/h200_prebuilt.sh).
reps="--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true"
case "${BENCH:-full}" in
  full) timeout 400 build/h200/benchmarks/bench_producers $reps --benchmark_out="$OUT/bench.json" \
          --benchmark_out_format=json > "$OUT/bench.txt" 2>&1; echo "bench: exit $?" ;;
  quick) timeout 200 build/h200/benchmarks/bench_producers --quick $reps --benchmark_out="$OUT/bench.json" \
          --benchmark_out_format=json > "$OUT/bench.txt" 2>&1; echo "bench: exit $?" ;;
esac
if [ "${SANITIZE:-0}" = 1 ]; then
  filter='*bf16_e4m3fn_fp32*:*fp32_e4m3fnuz_ue8m0*:Materialize*:Fp8Device*:*Shapes.Bad*:*Shapes.Head*:*Refuses*'
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 99 build/h200/tests/device/fp8scale_device_tests \
      --gtest_filter="$filter" > "$OUT/sanitizer-$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1))"
  done
fi
exit $rc
