#!/usr/bin/env python3
"""Checks an AMDGPU code object built from kernels.hip.

Reads the kernels' AMDGPU metadata (llvm-readelf --notes) and disassembly
(llvm-objdump -d) and fails, naming the kernel, when:
  - the file is not an AMDGPU code object for --arch, or has no kernels;
  - a kernel listed with --expect-kernel is missing;
  - a kernel spills VGPRs or SGPRs, or uses scratch (private segment > 0 or a
    dynamic stack): on a memory-bound kernel scratch traffic is the first
    thing that erases the bandwidth the layout work buys;
  - a kernel listed with --require-cvt lacks v_cvt_pk_fp8_f32 (the format the
    arch converts in hardware must not fall back to the software encode).
For every kernel it prints registers, spills, private segment size and whether
v_cvt_pk_fp8_f32 appears. --self-test runs the same checks on synthetic input
to show that each of them can fail.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

CVT_INSTRUCTION = "v_cvt_pk_fp8_f32"


@dataclass
class Kernel:
    symbol: str  # mangled, as in the metadata's .name and the disassembly labels
    name: str  # demangled, without return type and parameter list
    vgpr: int
    sgpr: int
    agpr: int
    vgpr_spill: int
    sgpr_spill: int
    private_segment: int
    dynamic_stack: bool
    uses_cvt: Optional[bool]  # None: the kernel has no code in the disassembly


@dataclass
class Report:
    code_object: str
    arch: str
    kernels: List[Kernel] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.errors


# --- Parsing -----------------------------------------------------------------

# In readelf's YAML, a kernel's own keys sit at indent 4 (its first key after
# "  - "); deeper lines belong to .args and are skipped.
_KERNEL_START = re.compile(r"^  - \.(\w+):\s*(.*)$")
_KERNEL_KEY = re.compile(r"^    \.(\w+):\s*(.*)$")
_TARGET = re.compile(r"^amdhsa\.target:\s*(\S+)", re.M)


def parse_metadata(text: str) -> List[Dict[str, str]]:
    """The amdhsa.kernels entries of `llvm-readelf --notes`, as key -> value."""
    kernels: List[Dict[str, str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("amdhsa.kernels:"):
            inside = True
            continue
        if not inside:
            continue
        if line and not line[0].isspace() and not line.startswith("-"):
            inside = False  # next top-level key (amdhsa.target, ...)
            continue
        m = _KERNEL_START.match(line)
        if m:
            kernels.append({m.group(1): m.group(2).strip()})
            continue
        m = _KERNEL_KEY.match(line)
        if m and kernels:
            kernels[-1][m.group(1)] = m.group(2).strip()
    return kernels


def parse_target(text: str) -> Optional[str]:
    m = _TARGET.search(text)
    return m.group(1) if m else None


_LABEL = re.compile(r"^[0-9a-fA-F]+ <([^>]+)>:\s*$")


def parse_disassembly(text: str) -> Dict[str, List[str]]:
    """Mnemonics of each symbol in `llvm-objdump -d` output."""
    code: Dict[str, List[str]] = {}
    current: Optional[List[str]] = None
    for line in text.splitlines():
        m = _LABEL.match(line)
        if m:
            current = code.setdefault(m.group(1), [])
            continue
        stripped = line.strip()
        if current is not None and stripped and not stripped.startswith(("//", ";")):
            current.append(stripped.split()[0])
    return code


def short_name(demangled: str) -> str:
    """'void ns::k<A, B>(args)' -> 'ns::k<A, B>'."""
    name = demangled
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    return name[5:] if name.startswith("void ") else name


# --- Checks ------------------------------------------------------------------

_REQUIRED_KEYS = ("name", "vgpr_count", "sgpr_count", "agpr_count", "vgpr_spill_count",
                  "sgpr_spill_count", "private_segment_fixed_size")


def _int(entry: Dict[str, str], key: str) -> int:
    try:
        return int(entry[key])
    except (KeyError, ValueError):
        return -1  # absent or unparsable: reported, never read as "no spills"


def check(code_object: str, arch: str, header: str, metadata: str, disassembly: str,
          demangle: Callable[[Sequence[str]], List[str]], expect_kernels: Sequence[str],
          require_cvt: Sequence[str], require_cvt_regex: Sequence[str] = ()) -> Report:
    report = Report(code_object, arch)
    err = report.errors.append

    if "EM_AMDGPU" not in header:
        err(f"{code_object}: not an AMDGPU ELF (llvm-readelf -h shows no EM_AMDGPU)")
    target = parse_target(metadata)
    if target is None or not re.search(rf"--{re.escape(arch)}(:|$)", target):
        err(f"{code_object}: amdhsa.target is {target!r}, expected one for {arch}")

    entries = parse_metadata(metadata)
    code = parse_disassembly(disassembly)
    symbols = [e.get("name", "") for e in entries]
    names = [short_name(d) for d in demangle(symbols)] if symbols else []
    for entry, symbol, name in zip(entries, symbols, names):
        missing = [key for key in _REQUIRED_KEYS if key not in entry]
        if missing:
            err(f"{name or '<unnamed kernel>'}: metadata lacks " + ", ".join("." + k for k in missing))
        instructions = code.get(symbol)
        report.kernels.append(Kernel(
            symbol=symbol, name=name,
            vgpr=_int(entry, "vgpr_count"), sgpr=_int(entry, "sgpr_count"),
            agpr=_int(entry, "agpr_count"),
            vgpr_spill=_int(entry, "vgpr_spill_count"),
            sgpr_spill=_int(entry, "sgpr_spill_count"),
            private_segment=_int(entry, "private_segment_fixed_size"),
            dynamic_stack=entry.get("uses_dynamic_stack", "false") == "true",
            uses_cvt=None if instructions is None else CVT_INSTRUCTION in instructions))

    if not report.kernels:
        err(f"{code_object}: no kernels in the AMDGPU metadata")
    for k in report.kernels:
        if k.vgpr_spill != 0:
            err(f"{k.name}: vgpr_spill_count is {k.vgpr_spill}, must be 0")
        if k.sgpr_spill != 0:
            err(f"{k.name}: sgpr_spill_count is {k.sgpr_spill}, must be 0")
        if k.private_segment != 0:
            err(f"{k.name}: private_segment_fixed_size is {k.private_segment}, must be 0 (scratch)")
        if k.dynamic_stack:
            err(f"{k.name}: uses a dynamic stack (scratch)")
        if k.uses_cvt is None:
            err(f"{k.name}: no code for symbol {k.symbol} in the disassembly")

    check_expectations(report, arch, expect_kernels, require_cvt, require_cvt_regex)
    return report


def check_expectations(report: Report, arch: str, expect_kernels: Sequence[str], require_cvt: Sequence[str],
                       require_cvt_regex: Sequence[str], regex_may_match_none: bool = False) -> None:
    """Adds to report.errors what --expect-kernel / --require-cvt(-regex) find missing."""
    err = report.errors.append
    found = {k.name: k for k in report.kernels}
    for name in expect_kernels:
        if name not in found:
            err(f"{name}: expected kernel not in the code object")
    for name in require_cvt:
        k = found.get(name)
        if k is None:
            err(f"{name}: kernel required to use {CVT_INSTRUCTION} is not in the code object")
        elif k.uses_cvt is False:
            err(f"{name}: no {CVT_INSTRUCTION} on {arch}, whose hardware converts this format "
                f"(it took the software encode)")
    for pattern in require_cvt_regex:
        matching = [k for k in report.kernels if re.fullmatch(pattern, k.name)]
        if not matching and not regex_may_match_none:
            err(f"/{pattern}/: no kernel matches (required to use {CVT_INSTRUCTION})")
        for k in matching:
            if k.uses_cvt is False:
                err(f"{k.name}: no {CVT_INSTRUCTION} on {arch}, whose hardware converts this format "
                    f"(it took the software encode)")


# --- Output ------------------------------------------------------------------

def format_table(report: Report, require_cvt: Sequence[str]) -> str:
    header = ("kernel", "vgpr", "sgpr", "agpr", "spills v/s", "private", CVT_INSTRUCTION)
    rows = []
    for k in report.kernels:
        cvt = "?" if k.uses_cvt is None else ("yes" if k.uses_cvt else "no")
        cvt += " (required)" if k.name in require_cvt else ""
        rows.append((k.name, str(k.vgpr), str(k.sgpr), str(k.agpr),
                     f"{k.vgpr_spill}/{k.sgpr_spill}", str(k.private_segment), cvt))
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    out = [f"{report.code_object} ({report.arch})", line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def write_json(path: str, report: Report) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"code_object": report.code_object, "arch": report.arch,
                   "passed": report.passed, "errors": report.errors,
                   "kernels": [asdict(k) for k in report.kernels]}, f, indent=2)
        f.write("\n")


# --- Tools -------------------------------------------------------------------

def run_tool(argv: Sequence[str], stdin: Optional[str] = None) -> str:
    try:
        result = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False)
    except OSError as e:
        raise SystemExit(f"FAIL: cannot run {argv[0]}: {e}")
    if result.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(argv)} exited with {result.returncode}:\n{result.stderr}")
    return result.stdout


def tool_demangler(cxxfilt: str) -> Callable[[Sequence[str]], List[str]]:
    def demangle(symbols: Sequence[str]) -> List[str]:
        out = run_tool([cxxfilt], "\n".join(symbols) + "\n").splitlines()
        if len(out) != len(symbols):
            raise SystemExit(f"FAIL: {cxxfilt} returned {len(out)} names for {len(symbols)} symbols")
        return out
    return demangle


# --- Self-test ---------------------------------------------------------------

_SYNTHETIC_KERNEL = """\
  - .agpr_count:     0
    .args:
      - .offset:         0
        .size:           8
        .value_kind:     global_buffer
    .name:           {name}
    .private_segment_fixed_size: {private}
    .sgpr_count:     16
    .sgpr_spill_count: {sgpr_spill}
    .uses_dynamic_stack: false
    .vgpr_count:     8
    .vgpr_spill_count: {vgpr_spill}
