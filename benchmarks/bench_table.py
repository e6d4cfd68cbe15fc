#!/usr/bin/env python3
"""Markdown tables from bench_producers' Google Benchmark JSON.

    python3 benchmarks/bench_table.py benchmarks/results/h200_bench_producers.json
    python3 benchmarks/bench_table.py --compact RUN.json OUT.json

--compact writes the run's medians alone (with each entry's cv beside its
median), the fields these tables and plot_bench.py read: the form
benchmarks/results keeps (a run with 3 repetitions is 8x larger).

For each producer and M: time per call for row-major and column-major scales,
bandwidth (bytes read + written) as a ratio to the same run's fastest large
copy, time as a ratio to copying the producer's input bytes, the column-major
over row-major cost, and for group quant the saving of transposed emission
over row-major emission + materialize. A run with repetitions gives medians. Where the run has .../col_major/pdl/...
entries (programmatic dependent launch), their time and time vs input copy too;
where it has .../col_major/ld_align4/... entries (column-major scales with
ld = align(M, 4), padding slots at M % 4 != 0), their time and its ratio to
row-major;
where it has move_bytes/... entries (the producer's bytes moved by a kernel
without the arithmetic), that kernel's bandwidth vs the copy: the ceiling of
the producer's read:write mix in the same run; for RMSNorm quant also
move_bytes/rmsnorm_quant/in_place/rows_b2/... (its residual written in place,
in the order and occupancy of its row-looping kernel, AMD's large-M kernel). Where the run has odd_m/... entries
(M % 4 == 3), a last table of their column-major times, ld = M and
ld = align(M, 4), against row-major. Where it has naive/... entries (a
plain kernel of each producer), a calibration table at M >= 2048: their
bandwidth vs the copies and the producers' speed over them. Where it has
hidden/... entries, RMSNorm at other hidden sizes against the fixed shapes.
"""
import json
import re
import sys


RUN_SUFFIX = re.compile(r"/(iterations|repeats):\d+|/manual_time")

# Each producer's tables: entry name, table title, short title (calibration
# rows), and the entry suffix of its second argument (SiLU-clamp's I).
PRODUCERS = [
    ("group_quant", "group quant, K = 7168", "group quant", ""),
    ("rmsnorm_quant", "RMSNorm quant (+ residual), K = 7168", "RMSNorm quant", ""),
    ("silu_clamp_quant", "SiLU-clamp quant, I = 2048", "SiLU-clamp, I = 2048", "/2048"),
    ("silu_clamp_quant", "SiLU-clamp quant, I = 3072", "SiLU-clamp, I = 3072", "/3072"),
]


def entries(data):
    """Benchmark name (without run suffixes) -> entry: the median aggregate
    where the run has repetitions, else the single run."""
    rows = {}
    for b in data["benchmarks"]:
        kind = b.get("run_type", "iteration")
        if kind == "aggregate" and b.get("aggregate_name") == "median":
            rows[RUN_SUFFIX.sub("", b["run_name"])] = b
        elif kind == "iteration":
            rows.setdefault(RUN_SUFFIX.sub("", b["name"]), b)
    return rows


# What --compact keeps of an entry (the rest is Google Benchmark's bookkeeping).
KEPT = ("name", "run_name", "run_type", "aggregate_name", "real_time", "time_unit", "M", "I", "GBps", "us_per_call",
        "vs_copy_bw", "vs_input_copy", "vs_input_copy_bw", "cv")


