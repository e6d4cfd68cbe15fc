#!/usr/bin/env bash
# Runs the fused allreduce + RMSNorm quant tests and benchmark on the H200 from
# binaries built elsewhere and copied into .devbin/:
#   on the build machine:
#     cmake -S . -B build/ar -G Ninja -DFP8SCALE_CUDA=ON -DFP8SCALE_AMD_ISA=OFF -DCMAKE_BUILD_TYPE=Release
#     cmake --build build/ar -j1 --target fp8scale_allreduce_tests bench_allreduce
#     mkdir -p .devbin && cp build/ar/tests/device/fp8scale_allreduce_tests \
#       build/ar/benchmarks/bench_allreduce /lib/x86_64-linux-gnu/libbenchmark.so.1debian .devbin/
#   then on the H200, from the repository root with .devbin/ copied there:
#     bash tools/h200_allreduce.sh
#   TESTS=gtest filter (default all)   BENCH=1|0 (default 1)
#   FP8SCALE_AR_TIMEOUT_MS: spin limit of the tests' waits (default 5000)
# W ranks are simulated on the one GPU: one process, one stream per rank, all
# kernels co-resident. Do not shard the test binary over processes (kernels of
# different processes do not run concurrently) and do not run it under
# compute-sanitizer (it serializes kernels: every spin-wait would time out).
# Logs and the benchmark JSON go to ${OUT:-/tmp/fp8scale-out}; a short summary
# goes to stdout.
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devbin:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
# The binaries set these too, unless already set: enough hardware queues for
# 8 rank streams, and no lazy kernel loading while a rank spins.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
export CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}

timeout 20 nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv,noheader
for b in fp8scale_allreduce_tests bench_allreduce; do
  [ -x ".devbin/$b" ] || { echo "missing .devbin/$b (see the header of tools/h200_allreduce.sh)"; exit 2; }
done
# libnccl.so.2 (the test links NCCL for the world-size-1 fallback test): if the
# CUDA directories lack it, try the pip package nvidia-nccl.
if timeout 20 ldd .devbin/fp8scale_allreduce_tests | grep -q "libnccl.so.2 => not found"; then
  nccl_dir=$(timeout 20 python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) + "/lib")' 2>/dev/null)
  [ -n "$nccl_dir" ] && export LD_LIBRARY_PATH=$nccl_dir:$LD_LIBRARY_PATH
  echo "libnccl.so.2 not in the CUDA directories; trying ${nccl_dir:-<no python nvidia.nccl>}"
fi
for b in fp8scale_allreduce_tests bench_allreduce; do
  timeout 20 ldd ".devbin/$b" | grep -E "not found|libnccl|libbenchmark" | sed "s|^[[:space:]]*|$b: |"
done

# ---- tests -------------------------------------------------------------------
log="$OUT/allreduce_tests.log"
start=$(date +%s)
timeout "${TEST_TIMEOUT:-300}" .devbin/fp8scale_allreduce_tests --gtest_filter="${TESTS:-*}" > "$log" 2>&1
rc=$?
[ $rc = 124 ] && echo "allreduce tests: KILLED by the ${TEST_TIMEOUT:-300} s timeout (a hang: see the last lines below)"
echo "allreduce tests: exit $rc in $(( $(date +%s) - start )) s;" \
  "$(grep -c '^\[       OK \]' "$log") passed, $(grep -c '^\[  FAILED  \].*ms)' "$log") failed," \
  "$(grep -c '^\[  SKIPPED \].*ms)' "$log") skipped"
grep -E "^\[  FAILED  \].*ms\)" "$log"
grep -E "^\[allreduce\]|^\[ allreduce" "$log"
grep -E "Failure|Expected|Which is|  Actual|differ|not zeroed|fp8scale::|NaN reached|wrong output" "$log" | head -40
grep -E "^\[       OK \]" "$log" | sed -E 's/.*OK \] (.*) \(([0-9]+) ms\)/\2 ms  \1/' | sort -rn | head -6
[ $rc = 124 ] && tail -20 "$log"

# ---- benchmark ---------------------------------------------------------------
if [ "${BENCH:-1}" = 1 ]; then
  start=$(date +%s)
  timeout "${BENCH_TIMEOUT:-300}" .devbin/bench_allreduce --benchmark_out="$OUT/bench_allreduce.json" \
    --benchmark_out_format=json > "$OUT/bench_allreduce.txt" 2>&1
  brc=$?
  echo "bench: exit $brc in $(( $(date +%s) - start )) s"
  grep -E "^bench_allreduce|^summary:|fp8scale::|\.cu:[0-9]+ " "$OUT/bench_allreduce.txt"
  [ $brc != 0 ] && tail -15 "$OUT/bench_allreduce.txt"
fi
exit $rc
