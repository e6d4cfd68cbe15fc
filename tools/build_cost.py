#!/usr/bin/env python3
"""The build's kernel instantiations, read from its compiled objects.

Every device kernel a translation unit instantiates is compiled into that
unit's object, once per GPU arch, and that is most of what a build costs.
This script reads the device code embedded in each object of a CMake build
tree (CUDA: the cubins of .nv_fatbin; HIP: the code objects of the clang
offload bundle in .hip_fatbin) and prints, per target and arch, how many
kernels its objects compile ("total") and how many of them are distinct
("unique"); then the same for the whole build. total - unique is the work
spent compiling a kernel again that another object already has.

    tools/build_cost.py BUILD_DIR                   # the table
    tools/build_cost.py BUILD_DIR --json cost.json  # and the numbers as JSON
    tools/build_cost.py BUILD_DIR --budget tests/build_cost/budget.json --section main
        # fails (exit 1) when the build's unique or total count for an arch
        # is above the budget's (that section's), naming the arch and both
        # numbers
    tools/build_cost.py BUILD_DIR --binaries --times 10 --stages
        # also the kernels each linked program carries (its objects' and the
        # kernel library's),
        # the 10 slowest translation units and the seconds per part of the
        # build (fuzz, Python ops, CUDA, ...), from .ninja_log

Python and, for nvcc's compressed device code, the zstd program are all it
needs: the ELF files, the fatbin and the offload bundle are parsed here
(nvcc compresses a cubin with zstd where that saves space). A nested build
(any folder below with a CMakeCache.txt of its own: the HIP suite's,
build/<preset>/hip; the install test's example build) is a build tree of
its own: pass it separately. With Ninja, objects that build.ninja no
longer names (removed targets and sources) are left out.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
from collections import defaultdict
from typing import Dict, Iterator, List, Optional, Tuple

EM_CUDA = 190
EM_AMDGPU = 224
STO_CUDA_ENTRY = 0x10
# EF_AMDGPU_MACH values of the archs the project builds (LLVM's ELF.h).
AMDGPU_MACH = {0x30: "gfx908", 0x3F: "gfx90a", 0x40: "gfx940", 0x4B: "gfx941", 0x4C: "gfx942", 0x4F: "gfx950"}
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
FATBIN_MAGIC = 0xBA55ED50
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


# --- ELF -----------------------------------------------------------------------

class Elf:
    """The parts of a 64-bit little-endian ELF file this script reads."""

    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        self.data = data
        (self.machine,) = struct.unpack_from("<H", data, 18)
        (self.flags,) = struct.unpack_from("<I", data, 48)
        shoff, = struct.unpack_from("<Q", data, 40)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
        self.sections = []  # (name offset, type, offset, size, link, entsize)
        for i in range(shnum):
            name, stype, _flags, _addr, off, size, link, _info, _align, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", data, shoff + i * shentsize)
            self.sections.append((name, stype, off, size, link, entsize))
        strtab = self.sections[shstrndx] if shnum else None
        self.names = [self._str(strtab, s[0]) for s in self.sections] if strtab else []

    def _str(self, table, offset: int) -> str:
        start = table[2] + offset
        end = self.data.index(b"\0", start)
        return self.data[start:end].decode("utf-8", "replace")

    def section(self, name: str) -> Optional[bytes]:
        for n, s in zip(self.names, self.sections):
            if n == name and s[1] != 8:  # SHT_NOBITS has no bytes
                return self.data[s[2]:s[2] + s[3]]
        return None

    def symbols(self) -> Iterator[Tuple[str, int, int]]:
        """(name, st_info, st_other) of every symbol of .symtab."""
        for s in self.sections:
            if s[1] != 2:  # SHT_SYMTAB
                continue
            strtab = self.sections[s[4]]
            for off in range(s[2], s[2] + s[3], s[5] or 24):
                name, info, other = struct.unpack_from("<IBB", self.data, off)
                yield self._str(strtab, name), info, other


def fatbin_entries(fatbin: bytes) -> Iterator[Tuple[int, bytes]]:
    """(kind, payload) of each cubin entry (kind 2) of a fatbin.

    A fatbin is a 16-byte header (magic 0xBA55ED50, version, header size,
    size of what follows) and entries, each a header (kind, version, header
    size, payload size with padding; at 16 the compressed size, at 40 the
    flags, at 56 the uncompressed size) and its payload. nvcc compresses an
    entry when it saves space (CUDA 13: zstd, flag 0x8000; CUDA 12: LZ4,
    flag 0x2000): zstd payloads are expanded with the zstd program, LZ4 ones
    are refused by name. PTX entries (kind 1) are skipped unread.
    """
    pos = 0
    while pos + 16 <= len(fatbin):
        magic, _version, header, size = struct.unpack_from("<IHHQ", fatbin, pos)
        if magic != FATBIN_MAGIC:
            break
        entry, end = pos + header, pos + header + size
        while entry < end:
            kind, _v, eheader, payload_size = struct.unpack_from("<HHIQ", fatbin, entry)
            (compressed_size,) = struct.unpack_from("<I", fatbin, entry + 16)
            (flags,) = struct.unpack_from("<Q", fatbin, entry + 40)
            payload = fatbin[entry + eheader:entry + eheader + payload_size]
            entry += eheader + payload_size
            if kind != 2:
                continue
            if flags & 0x8000:
                payload = zstd_expand(payload[:compressed_size or len(payload)])
            elif flags & 0x2000:
                raise ValueError("an LZ4-compressed fatbin entry (CUDA 12): rebuild with -Xfatbin=-compress-all=false "
                                 "or nvcc --no-compress to read it")
            yield kind, payload
        pos = end


def zstd_expand(payload: bytes) -> bytes:
    try:
        done = subprocess.run(["zstd", "-d", "-c", "-q"], input=payload, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, check=False)
    except FileNotFoundError:
        raise SystemExit("build_cost: nvcc compressed device code with zstd and the zstd program is not "
                         "installed (Debian: apt-get install zstd)")
    if done.returncode != 0:
        raise ValueError(f"zstd could not expand a fatbin entry: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def cuda_kernels(fatbin: bytes) -> Dict[str, List[str]]:
    """Kernels per sm arch of the cubins in a .nv_fatbin section."""
    out: Dict[str, List[str]] = defaultdict(list)
    for _kind, payload in fatbin_entries(fatbin):
        if payload[:4] != b"\x7fELF":
            continue
        elf = Elf(payload)
        if elf.machine != EM_CUDA:
            continue
        # e_flags: the SM number in bits 8-15 in the ELF ABI of CUDA 12.8 and
        # later, in bits 0-7 before.
        sm = (elf.flags >> 8) & 0xFF or elf.flags & 0xFF
        arch = f"sm_{sm}"
        for name, info, other in elf.symbols():
            if info & 0xF == 2 and other & STO_CUDA_ENTRY:  # STT_FUNC, a __global__ entry
                out[arch].append(name)
    return out


def hip_kernels(fatbin: bytes) -> Dict[str, List[str]]:
    """Kernels per gfx arch of the code objects in a .hip_fatbin section."""
    out: Dict[str, List[str]] = defaultdict(list)
    if b"CCOB" in fatbin[:64] or (fatbin.find(BUNDLE_MAGIC) < 0 and b"CCOB" in fatbin):
        raise ValueError("compressed offload bundle: build without --offload-compress to read it")
    pos = fatbin.find(BUNDLE_MAGIC)
    while pos >= 0:
        (count,) = struct.unpack_from("<Q", fatbin, pos + 24)
        cursor = pos + 32
        for _ in range(count):
            off, size, tlen = struct.unpack_from("<QQQ", fatbin, cursor)
            cursor += 24 + tlen
            blob = fatbin[pos + off:pos + off + size]
            if blob[:4] != b"\x7fELF":
                continue
            elf = Elf(blob)
            if elf.machine != EM_AMDGPU:
                continue
            arch = AMDGPU_MACH.get(elf.flags & 0xFF, f"amdgpu_mach_{elf.flags & 0xFF:#x}")
            out[arch].extend(n[:-3] for n, _i, _o in elf.symbols() if n.endswith(".kd"))
        pos = fatbin.find(BUNDLE_MAGIC, cursor)
    return out


def object_kernels(path: str) -> Dict[str, List[str]]:
    """Kernels per arch compiled into one object file (empty for host code)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        elf = Elf(data)
    except (ValueError, struct.error):
        return {}
    kernels: Dict[str, List[str]] = defaultdict(list)
    if elf.machine == EM_AMDGPU:  # a device-only code object (tests/isa)
        arch = AMDGPU_MACH.get(elf.flags & 0xFF, f"amdgpu_mach_{elf.flags & 0xFF:#x}")
        kernels[arch] = [n[:-3] for n, _i, _o in elf.symbols() if n.endswith(".kd")]
        return kernels
    for section, parse in ((".nv_fatbin", cuda_kernels), (".hip_fatbin", hip_kernels)):
        blob = elf.section(section)
        if blob:
            try:
                found = parse(blob)
            except (ValueError, struct.error) as e:
                raise ValueError(f"{path}: {section}: {e}") from None
            for arch, names in found.items():
                kernels[arch].extend(names)
    return kernels


