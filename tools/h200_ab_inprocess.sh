#!/usr/bin/env bash
# In-process A/B of the producer launchers of two library versions
# (tools/ab_inprocess.cu says why and how it times).
#   build (any machine with nvcc):  AB_OLD=<commit> bash tools/h200_ab_inprocess.sh build
#     puts build/abip/{libab_old.so, libab_new.so, ab_inprocess}: the old side
#     from <commit>'s include/, the new side from the working tree's.
#   run (on the GPU):               bash tools/h200_ab_inprocess.sh run [--pairs N] [--filter REGEX] [--json FILE]
# NVCC (default nvcc) and AB_ARCH_FLAGS (default sm_90a code only) may be set.
set -euo pipefail
step=${1:?usage: h200_ab_inprocess.sh build|run [args]}
shift
dir=build/abip
case "$step" in
  build)
    : "${AB_OLD:?set AB_OLD to the baseline commit}"
    nvcc=${NVCC:-nvcc}
    arch=${AB_ARCH_FLAGS:--gencode arch=compute_90a,code=sm_90a}
    rm -rf "$dir" && mkdir -p "$dir/old"
    git archive "$AB_OLD" include | tar -x -C "$dir/old"
    lib="-std=c++17 -O2 $arch -shared -Xcompiler -fPIC tools/ab_side.cu"
    # shellcheck disable=SC2086
    $nvcc $lib -I"$dir/old/include" -o "$dir/libab_old.so" &
    # shellcheck disable=SC2086
    $nvcc $lib -Iinclude -o "$dir/libab_new.so" &
    # shellcheck disable=SC2086
    $nvcc -std=c++17 -O2 $arch tools/ab_inprocess.cu -o "$dir/ab_inprocess" -ldl -lcuda &
    wait -n && wait -n && wait -n
    ;;
  run)
    "$dir/ab_inprocess" "$dir/libab_old.so" "$dir/libab_new.so" "$@"
    ;;
  *)
    echo "unknown step $step (build or run)" >&2
    exit 2
    ;;
esac
