#!/usr/bin/env python3
"""Checks the structure rules of the library headers and the programs.

  python3 tests/structure/check_structure.py [--expect-each-rule] [REPO_ROOT]

--expect-each-rule inverts the verdict for a tree built to break the rules
(tests/structure/violations): exit 0 only when every rule below reports at
least one problem there.

Rules (each violation is printed as "file:line: rule: ..."; exit 1 if any,
and exit 2 when REPO_ROOT holds no include/fp8scale headers to check):
  layers     an include under include/fp8scale/ goes only down the layers:
             core (the top level) and detail/, then spec/, then reference/,
             allreduce/ and consumers/, then producers/ (which may include
             allreduce/: the fused producer runs on the transport). A
             directory outside these is itself a violation;
  host-only  spec/ and reference/ hold no device code: no kernels, no
             device-only functions or variables, no FP8SCALE_HAS_DEVICE
             blocks. Host-device functions may take the device pass's
             intrinsics behind FP8SCALE_DEVICE_PASS (siluClamp does);
  vendor     compiler and vendor macros (__CUDA_ARCH__, __HIPCC__, ...) are
             tested only in platform.hpp, which turns them into the
             library's own FP8SCALE_* macros;
  address    scale address arithmetic with an ld (g * ld + m, m + g * ld,
             m * ld + g) lives only in layouts.hpp: everything else
             indexes through a view or its layout;
  programs   apps/ include nothing from benchmarks/ (the timing helpers both
             use are in support/).
"""
import pathlib
import re
import sys

ARGS = [a for a in sys.argv[1:] if a != "--expect-each-rule"]
EXPECT_EACH_RULE = len(ARGS) != len(sys.argv) - 1
RULES = ("layers", "host-only", "vendor", "address", "programs")
ROOT = pathlib.Path(ARGS[0] if ARGS else pathlib.Path(__file__).resolve().parents[2]).resolve()
INC = ROOT / "include" / "fp8scale"

# The layer of each directory under include/fp8scale ("" is the top level).
# A header may include its own directory, lower layers, and the pairs in
# ALSO; producers/ is the only layer 3 directory.
LAYER = {"": 0, "detail": 0, "spec": 1, "reference": 2, "allreduce": 2, "consumers": 2, "producers": 3}
ALSO = {("producers", "allreduce"), ("", "detail"), ("detail", "")}  # core and detail/ are one layer
UMBRELLA = {"fp8scale.hpp"}  # includes every layer by design
HOST_ONLY = {"spec", "reference"}
HEADER_SUFFIXES = {".hpp", ".h", ".cuh", ".inl"}
DEVICE_CODE = re.compile(r"FP8SCALE_GLOBAL|__global__|__device__|__shared__|__constant__|\bthreadIdx\b|"
                         r"\bblockIdx\b|FP8SCALE_HAS_DEVICE|\bFP8SCALE_DEVICE\b")
VENDOR = re.compile(r"__CUDA_ARCH__|__CUDACC__|__CUDACC_VER|__NVCC__|CUDART_VERSION|__CUDA_API_VERSION|"
                    r"__HIPCC__|__HIP__|__HIP_DEVICE_COMPILE__|__HIP_PLATFORM_|HIP_VERSION|__AMDGCN|__gfx9|"
                    r"__clang_major__|__GNUC__|_MSC_VER")
# A scale view's ld (v.ld(), or a bare `ld`) multiplied in an offset that
# adds something: x * ld + y, y + x * ld, ld * x + y, y + ld * x. Row strides
# of other buffers (in.ld, ldx, q.ld) are not scale addresses.
_SCALE_LD = r"(?:[\w>.-]*\.ld\(\)|(?<![\w.>])ld\b(?!\s*\())"
_TERM = r"[\w.()>-]+"
ADDRESS = re.compile(r"\*\s*" + _SCALE_LD + r"\s*\+|" + _SCALE_LD + r"\s*\*\s*" + _TERM + r"\s*\+|"
                     r"\+\s*" + _TERM + r"\s*\*\s*" + _SCALE_LD + r"|\+\s*" + _SCALE_LD + r"\s*\*")
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')


def code_lines(path):
    """(line number, text without // comments) of a source file."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        yield n, line.split("//", 1)[0]


def included_header(path, name):
    """The header under include/fp8scale that `#include name` in `path` names, or None."""
    candidates = [(path.parent / name)]
    if name.startswith("fp8scale/"):
        candidates.append(INC.parent / name)
    for c in candidates:
        c = c.resolve()
        if c.is_file():
            try:
                return c.relative_to(INC)
            except ValueError:
                return None
    # Not found on disk (a typo, or a header that does not exist yet): judge
    # it by the path it spells.
    if name.startswith("fp8scale/"):
        return pathlib.PurePosixPath(name[len("fp8scale/"):])
    return None


def directory_of(rel):
    return rel.parts[0] if len(rel.parts) > 1 else ""


def main():
    headers = sorted(p for p in INC.rglob("*") if p.is_file() and p.suffix in HEADER_SUFFIXES) if INC.is_dir() else []
    if not headers:
        print(f"check_structure: no headers under {INC}: nothing to check")
        return 2
    problems = []
    for path in headers:
        rel = path.relative_to(INC)
        top = directory_of(rel)
        if top not in LAYER:
            problems.append(f"include/fp8scale/{rel}:1: layers: {top}/ is not a known layer ({', '.join(LAYER)})")
            continue
        for n, line in code_lines(path):
            where = f"include/fp8scale/{rel}:{n}"
            m = INCLUDE.match(line)
            if m and rel.name not in UMBRELLA:
                name = m.group(1) or m.group(2)
                target = included_header(path, name)
                if target is not None:
                    ttop = directory_of(target)
                    ok = ttop == top or (ttop in LAYER and LAYER[ttop] < LAYER[top]) or (top, ttop) in ALSO
                    if not ok:
                        problems.append(f"{where}: layers: {top or 'core'}/ includes {ttop or 'core'}/ ({name})")
            if top in HOST_ONLY:
                for hit in DEVICE_CODE.finditer(line):
                    if hit.group(0) == "FP8SCALE_DEVICE" and line[hit.end():].startswith("_PASS"):
                        continue
                    problems.append(f"{where}: host-only: device code in {top}/: {line.strip()}")
                    break
            if rel.name != "platform.hpp" and VENDOR.search(line):
                problems.append(f"{where}: vendor: macro tested outside platform.hpp: {line.strip()}")
            if rel.name != "layouts.hpp" and ADDRESS.search(line):
                problems.append(f"{where}: address: ld arithmetic outside the layout types: {line.strip()}")
    for path in sorted((ROOT / "apps").rglob("*")):
        if path.suffix not in {".cpp", ".cu", ".hpp", ".cuh", ".h"}:
            continue
        for n, line in code_lines(path):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(1) or m.group(2)
            if (ROOT / "benchmarks" / name).exists() or "benchmarks/" in name:
                problems.append(f"{path.relative_to(ROOT)}:{n}: programs: includes {name} from benchmarks/")
    for p in problems:
        print(p)
    print(f"check_structure: {len(headers)} headers, {len(problems)} problem(s)")
    if EXPECT_EACH_RULE:
        missed = [r for r in RULES if not any(f": {r}: " in p for p in problems)]
        print(f"check_structure: rules that found nothing: {', '.join(missed) or 'none'}")
        return 1 if missed else 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