"""


def _synthetic(kernels: Sequence[dict], arch: str):
    """readelf -h / --notes and objdump -d text in LLVM's format. A kernel dict
    sets name, optionally a spill or private size, cvt (has the instruction)
    and drop (metadata keys to leave out)."""
    metadata = "AMDGPU Metadata:\n---\namdhsa.kernels:\n"
    disassembly = ""
    for i, k in enumerate(kernels):
        fields = {"private": 0, "sgpr_spill": 0, "vgpr_spill": 0, **k}
        entry = _SYNTHETIC_KERNEL.format(**fields)
        for key in k.get("drop", ()):
            entry = re.sub(rf"^ *\.{key}:.*\n", "", entry, flags=re.M)
        metadata += entry
        disassembly += f"\n{0x1000 + 0x100 * i:016x} <{k['name']}>:\n\ts_load_dword s2, s[0:1], 0x0\n"
        if k.get("cvt"):
            disassembly += f"\t{CVT_INSTRUCTION} v1, v4, v0 // 000000001000: D2A20001\n"
        disassembly += "\ts_endpgm\n"
    metadata += f"amdhsa.target:   amdgcn-amd-amdhsa--{arch}\namdhsa.version:\n  - 1\n  - 2\n...\n"
    return "Machine: EM_AMDGPU\n", metadata, disassembly


def self_test() -> int:
    """Each case must produce its listed error fragments (the clean one none)."""
    identity = lambda symbols: list(symbols)  # noqa: E731: synthetic names are not mangled
    a, b = "convert_native", "relayout"
    native = {"name": a, "cvt": True}
    other = {"name": b}
    cases = [  # (title, kernels, arch built for, expected error fragments)
        ("clean object passes", [native, other], "gfx942", []),
        ("vgpr spill fails", [native, {**other, "vgpr_spill": 3}], "gfx942",
         ["relayout: vgpr_spill_count is 3"]),
        ("sgpr spill fails", [{**native, "sgpr_spill": 1}, other], "gfx942",
         ["convert_native: sgpr_spill_count is 1"]),
        ("private segment fails", [native, {**other, "private": 16}], "gfx942",
         ["relayout: private_segment_fixed_size is 16"]),
        ("absent spill count fails", [native, {**other, "drop": ["vgpr_spill_count"]}], "gfx942",
         ["relayout: metadata lacks .vgpr_spill_count"]),
        ("missing native cvt fails", [{"name": a}, other], "gfx942",
         [f"convert_native: no {CVT_INSTRUCTION}"]),
        ("missing expected kernel fails", [native], "gfx942",
         ["relayout: expected kernel not in the code object"]),
        ("zero kernels fails", [], "gfx942", ["no kernels"]),
        ("regex-required cvt missing fails", [native, other], "gfx942",
         [f"relayout: no {CVT_INSTRUCTION}"]),
        ("wrong arch fails", [native, other], "gfx950", ["expected one for gfx942"]),
    ]
    failures = 0
    for title, kernels, built_for, expected in cases:
        header, metadata, disassembly = _synthetic(kernels, built_for)
        regex = ["rel.*"] if title.startswith("regex") else []
        report = check("synthetic.co", "gfx942", header, metadata, disassembly, identity,
                       expect_kernels=[a, b], require_cvt=[a], require_cvt_regex=regex)
        if expected:
            ok = not report.passed and all(any(e in msg for msg in report.errors) for e in expected)
        else:
            ok = report.passed and len(report.kernels) == len(kernels)
        failures += not ok
        print(f"{'ok ' if ok else 'BAD'} {title}: errors={report.errors}")
    # --cvt-regex-may-match-none: a regex no kernel matches is allowed, one
    # that matches a kernel without the instruction still fails.
    header, metadata, disassembly = _synthetic([native, other], "gfx942")
    for title, regex, want_pass in (("unmatched regex allowed", ["nothing.*"], True),
                                    ("matched regex still required", ["rel.*"], False)):
        report = check("synthetic.co", "gfx942", header, metadata, disassembly, identity, [], [], [])
        check_expectations(report, "gfx942", [], [], regex, regex_may_match_none=True)
        ok = report.passed == want_pass
        failures += not ok
        print(f"{'ok ' if ok else 'BAD'} {title} (--cvt-regex-may-match-none): errors={report.errors}")
    if failures:
        print(f"FAIL: {failures} self-test case(s) did not behave as expected")
        return 1
    print("self-test passed: the checker rejects spills, scratch, absent metadata, a missing "
          f"native {CVT_INSTRUCTION}, missing kernels, a wrong arch and an empty code object")
    return 0


# --- Code objects inside a HIP program ----------------------------------------

def extract_code_objects(binary: str, arch: str, objcopy: str, bundler: str, out: str) -> List[str]:
    """The `arch` code objects of a HIP program, written to out.0, out.1, ...

    clang puts one offload bundle per HIP translation unit in the section
    .hip_fatbin; the linker concatenates the sections, so a program holds one
    bundle per source, each starting with the bundle magic. Each is unbundled
    for hipv4-amdgcn-amd-amdhsa--<arch>.
    """
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fatbin = out + ".hip_fatbin"
    run_tool([objcopy, f"--dump-section=.hip_fatbin={fatbin}", binary, os.devnull])
    with open(fatbin, "rb") as f:
        data = f.read()
    starts = [m.start() for m in re.finditer(re.escape(b"__CLANG_OFFLOAD_BUNDLE__"), data)]
    if not starts:
        raise SystemExit(f"FAIL: {binary}: .hip_fatbin holds no offload bundle")
    paths = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(data)
        part = f"{out}.{n}.bundle"
        with open(part, "wb") as f:
            f.write(data[start:end])
        co = f"{out}.{n}"
        run_tool([bundler, "--unbundle", "--type=o", f"--input={part}",
                  f"--targets=hipv4-amdgcn-amd-amdhsa--{arch}", f"--output={co}"])
        paths.append(co)
    return paths


# --- Main --------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("code_object", nargs="?", help="AMDGPU code object (ELF) to check")
    p.add_argument("--arch", help="gfx942, gfx950, ...: the target the code object must be for")
    p.add_argument("--readelf", default="llvm-readelf-22")
    p.add_argument("--objdump", default="llvm-objdump-22")
    p.add_argument("--cxxfilt", default="llvm-cxxfilt-22")
    p.add_argument("--expect-kernel", action="append", default=[], metavar="NAME",
                   help="demangled kernel name (no return type or parameters) that must be present")
    p.add_argument("--require-cvt", action="append", default=[], metavar="NAME",
                   help=f"kernel that must contain {CVT_INSTRUCTION} (its format is native to --arch)")
    p.add_argument("--require-cvt-regex", action="append", default=[], metavar="REGEX",
                   help=f"every kernel whose name fully matches must contain {CVT_INSTRUCTION}; "
                        "at least one must match")
    p.add_argument("--cvt-regex-may-match-none", action="store_true",
                   help="--require-cvt-regex holds for the kernels that match; none matching is not an error "
                        "(a program that instantiates only the other format)")
    p.add_argument("--json", metavar="OUT", help="also write the table and errors as JSON")
    p.add_argument("--from-binary", action="store_true",
                   help="the positional argument is a HIP host program (or object): check the --arch code "
                        "object of its offload bundle (section .hip_fatbin), extracted with --objcopy and --bundler")
    p.add_argument("--objcopy", default="llvm-objcopy-22")
    p.add_argument("--bundler", default="clang-offload-bundler")
    p.add_argument("--extract-to", metavar="FILE", help="with --from-binary: where the extracted code object goes")
    p.add_argument("--self-test", action="store_true", help="check the checker on synthetic input")
    args = p.parse_args(argv)

    if args.self_test:
        return self_test()
    if not args.code_object or not args.arch:
        p.error("a code object and --arch are required (or --self-test)")
    objects = [args.code_object]
    if args.from_binary:
        if not args.extract_to:
            p.error("--from-binary needs --extract-to")
        objects = extract_code_objects(args.code_object, args.arch, args.objcopy, args.bundler, args.extract_to)

    # Each code object on its own (arch, metadata, spills), then what must be
    # present across all of them.
    report = Report(code_object=args.code_object, arch=args.arch)
    for co in objects:
        header = run_tool([args.readelf, "--file-header", co])
        metadata = run_tool([args.readelf, "--notes", co])
        disassembly = run_tool([args.objdump, "-d", f"--mcpu={args.arch}", co])
        part = check(co, args.arch, header, metadata, disassembly, tool_demangler(args.cxxfilt), [], [], [])
        report.kernels += part.kernels
        report.errors += part.errors
    if not report.kernels:
        report.errors.append(f"{args.code_object}: no kernels for {args.arch}")
    check_expectations(report, args.arch, args.expect_kernel, args.require_cvt, args.require_cvt_regex,
                       args.cvt_regex_may_match_none)

    print(format_table(report, args.require_cvt))
    if args.json:
        write_json(args.json, report)
    for e in report.errors:
        print(f"FAIL: {e}")
    if report.passed:
        print(f"PASS: {len(report.kernels)} kernels for {args.arch}: no spills, no scratch, "
              f"{CVT_INSTRUCTION} where the hardware converts the format")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
