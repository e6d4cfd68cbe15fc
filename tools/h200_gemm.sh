#!/usr/bin/env bash
# Runs the block-scaled GEMM consumer's tests and benchmark on the H200 from
# binaries built elsewhere and copied into .devbin/:
#   on the build machine:
#     cmake -S . -B build/gemm -G Ninja -DFP8SCALE_CUDA=ON -DFP8SCALE_AMD_ISA=OFF -DCMAKE_BUILD_TYPE=Release
#     cmake --build build/gemm -j1 --target fp8scale_gemm_tests bench_gemm_consumer
#     mkdir -p .devbin && cp build/gemm/tests/device/fp8scale_gemm_tests \
#       build/gemm/benchmarks/bench_gemm_consumer /lib/x86_64-linux-gnu/libbenchmark.so.1debian .devbin/
#   then on the H200, from the repository root with .devbin/ copied there:
#     bash tools/h200_gemm.sh
#   TESTS=gtest filter (default all)   BENCH=1|0 (default 1)
#   SANITIZE=1: compute-sanitizer memcheck on the layout probe and the refusal tests
# Logs and the benchmark JSON go to ${OUT:-/tmp/fp8scale-out}; a short summary
# goes to stdout.
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devbin:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv,noheader
for b in fp8scale_gemm_tests bench_gemm_consumer; do
  [ -x ".devbin/$b" ] || { echo "missing .devbin/$b (see the header of tools/h200_gemm.sh)"; exit 2; }
  ldd ".devbin/$b" | grep -E "not found|libcublasLt" | sed "s|^[[:space:]]*|$b: |"
done

# ---- tests -------------------------------------------------------------------
log="$OUT/gemm_tests.log"
start=$(date +%s)
timeout "${TEST_TIMEOUT:-420}" .devbin/fp8scale_gemm_tests --gtest_filter="${TESTS:-*}" > "$log" 2>&1
rc=$?
echo "gemm tests: exit $rc in $(( $(date +%s) - start )) s;" \
  "$(grep -c '^\[       OK \]' "$log") passed, $(grep -c '^\[  FAILED  \].*ms)' "$log") failed," \
  "$(grep -c '^\[  SKIPPED \].*ms)' "$log") skipped"
grep -E "^\[gemm\] (cuBLASLt|CublasLtBlockGemm)" "$log"
grep -E "^\[  FAILED  \].*ms\)" "$log"
grep -E "Failure|Expected|Which is|  Actual|differ|unnoticed|did not read|indistinguishable|wrote output|not zero|different bits|fp8scale::" "$log" | head -30
echo "-- per producer over M x (N, K) (view == materialize; vs fp64; negative control) --"
awk '/^\[gemm-case\]/ {
  p = $2; n[p]++; yd[p] += $6; qd[p] += $7; pad[p] += $8; over[p] += $9; rr[p] += $16
  if ($10 > mr[p]) mr[p] = $10; if ($11 > rel[p]) rel[p] = $11; if ($12 > ea[p]) ea[p] = $12
  if ($3 >= 2) { nc[p]++; if ($13 > 0) caught[p]++; if (!(p in bmin) || $14 < bmin[p]) bmin[p] = $14 }
}
END {
  for (p in n)
    printf "%-12s %2d cases | bit diffs view vs materialize %d, fp8 %d, rerun %d, nonzero pad rows %d | vs fp64: %d over bound, max err/bound %.3g, max rel %.3g, max err/A %.3g | row-major-as-col caught in %d of %d, smallest max err/bound %.3g\n",
      p, n[p], yd[p], qd[p], rr[p], pad[p], over[p], mr[p], rel[p], ea[p], caught[p] + 0, nc[p] + 0, bmin[p]
}' "$log"
grep -E "^\[gemm\] layout probe" "$log"
grep -E "^\[gemm\] (first elements|  m=)" "$log"
grep -E "^\[gemm\] fp32 output" "$log"
echo "refusals printed: $(grep -c '^\[gemm\] refused as expected' "$log")"

# ---- benchmark ---------------------------------------------------------------
if [ "${BENCH:-1}" = 1 ]; then
  start=$(date +%s)
  timeout "${BENCH_TIMEOUT:-300}" .devbin/bench_gemm_consumer --benchmark_out="$OUT/bench_gemm.json" \
    --benchmark_out_format=json > "$OUT/bench_gemm.txt" 2>&1
  echo "bench: exit $? in $(( $(date +%s) - start )) s"
  grep -E "^bench_gemm_consumer:|^summary:|fp8scale::|CUBLAS_STATUS|\.cu:[0-9]+ " "$OUT/bench_gemm.txt"
fi

# ---- sanitizer -----------------------------------------------------------------
if [ "${SANITIZE:-0}" = 1 ]; then
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 .devbin/fp8scale_gemm_tests \
    --gtest_filter='*LayoutProbe*:*Refuses*' > "$OUT/gemm_memcheck.log" 2>&1
  echo "compute-sanitizer memcheck: exit $? ($(grep -E 'ERROR SUMMARY' "$OUT/gemm_memcheck.log" | tail -1))"
fi
exit $rc
