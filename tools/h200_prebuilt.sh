#!/usr/bin/env bash
# Runs the device tests and bench_producers on the H200 from binaries built
# elsewhere and copied into .devbin/, so that the GPU machine's time goes to
# running rather than compiling. On the build machine (nvcc, Debian 12):
#   cmake --preset cuda && cmake --build build/cuda --target fp8scale_device_tests bench_producers
#   mkdir -p .devbin && cp build/cuda/tests/device/fp8scale_device_tests \
#     build/cuda/benchmarks/bench_producers /lib/x86_64-linux-gnu/libbenchmark.so.1debian .devbin/
# then on the H200, from the repository root with .devbin/ copied there:
#   bash tools/h200_prebuilt.sh
#   TESTS=filter (default all)  BENCH=full|quick|tune|0 (BENCH_REPS=3)  SANITIZE=1|full
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devbin:${LD_LIBRARY_PATH:-}
export FP8SCALE_TEST_DATA_DIR=$PWD/tests/data
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
start=$(date +%s)
# The host references dominate the suite's time: run it as SHARDS gtest
# shards in parallel on the machine's cores (the GPU is shared by them).
shards=${SHARDS:-8}
pids=()
# The shared-memory control needs the GPU to itself (other shards' kernels
# overwrite shared memory between its two launches): it runs alone after them.
alone='*ControlStaleShared*'
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "${TEST_TIMEOUT:-300}" .devbin/fp8scale_device_tests \
    --gtest_filter="${TESTS:-*}-$alone" > "$OUT/device_tests.$i.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
timeout 60 .devbin/fp8scale_device_tests --gtest_filter="$alone" > "$OUT/device_tests.alone.log" 2>&1 || rc=1
cat "$OUT"/device_tests.*.log > "$OUT/device_tests.log"
rm -f "$OUT"/device_tests.*.log
echo "device tests: exit $rc in $(( $(date +%s) - start )) s; $(grep -c '^\[       OK \]' "$OUT/device_tests.log") passed, $(grep -c '^\[  FAILED  \].*ms)' "$OUT/device_tests.log") failed"
grep -E "^\[ (bf16|fp16|fp32|e4m3)|^\[  FAILED  \].*ms\)" "$OUT/device_tests.log" | head -60
grep -E "Failure|error:|Expected|Which is|  Actual|differ|not zeroed|holds" "$OUT/device_tests.log" | head -30
grep -E "^\[       OK \]" "$OUT/device_tests.log" | sed -E 's/.*OK \] (.*) \(([0-9]+) ms\)/\2 ms  \1/' | sort -rn | head -8
case "${BENCH:-0}" in
  full|quick|tune)
    start=$(date +%s)
    # BENCH_REPS repetitions (default 3) in random interleaving, medians
    # reported: single entries at large M stray by up to 10% on this machine.
    flag="--benchmark_repetitions=${BENCH_REPS:-3} --benchmark_enable_random_interleaving=true"
    flag="$flag --benchmark_report_aggregates_only=true"
    [ "$BENCH" = quick ] && flag="$flag --quick"
    # tune: the tuning entries and the producers' large-M rows, with the baselines
    [ "$BENCH" = tune ] && flag="$flag "'--benchmark_filter=copy_256|empty|tune/|_quant/(row|col)_major/(64|512|2048|8192|65536)(/|$)'
    timeout "${BENCH_TIMEOUT:-300}" .devbin/bench_producers $flag --benchmark_out="$OUT/bench.json" \
      --benchmark_out_format=json > "$OUT/bench.txt" 2>&1
    echo "bench: exit $? in $(( $(date +%s) - start )) s"
    grep -E "copy_256MiB|empty_kernel" "$OUT/bench.txt" ;;
esac
# SANITIZE=1: memcheck + racecheck on a filter (two type combinations of each
# typed suite and every non-typed test). SANITIZE=full: the whole suite, in
# SHARDS parallel shards per tool.
if [ "${SANITIZE:-0}" = 1 ]; then
  filter=${SANITIZE_FILTER:-'*bf16_e4m3fn_fp32*:*fp32_e4m3fnuz_ue8m0*:Materialize*:Fp8Device*:*Shapes.Bad*:*Shapes.Head*:*Refuses*'}
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 .devbin/fp8scale_device_tests \
      --gtest_filter="$filter" > "$OUT/sanitizer-$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1))"
  done
elif [ "${SANITIZE:-0}" = full ]; then
  for tool in memcheck racecheck; do
    start=$(date +%s)
    pids=()
    for i in $(seq 0 $((shards - 1))); do
      # The controls are left out: the PDL control needs kernels to overlap,
      # which the sanitizer prevents, and the shared-memory poison control
      # needs shared memory left as the last kernel wrote it.
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "${SANITIZE_TIMEOUT:-150}" compute-sanitizer --tool $tool \
        --error-exitcode 99 .devbin/fp8scale_device_tests --gtest_filter='-*ControlAKernelWithoutTheWait*:*ControlStaleShared*' \
        > "$OUT/sanitizer-$tool.$i.log" 2>&1 &
      pids+=($!)
    done
    codes=""
    for p in "${pids[@]}"; do wait "$p"; codes="$codes $?"; done
    echo "compute-sanitizer $tool (full suite, $shards shards): exit codes$codes in $(( $(date +%s) - start )) s"
    cat "$OUT"/sanitizer-$tool.*.log > "$OUT/sanitizer-$tool.log"; rm -f "$OUT"/sanitizer-$tool.*.log
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer-$tool.log" | sort | uniq -c
    echo "  tests passed under $tool: $(grep -cE '^\[       OK \]' "$OUT/sanitizer-$tool.log")"
  done
fi
exit $rc
