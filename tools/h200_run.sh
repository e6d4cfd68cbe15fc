#!/usr/bin/env bash
# One device-tool call on the H200: build with nvcc (sm_90a), run the whole
# test suite (host + device), the sanitizers over the device tests, and, with
# GEN_GOLDEN=1, regenerate the golden fp8 data first. Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/fp8scale-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1
cmake -S . -B build/h200 -G Ninja -DFP8SCALE_CUDA=ON -DFP8SCALE_AMD_ISA=OFF -DCMAKE_BUILD_TYPE=Release \
  > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build/h200 -j16 > "$OUT/build.log" 2>&1 || { grep -B2 -A10 -E "error" "$OUT/build.log" | head -60; exit 1; }
if [ "${GEN_GOLDEN:-0}" = 1 ]; then
  mkdir -p tests/data
  build/h200/tests/device/gen_fp8_golden tests/data || exit 1
  python3 tools/gen_mldtypes_reference.py tests/data || exit 1
  cp tests/data/*.golden "$OUT/"
fi
ctest --test-dir build/h200 --output-on-failure -j8 > "$OUT/ctest.log" 2>&1
rc=$?
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | head -40
build/h200/tests/device/fp8scale_device_tests 2>&1 | grep -E "^\[ (e4m3|  PASSED|  FAILED|  SKIPPED)" | head -20
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 99 build/h200/tests/device/fp8scale_device_tests \
    > "$OUT/sanitizer-$tool.log" 2>&1
  echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1))"
done
exit $rc