def compact(data) -> dict:
    """The run's medians (or its single runs, without repetitions), each with
    the KEPT fields, numbers to 7 significant digits, and `cv`: the
    coefficient of variation of real_time over the repetitions, where the run
    has them. Compacting a compacted run changes nothing."""
    cv = {b["run_name"]: b["real_time"] for b in data["benchmarks"] if b.get("aggregate_name") == "cv"}
    out = []
    for b in entries(data).values():
        e = {k: b[k] for k in KEPT if k in b}
        if b.get("run_name") in cv:
            e["cv"] = cv[b["run_name"]]
        out.append({k: float(f"{v:.7g}") if isinstance(v, float) else v for k, v in e.items()})
    context = dict(data.get("context", {}))
    if "executable" in context:  # where the binary lay on the machine that ran it: its name is what matters
        context["executable"] = context["executable"].replace("\\", "/").rsplit("/", 1)[-1]
    return {"context": context, "benchmarks": out}


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--compact":
        with open(sys.argv[3], "w") as f:
            json.dump(compact(json.load(open(sys.argv[2]))), f, separators=(",", ":"))
            f.write("\n")
        return
    data = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/h200_bench_producers.json"))
    rows = entries(data)
    context = data.get("context", {})
    if "copy_baseline_GBps" in context:  # measured once at start, the ratios' baseline
        copy = float(context["copy_baseline_GBps"])
        when = ", measured at the start of the run"
    else:  # older runs: the copy entries themselves
        copy = max(rows[n]["GBps"] for n in rows if n.startswith("copy_256MiB"))
        when = ""
    print(f"Baselines: large copy {copy / 1000:.2f} TB/s (read + write, faster of cudaMemcpyAsync and a copy "
          f"kernel{when}), empty kernel {rows['empty_kernel']['us_per_call']:.2f} us per launch under graph replay.\n")
    sizes = sorted({int(b["M"]) for b in rows.values() if "M" in b})
    for key, title, _, suffix in PRODUCERS:
        print(f"**{title}**\n")
        extra = key == "group_quant"
        head = "| M | row-major us | col-major us | col / row | BW vs copy (row, col) | time vs input copy (row, col) |"
        pdl = any(n.startswith(f"{key}/col_major/pdl/") for n in rows)
        head += " col-major + PDL us (vs input copy) |" if pdl else ""
        # column-major with ld = align(M, 4): padding slots where M % 4 != 0
        padded = any(n.startswith(f"{key}/col_major/ld_align4/") for n in rows)
        head += " col-major, ld = align(M, 4): us (vs row) |" if padded else ""
        move = any(n.startswith(f"move_bytes/{key}/") for n in rows)
        head += " same bytes, no arithmetic: BW vs copy |" if move else ""
        # RMSNorm: the same bytes with the residual in place, in the row-looping kernel's order
        own = any(n.startswith(f"move_bytes/{key}/in_place/rows_b2/") for n in rows)
        head += " same, in place, in the row loop's order |" if own else ""
        head += " row-major + materialize us | saved by transposed emit us |" if extra else ""
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for m in sizes:
            r = rows.get(f"{key}/row_major/{m}{suffix}")
            c = rows.get(f"{key}/col_major/{m}{suffix}")
            if not r or not c:
                continue
            line = (f"| {m} | {r['us_per_call']:.2f} | {c['us_per_call']:.2f} | {c['us_per_call'] / r['us_per_call']:.3f} | "
                    f"{r['vs_copy_bw']:.2f}, {c['vs_copy_bw']:.2f} | {r['vs_input_copy']:.2f}, {c['vs_input_copy']:.2f} |")
            if pdl:
                p = rows.get(f"{key}/col_major/pdl/{m}{suffix}")
                line += f" {p['us_per_call']:.2f} ({p['vs_input_copy']:.2f}) |" if p else " |"
            if padded:
                a = rows.get(f"{key}/col_major/ld_align4/{m}{suffix}")
                line += f" {a['us_per_call']:.2f} ({a['us_per_call'] / r['us_per_call']:.3f}) |" if a else " |"
            if move:
                mv = rows.get(f"move_bytes/{key}/{m}{suffix}")
                line += f" {mv['vs_copy_bw']:.2f} |" if mv else " |"
            if own:
                mo = rows.get(f"move_bytes/{key}/in_place/rows_b2/{m}")
                line += f" {mo['vs_copy_bw']:.2f} |" if mo else " |"
            if extra:
                mm = rows.get(f"group_quant/row_major+materialize/{m}")  # absent from filtered runs
                line += f" {mm['us_per_call']:.2f} | {mm['us_per_call'] - c['us_per_call']:.2f} |" if mm else " | |"
            print(line)
        print()
    odd_table(rows)
    calibration_table(rows, sizes)
    hidden_table(rows)


