#!/usr/bin/env bash
# Bit-for-bit A/B of two versions of the library headers on the GPU.
#
#   tools/h200_bits_ab.sh [OLD_INCLUDE_DIR] [NEW_INCLUDE_DIR]
#
# Builds tools/bits_sweep.cu twice, once against each include directory
# (defaults: build/old/include and include), into build/bits/{old,new}, runs
# both, writes build/bits/{old,new}.txt and diffs them. Prints
# "bits: identical (N configs)" and exits 0 when every output byte of every
# configuration matches; otherwise prints the differing lines and exits 1
# (2 when a build or a run failed).
#
# The old snapshot, made where git history is (build/ is ignored, so carry it
# to the GPU machine):
#   mkdir -p build/old && git archive <commit> include | tar -x -C build/old
# or let this script make it: BITS_OLD_REF=<commit> (only when OLD is missing).
#
# Environment:
#   NVCC             default nvcc (/usr/local/cuda/bin first on PATH)
#   BITS_ARCH_FLAGS  default "-gencode arch=compute_90a,code=sm_90a": the same
#                    sm_90a code as -arch=sm_90a (which with CUDA 13 also runs
#                    cicc a second time for an embedded compute_90 PTX the H200
#                    never loads), in about 60% of the compile time. Both builds
#                    take the same flags, so the A/B holds for any of them.
#   BITS_NVCC_FLAGS  extra flags for both builds
#   BITS_OUT         default build/bits
#   BITS_STEP        all (default) | build | run: one build of this TU takes
#                    ~9 CPU-minutes on the build machine; on a machine with a
#                    per-command limit, build in one call and run in the next
#                    (run reuses build/bits/{old,new}).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
OLD=${1:-build/old/include}
NEW=${2:-include}
OUT=${BITS_OUT:-build/bits}
ARCH_FLAGS=${BITS_ARCH_FLAGS:--gencode arch=compute_90a,code=sm_90a}
STEP=${BITS_STEP:-all}
export PATH=/usr/local/cuda/bin:$PATH
NVCC=${NVCC:-nvcc}
SRC=tools/bits_sweep.cu

case "$STEP" in all | build | run) ;; *)
  echo "bits: BITS_STEP must be all, build or run (got '$STEP')" >&2
  exit 2
  ;;
esac
if [ ! -e "$OLD" ] && [ -n "${BITS_OLD_REF:-}" ]; then
  # OLD is <dir>/include: the snapshot goes into <dir>.
  if ! { mkdir -p "$(dirname "$OLD")" && git archive "$BITS_OLD_REF" include | tar -x -C "$(dirname "$OLD")"; }; then
    echo "bits: could not snapshot $BITS_OLD_REF into $(dirname "$OLD")" >&2
    exit 2
  fi
fi
for d in "$OLD" "$NEW"; do
  if [ ! -f "$d/fp8scale/fp8scale.hpp" ]; then
    echo "bits: no fp8scale/fp8scale.hpp under '$d'" >&2
    echo "  make the old snapshot with: mkdir -p build/old && git archive <commit> include | tar -x -C build/old" >&2
    exit 2
  fi
done
mkdir -p "$OUT" || exit 2

# Both builds at once (one nvcc each); each log kept.
build() {  # build <name> <include dir>
  local t0=$SECONDS
  # shellcheck disable=SC2086
  "$NVCC" -std=c++17 -O2 $ARCH_FLAGS ${BITS_NVCC_FLAGS:-} -I"$2" "$SRC" -o "$OUT/$1" >"$OUT/$1.build.log" 2>&1
  local rc=$?
  echo "bits: built $1 against $2 in $((SECONDS - t0)) s (rc $rc)" >&2
  return $rc
}
if [ "$STEP" != run ]; then
  build old "$OLD" &
  pid_old=$!
  build new "$NEW" &
  pid_new=$!
  wait $pid_old
  rc_old=$?
  wait $pid_new
  rc_new=$?
  if [ $rc_old -ne 0 ] || [ $rc_new -ne 0 ]; then
    [ $rc_old -ne 0 ] && { echo "bits: the old build failed:" >&2; tail -n 40 "$OUT/old.build.log" >&2; }
    [ $rc_new -ne 0 ] && { echo "bits: the new build failed:" >&2; tail -n 40 "$OUT/new.build.log" >&2; }
    exit 2
  fi
  [ "$STEP" = build ] && exit 0
fi
for b in old new; do
  [ -x "$OUT/$b" ] || { echo "bits: no $OUT/$b; build first (BITS_STEP=build or all)" >&2; exit 2; }
done

# One run at a time: both use the whole GPU.
run() {  # run <name>
  local t0=$SECONDS
  "$OUT/$1" >"$OUT/$1.txt" 2>"$OUT/$1.err"
  local rc=$?
  echo "bits: ran $1 in $((SECONDS - t0)) s (rc $rc, $(grep -c '^FAIL ' "$OUT/$1.txt") FAIL lines)" >&2
  if [ $rc -ne 0 ] || ! tail -n 1 "$OUT/$1.txt" | grep -q '^configs [0-9]*$'; then
    echo "bits: $1 did not complete (rc $rc); last lines:" >&2
    tail -n 5 "$OUT/$1.txt" >&2
    tail -n 5 "$OUT/$1.err" >&2
    return 1
  fi
  return 0
}
run old
rc_old=$?
run new
rc_new=$?

if diff "$OUT/old.txt" "$OUT/new.txt" >"$OUT/diff.txt"; then
  if [ $rc_old -ne 0 ] || [ $rc_new -ne 0 ]; then
    echo "bits: outputs equal but a run did not complete" >&2
    exit 2
  fi
  n=$(tail -n 1 "$OUT/new.txt" | awk '{print $2}')
  echo "bits: identical ($n configs)"
  exit 0
fi
lines=$(grep -c '^[<>]' "$OUT/diff.txt")
echo "bits: DIFFERENT: $lines differing lines (< old $OLD, > new $NEW; full diff in $OUT/diff.txt)"
head -n 200 "$OUT/diff.txt"
[ "$(wc -l <"$OUT/diff.txt")" -gt 200 ] && echo "... (truncated; see $OUT/diff.txt)"
[ $rc_old -ne 0 ] || [ $rc_new -ne 0 ] && exit 2
exit 1