# --- The build tree ------------------------------------------------------------

def is_nested_build(folder: str, excluded: List[str]) -> bool:
    """A folder to leave out: a build tree of its own, or one the caller excludes."""
    return os.path.exists(os.path.join(folder, "CMakeCache.txt")) or os.path.abspath(folder) in excluded


def target_objects(build: str, excluded: List[str]) -> Dict[str, List[str]]:
    """Object files per CMake target (CMakeFiles/<target>.dir), and code
    objects (*.co) per folder; nested builds excluded."""
    targets: Dict[str, List[str]] = defaultdict(list)
    for root, dirs, files in os.walk(build):
        dirs[:] = [d for d in dirs if not is_nested_build(os.path.join(root, d), excluded)]
        marker = root.find(".dir")
        if marker < 0 or "CMakeFiles" not in root:
            # Device-only AMD code objects of custom commands (tests/isa), by folder.
            for f in files:
                if f.endswith(".co"):
                    targets[os.path.relpath(root, build) + "/*.co"].append(os.path.join(root, f))
            continue
        target = os.path.basename(root[:marker + 4])[:-4]
        for f in files:
            if f.endswith(".o"):
                targets[target].append(os.path.join(root, f))
    return targets


def ninja_outputs(build: str, ninja: str) -> Optional[set]:
    """The outputs a Ninja build tree's build.ninja still names (absolute
    paths), or None for other generators: objects of removed targets and
    sources are then left out of the count."""
    if not os.path.exists(os.path.join(build, "build.ninja")):
        return None
    try:
        listing = subprocess.run([ninja, "-C", build, "-t", "targets", "all"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {os.path.normpath(os.path.join(build, line.split(": ")[0])) for line in listing.splitlines() if ": " in line}


def measure(build: str, ninja: str, excluded: List[str]) -> dict:
    per_target: Dict[str, Dict[str, dict]] = {}
    everything: Dict[str, List[str]] = defaultdict(list)
    per_object: Dict[str, Dict[str, int]] = {}
    current = ninja_outputs(build, ninja)
    for target, objects in sorted(target_objects(build, excluded).items()):
        if current is not None:
            objects = [o for o in objects if os.path.normpath(o) in current]
        arch_names: Dict[str, List[str]] = defaultdict(list)
        for obj in sorted(objects):
            kernels = object_kernels(obj)
            if kernels:
                per_object[os.path.relpath(obj, build)] = {a: len(n) for a, n in kernels.items()}
            for arch, names in kernels.items():
                arch_names[arch].extend(names)
                everything[arch].extend(names)
        if arch_names:
            per_target[target] = {a: {"total": len(n), "unique": len(set(n))} for a, n in arch_names.items()}
    build_totals = {a: {"total": len(n), "unique": len(set(n))} for a, n in everything.items()}
    return {"targets": per_target, "build": build_totals, "objects": per_object}


def linked_binaries(build: str, excluded: List[str]) -> Dict[str, Dict[str, dict]]:
    """Kernels per arch in each linked program and shared library of the
    tree (what it carries: its own objects' and the static libraries' it
    linked), nested builds and CMake's own files excluded."""
    out: Dict[str, Dict[str, dict]] = {}
    for root, dirs, files in os.walk(build):
        dirs[:] = [d for d in dirs if not is_nested_build(os.path.join(root, d), excluded) and d != "CMakeFiles"]
        for f in files:
            path = os.path.join(root, f)
            if f.endswith((".o", ".a", ".co")) or not os.access(path, os.X_OK) and not f.endswith(".so"):
                continue
            with open(path, "rb") as fh:
                if fh.read(4) != b"\x7fELF":
                    continue
            kernels = object_kernels(path)
            if kernels:
                out[os.path.relpath(path, build)] = {a: {"total": len(n), "unique": len(set(n))}
                                                     for a, n in kernels.items()}
    return out


def ninja_log(build: str, ninja: str) -> Dict[str, float]:
    """Seconds per output of .ninja_log: the latest entry of each output that
    build.ninja still names, one output per build edge (Ninja logs every
    output of an edge, a custom command's under both its relative and its
    absolute path, with the edge's start, end and command hash)."""
    log = os.path.join(build, ".ninja_log")
    if not os.path.exists(log):
        return {}
    latest: Dict[str, Tuple[int, int, str]] = {}
    with open(log) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 5 and not line.startswith("#"):
                latest[parts[3]] = (int(parts[0]), int(parts[1]), parts[4])
    current = ninja_outputs(build, ninja)
    edges: Dict[Tuple[int, int, str], str] = {}
    for output, edge in sorted(latest.items(), key=lambda item: (os.path.isabs(item[0]), item[0])):  # relative first
        if current is None or os.path.normpath(os.path.join(build, output)) in current:
            edges.setdefault(edge, output)
    return {output: (end - start) / 1000.0 for (start, end, _hash), output in edges.items()}


def slowest_units(build: str, count: int, ninja: str) -> List[Tuple[float, str]]:
    """The slowest objects of ninja_log(), seconds and path."""
    units = ((seconds, output) for output, seconds in ninja_log(build, ninja).items() if output.endswith(".o"))
    return sorted(units, reverse=True)[:count]


def ninja_stages(build: str, ninja: str) -> Dict[str, Tuple[int, float]]:
    """(steps, seconds) per part of the build, from ninja_log(): the fuzz
    targets, the PyTorch op library, the AMD code objects of tests/isa, the
    nested HIP build (its steps here; its own log has the detail), the
    device objects (.cu sources), and the rest (host C++, links). Seconds are
    summed over the steps, so with parallel jobs they add up to more than the
    wall time."""
    stages: Dict[str, List[float]] = defaultdict(list)
    for output, seconds in ninja_log(build, ninja).items():
        if "fuzz" in output:
            stage = "fuzz"
        elif output.startswith("python/"):
            stage = "python ops"
        elif output.startswith("tests/isa/"):
            stage = "AMD code objects (tests/isa)"
        elif "fp8scale_hip_suite" in output:
            stage = "nested HIP build"
        elif output.endswith(".cu.o") or "kernels/" in output:
            stage = "device objects (.cu: CUDA, or HIP in a HIP build)"
        else:
            stage = "host C++, links, other"
        stages[stage].append(seconds)
    return {k: (len(v), sum(v)) for k, v in sorted(stages.items())}


def format_report(cost: dict) -> str:
    archs = sorted(cost["build"])
    lines = ["kernel instantiations compiled (total) and distinct (unique), per target and arch", ""]
    header = f"{'target':<44}" + "".join(f"{a + ' total':>16}{a + ' unique':>16}" for a in archs)
    lines += [header, "-" * len(header)]
    for target, by_arch in sorted(cost["targets"].items()):
        row = f"{target:<44}"
        for a in archs:
            c = by_arch.get(a, {"total": 0, "unique": 0})
            row += f"{c['total']:>16}{c['unique']:>16}"
        lines.append(row)
    row = f"{'(the whole build)':<44}"
    for a in archs:
        row += f"{cost['build'][a]['total']:>16}{cost['build'][a]['unique']:>16}"
    lines += ["-" * len(header), row]
    return "\n".join(lines)


def check_budget(cost: dict, budget: dict, where: str) -> List[str]:
    """The budget's breaches: a count above its number, or an arch the budget lacks."""
    errors = []
    for arch, counts in sorted(cost["build"].items()):
        limit = budget.get(arch)
        if limit is None:
            print(f"build_cost: {arch}: not in the budget ({where}), not checked", file=sys.stderr)
            continue
        for key in ("unique", "total"):
            if counts[key] > limit[key]:
                errors.append(f"{arch}: {counts[key]} {key} kernel instantiations, budget {limit[key]} "
                              f"({where}): a change made the build compile more kernels")
    return errors


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("build", help="a CMake build tree")
    p.add_argument("--json", help="write the counts (per target, per object, the build) here")
    p.add_argument("--budget", help="a JSON file {section: {arch: {unique: N, total: N}}}: fail above it")
    p.add_argument("--section", default="main", help="the budget's section for this build tree (default main)")
    p.add_argument("--times", type=int, nargs="?", const=10, default=0,
                   help="also print the N slowest objects in .ninja_log (default 10)")
    p.add_argument("--binaries", action="store_true",
                   help="also print the kernels each linked program and shared library carries")
    p.add_argument("--stages", action="store_true",
                   help="also print the seconds per part of the build from .ninja_log")
    p.add_argument("--ninja", default="ninja", help="the ninja program (default: ninja on PATH)")
    p.add_argument("--exclude", action="append", default=[],
                   help="a folder under BUILD to leave out (relative to it); repeatable")
    p.add_argument("--require-arch", action="append", default=[],
                   help="fail unless the build has kernels for this arch")
    args = p.parse_args(argv)
    if not os.path.isdir(args.build):
        p.error(f"build: {args.build!r} is not a directory")
    excluded = [os.path.abspath(os.path.join(args.build, e)) for e in args.exclude]
    try:
        cost = measure(args.build, args.ninja, excluded)
    except (ValueError, struct.error) as e:
        print(f"build_cost: {e}", file=sys.stderr)
        return 2
    print(format_report(cost))
    if args.times:
        print(f"\nslowest translation units (.ninja_log)")
        for seconds, output in slowest_units(args.build, args.times, args.ninja):
            print(f"{seconds:8.1f} s  {output}")
    if args.binaries:
        binaries = linked_binaries(args.build, excluded)
        archs = sorted({a for by_arch in binaries.values() for a in by_arch})
        print(f"\nkernels each linked program and library carries, per arch")
        for path, by_arch in sorted(binaries.items()):
            print(f"{path:<60}" + "".join(f"{by_arch.get(a, {}).get('unique', 0):>10} {a}" for a in archs))
    if args.stages:
        print(f"\nbuild steps by part, from .ninja_log (seconds summed over the steps)")
        for stage, (steps, seconds) in ninja_stages(args.build, args.ninja).items():
            print(f"{seconds:8.1f} s  {steps:4d} steps  {stage}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(cost, f, indent=1, sort_keys=True)
    errors = [f"{a}: no kernels found in {args.build}" for a in args.require_arch if a not in cost["build"]]
    if args.budget:
        with open(args.budget) as f:
            budget = json.load(f)
        if args.section not in budget:
            p.error(f"section: {args.budget} has no section {args.section!r} ({', '.join(budget)})")
        errors += check_budget(cost, budget[args.section], f"{args.budget}, section {args.section}")
    for e in errors:
        print(f"build_cost: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