def calibration_table(rows, sizes) -> None:
    """naive/... entries: a plain kernel of each producer (bench_producers.cu,
    naiveGroupQuantKernel / naiveRmsNormQuantKernel), its bandwidth vs the
    large copy and vs a copy of its input bytes at the same M, and the
    producer's speed over it (time of the plain kernel / time of the
    producer), per layout."""
    if not any(n.startswith("naive/") for n in rows):
        return
    print("**Calibration: a plain kernel of each producer** (`naive/...`: a straightforward kernel of the "
          "same arithmetic, what the producers' bandwidth is read against besides the copy)\n")
    head = ("| producer | M | plain: BW vs copy (row, col) | plain: BW vs input copy (row, col) | "
            "producer: BW vs copy (row, col) | producer speed over plain (row, col) |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for key, _, title, suffix in PRODUCERS:
        for m in sizes:
            nr, nc = rows.get(f"naive/{key}/row_major/{m}{suffix}"), rows.get(f"naive/{key}/col_major/{m}{suffix}")
            pr, pc = rows.get(f"{key}/row_major/{m}{suffix}"), rows.get(f"{key}/col_major/{m}{suffix}")
            if not (nr and nc and pr and pc) or m < 2048:
                continue
            print(f"| {title} | {m} | {nr['vs_copy_bw']:.2f}, {nc['vs_copy_bw']:.2f} | "
                  f"{nr.get('vs_input_copy_bw', 0):.2f}, {nc.get('vs_input_copy_bw', 0):.2f} | "
                  f"{pr['vs_copy_bw']:.2f}, {pc['vs_copy_bw']:.2f} | "
                  f"{nr['us_per_call'] / pr['us_per_call']:.3f}, {nc['us_per_call'] / pc['us_per_call']:.3f} |")
    print()


def odd_table(rows) -> None:
    """odd_m/... entries (M % 4 == 3): column-major with ld = M and with
    ld = align(M, 4) (a padding slot a column), as ratios to row-major."""
    odd = sorted({(n.split("/")[1], int(b["M"])) for n, b in rows.items() if n.startswith("odd_m/") and "M" in b},
                 key=lambda km: (km[0], km[1]))
    if not odd:
        return
    print("**M % 4 == 3: padding slots** (SiLU-clamp at I = 2048)\n")
    head = "| producer | M | row-major us | col-major, ld = M: us (vs row) | col-major, ld = align(M, 4): us (vs row) |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for key, m in odd:
        suffix = "/2048" if key == "silu_clamp_quant" else ""
        r = rows.get(f"odd_m/{key}/row_major/{m}{suffix}")
        c = rows.get(f"odd_m/{key}/col_major/{m}{suffix}")
        a = rows.get(f"odd_m/{key}/col_major/ld_align4/{m}{suffix}")
        if not r:
            continue
        cell = lambda e: f"{e['us_per_call']:.2f} ({e['us_per_call'] / r['us_per_call']:.3f})" if e else ""
        print(f"| {key} | {m} | {r['us_per_call']:.2f} | {cell(c)} | {cell(a)} |")
    print()


def hidden_table(rows) -> None:
    """hidden/rmsnorm_quant/... entries (RMSNorm at K other than 7168): the
    launcher in both layouts, against a 1024-thread block per row and the
    512 x 2 staged kernel (the shapes such rows ran before blocks were sized
    to the row), bandwidth vs the copy in parentheses."""
    found = {}
    for n, b in rows.items():
        m = re.fullmatch(r"hidden/rmsnorm_quant/(row|col)_major(/[\w/]+)?/(\d+)/(\d+)", n)
        if m:
            found[(int(m.group(4)), int(m.group(3)), m.group(1), (m.group(2) or "")[1:])] = b
    if not found:
        return
    print("**RMSNorm quant (+ residual) at other hidden sizes** (`hidden/...`)\n")
    head = ("| K | M | row-major us (BW vs copy) | col-major us (col / row) | 1024 x 1 block per row us "
            "(BW vs copy) | 512 x 2 staged us (BW vs copy) | a block per row built for K us (BW vs copy) |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    cell = lambda e: f"{e['us_per_call']:.2f} ({e['vs_copy_bw']:.2f})" if e else ""
    for k, m in sorted({(k, m) for k, m, _, _ in found}):
        r, c = found.get((k, m, "row", "")), found.get((k, m, "col", ""))
        if not r:
            continue
        col = f"{c['us_per_call']:.2f} ({c['us_per_call'] / r['us_per_call']:.3f})" if c else ""
        built = next((found[(k, m, "row", shape)] for shape in ("256x1", "512x1", "640x1", "768x1")
                      if (k, m, "row", shape) in found), None)
        print(f"| {k} | {m} | {cell(r)} | {col} | {cell(found.get((k, m, 'row', '1024x1')))} | "
              f"{cell(found.get((k, m, 'row', '512x2/staged/b3')))} | {cell(built)} |")
    print()


if __name__ == "__main__":
    main()
