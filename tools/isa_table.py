#!/usr/bin/env python3
"""Register summary per kernel family from check_code_object.py's JSON.

    python3 tools/isa_table.py build/test/tests/isa/kernels-gfx942.json build/test/tests/isa/kernels-gfx950.json
"""
import json
import re
import sys


def family(name: str) -> str:
    m = re.match(r"fp8scale(?:_isa)?::(?:detail::)?(\w+)<([^,>]+)(?:, ([^,>]+))?", name)
    if not m:
        return name
    kernel, first, second = m.groups()
    if kernel == "materializeKernel":
        return f"materializeKernel<{first.replace('unsigned char', 'uint8_t')}>"
    if kernel == "fp8ConvertKernel":
        return f"fp8ConvertKernel<{first.split('::')[-1]}>"
    variant = ""
    if kernel == "rmsNormQuantKernel":
        threads = re.search(r", (\d+), (\d+)>$", name)
        variant = f" ({threads.group(1)} threads)" if threads else ""
    return f"{kernel}, {first.split('::')[-1]} input{variant}"


def main() -> None:
    per_arch = {}
    seen = {}
    for path in sys.argv[1:]:
        data = json.load(open(path))
        arch = data["arch"]
        for k in data["kernels"]:
            if k["name"] in seen.setdefault(arch, set()):
                continue  # the same kernel in another code object (a library linked into two binaries)
            seen[arch].add(k["name"])
            f = family(k["name"])
            per_arch.setdefault(f, {}).setdefault(arch, []).append((k["vgpr"], k["sgpr"], k["uses_cvt"]))
    archs = sorted({a for v in per_arch.values() for a in v})
    print("| kernel family | " + " | ".join(f"{a} vgpr (min-max) | {a} sgpr" for a in archs) + " | kernels |")
    print("|---|" + "---|---|" * len(archs) + "---|")
    for f in sorted(per_arch):
        cells = []
        count = 0
        for a in archs:
            rows = per_arch[f].get(a, [])
            count = max(count, len(rows))
            v = [r[0] for r in rows]
            s = [r[1] for r in rows]
            cells.append(f"{min(v)}-{max(v)}" if v and min(v) != max(v) else (str(v[0]) if v else "-"))
            cells.append(f"{min(s)}-{max(s)}" if s and min(s) != max(s) else (str(s[0]) if s else "-"))
        print(f"| {f} | " + " | ".join(cells) + f" | {count} |")


if __name__ == "__main__":
    main()
