#!/usr/bin/env python3
"""Checks the structure rules of the library headers and the programs.

  python3 tests/structure/check_structure.py [REPO_ROOT]

Rules (each violation is printed as file:line: rule; exit 1 if any):
  layers     an include under include/fp8scale/ goes only down the layer
             order below: core and detail/ < spec/ < reference/, producers/,
             allreduce/, consumers/, with producers/ allowed to include
             allreduce/ (the fused producer runs on the transport) and
             nothing below including producers/ or consumers/;
  host-only  spec/ and reference/ hold no device code (no kernels, no
             FP8SCALE_HAS_DEVICE blocks, no device-only functions);
  vendor     compiler and vendor macros (__CUDA_ARCH__, __HIPCC__, ...) are
             tested only in platform.hpp;
  address    scale address arithmetic with an ld (g * ld + m, m * ld + g)
             lives only in scale_view.hpp: everything else indexes through a
             view or its layout;
  programs   apps/ include nothing from benchmarks/ (timing helpers both use
             are in support/).
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
INC = ROOT / "include" / "fp8scale"

# The layer of each directory under include/fp8scale ("" is the top level).
LAYER = {"": 0, "detail": 0, "spec": 1, "reference": 2, "allreduce": 2, "consumers": 2, "producers": 3}
# What a directory may include beyond its own layer and those below it.
FORBIDDEN = {
    "": {"spec", "reference", "allreduce", "consumers", "producers"},
    "detail": {"spec", "reference", "allreduce", "consumers", "producers"},
    "spec": {"reference", "allreduce", "consumers", "producers"},
    "reference": {"allreduce", "consumers", "producers"},
    "allreduce": {"reference", "consumers", "producers"},
    "consumers": {"reference", "allreduce", "producers"},
    "producers": {"reference", "consumers"},
}
UMBRELLA = {"fp8scale.hpp"}  # includes every layer by design
HOST_ONLY = {"spec", "reference"}
DEVICE_CODE = re.compile(r"FP8SCALE_GLOBAL|__global__|FP8SCALE_HAS_DEVICE|\bFP8SCALE_DEVICE\b(?!_PASS)")
VENDOR = re.compile(r"__CUDA_ARCH__|__CUDACC__|__NVCC__|CUDART_VERSION|__HIPCC__|__HIP_DEVICE_COMPILE__|"
                    r"__HIP_PLATFORM_|HIP_VERSION|__AMDGCN|__gfx9|__clang_major__|__GNUC__")
# A scale view's ld (v.ld(), or a bare `ld`) in an offset: x * ld + y or
# ld * x + y. Row strides of other buffers (in.ld, ldx, q.ld) are not scale
# addresses.
_SCALE_LD = r"(?:[\w>.-]*\.ld\(\)|(?<![\w.>])ld\b)"
ADDRESS = re.compile(r"\*\s*" + _SCALE_LD + r"\s*\+|" + _SCALE_LD + r"\s*\*\s*[\w.()]+\s*\+")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def code_lines(path):
    """(line number, text without // comments) of a source file."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        yield n, line.split("//", 1)[0]


def main():
    problems = []
    for path in sorted(INC.rglob("*.hpp")):
        rel = path.relative_to(INC)
        top = rel.parts[0] if len(rel.parts) > 1 else ""
        for n, line in code_lines(path):
            where = f"include/fp8scale/{rel}:{n}"
            m = INCLUDE.match(line)
            if m and rel.name not in UMBRELLA:
                target = (path.parent / m.group(1)).resolve()
                try:
                    trel = target.relative_to(INC.resolve())
                except ValueError:
                    trel = None
                if trel is not None:
                    ttop = trel.parts[0] if len(trel.parts) > 1 else ""
                    if ttop in FORBIDDEN.get(top, set()):
                        problems.append(f"{where}: layers: {top or 'core'}/ includes {ttop}/ ({m.group(1)})")
            if top in HOST_ONLY and DEVICE_CODE.search(line):
                problems.append(f"{where}: host-only: device code in {top}/: {line.strip()}")
            if rel.name != "platform.hpp" and VENDOR.search(line):
                problems.append(f"{where}: vendor: macro tested outside platform.hpp: {line.strip()}")
            if rel.name != "scale_view.hpp" and ADDRESS.search(line):
                problems.append(f"{where}: address: ld arithmetic outside the layout types: {line.strip()}")
    for path in sorted((ROOT / "apps").rglob("*")):
        if path.suffix not in {".cpp", ".cu", ".hpp", ".cuh", ".h"}:
            continue
        for n, line in code_lines(path):
            m = INCLUDE.match(line)
            if m and ((ROOT / "benchmarks" / m.group(1)).exists() or m.group(1).startswith("benchmarks/")):
                problems.append(f"{path.relative_to(ROOT)}:{n}: programs: includes {m.group(1)} from benchmarks/")
    for p in problems:
        print(p)
    print(f"check_structure: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
