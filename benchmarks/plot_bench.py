#!/usr/bin/env python3
"""Plots producer bandwidth against M from bench_producers' Google Benchmark JSON.

    python3 benchmarks/plot_bench.py benchmarks/results/h200_bench_producers.json [-o OUT.png]

One panel per producer (and per extra shape argument, e.g. SiLU-clamp's I):
bandwidth in GB/s (the benchmark's GBps counter: bytes read + written per
second) against M on a log axis, one line per scale layout / launch variant
(row_major, col_major, col_major/pdl, row_major+materialize, ...), and the
same run's large-copy bandwidth (copy_256MiB/*, read + write) as horizontal
lines: the ceiling the producers are measured against.

Benchmark names are read as  producer/layout[/variant]/M[/arg...]/iterations:N/manual_time
with M also in the "M" counter (the medians of a run with repetitions); move_bytes/producer/M/... (the producer's
bytes moved without its arithmetic) is drawn in that producer's panel as the
line "same bytes, no arithmetic". tune/* entries (block-shape experiments) are
left out unless --tune is given. Needs matplotlib (Agg backend, no display; its Pillow writes the palette PNG).
"""
import argparse
import io
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from PIL import Image  # noqa: E402  (matplotlib depends on Pillow)

RUN_SUFFIX = re.compile(r"^(iterations|repeats|threads|min_time|min_warmup_time):|^(manual|real|process)_time$")
ARG_NAMES = {"silu_clamp_quant": "I"}
MOVE_LAYOUT = "same bytes, no arithmetic"  # the move_bytes/... line of a producer's panel


def parse_name(name):
    """(producer, layout, extra args, M) of a benchmark name, or None."""
    parts = [p for p in name.split("/") if not RUN_SUFFIX.match(p)]
    words = [p for p in parts if not p.isdigit()]
    numbers = [int(p) for p in parts if p.isdigit()]
    if len(words) < 2 or not numbers:
        return None
    return words[0], "/".join(words[1:]), tuple(numbers[1:]), numbers[0]


def load(path, with_tune):
    data = json.load(open(path))
    panels = defaultdict(lambda: defaultdict(list))  # (producer, args) -> layout -> [(M, GBps)]
    copies = {}
    medians = any(b.get("aggregate_name") == "median" for b in data["benchmarks"])
    for b in data["benchmarks"]:
        if "GBps" not in b:
            continue
        if medians:  # a run with repetitions: its medians
            if b.get("aggregate_name") != "median":
                continue
            name = b["run_name"]
        elif b.get("run_type", "iteration") != "iteration":
            continue
        else:
            name = b["name"]
        if name.startswith("copy_256MiB/"):
            copies[name.split("/")[1]] = b["GBps"]
            continue
        if name.startswith("scale_store/"):  # the L2 policy A/B entries: not a bandwidth curve
            continue
        tune = name.startswith("tune/")
        if tune and not with_tune:
            continue
        if name.startswith("move_bytes/"):
            parsed = parse_name(name[len("move_bytes/"):].replace("/", "/" + MOVE_LAYOUT + "/", 1))
        else:
            parsed = parse_name(name[len("tune/"):] if tune else name)
        if parsed is None:
            continue
        producer, layout, args, m = parsed
        m = int(b.get("M", m))
        panels[(producer, args)][("tune/" if tune else "") + layout].append((m, b["GBps"]))
    return data.get("context", {}), panels, copies


def panel_title(producer, args):
    if not args:
        return producer
    label = ARG_NAMES.get(producer, "arg")
    return f"{producer}, {label} = " + ", ".join(str(a) for a in args)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", type=Path, help="Google Benchmark JSON written by bench_producers --benchmark_out")
    ap.add_argument("-o", "--out", type=Path, help="PNG to write (default: the JSON's path with _bandwidth.png)")
    ap.add_argument("--tune", action="store_true", help="also plot the tune/* block-shape entries")
    ap.add_argument("--logy", action="store_true", help="log bandwidth axis (shows small M better)")
    ap.add_argument("--dpi", type=int, default=100, help="resolution (default 100)")
    args = ap.parse_args()

    try:
        context, panels, copies = load(args.json, args.tune)
    except (OSError, ValueError, KeyError) as e:
        print(f"{args.json}: cannot read benchmark JSON: {e}", file=sys.stderr)
        return 2
    if not panels:
        print(f"{args.json}: no producer entries with a GBps counter", file=sys.stderr)
        return 2
    out = args.out or args.json.with_name(args.json.stem + "_bandwidth.png")

    keys = sorted(panels)
    cols = 2 if len(keys) > 1 else 1
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.2 * rows), squeeze=False, sharey=not args.logy)
    copy_styles = ["--", ":", "-."]
    # One colour per line name across the panels; the same-bytes ceiling in grey.
    names = sorted({layout for key in keys for layout in panels[key]} - {MOVE_LAYOUT})
    colours = {name: f"C{i % 10}" for i, name in enumerate(names)}
    colours[MOVE_LAYOUT] = "grey"
    for ax, key in zip(axes.flat, keys):
        for layout in sorted(panels[key]):
            points = sorted(panels[key][layout])
            ax.plot([m for m, _ in points], [g for _, g in points], marker="o", markersize=3, label=layout,
                    color=colours[layout], linestyle="-." if layout == MOVE_LAYOUT else "-")
        for style, (kind, gbps) in zip(copy_styles, sorted(copies.items())):
            ax.axhline(gbps, color="black", linestyle=style, linewidth=1,
                       label=f"copy 256 MiB ({kind}): {gbps:.0f} GB/s")
        ax.set_xscale("log", base=2)
        if args.logy:
            ax.set_yscale("log")
        ax.set_title(panel_title(*key))
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("GB/s (read + write)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    where = ", ".join(str(context[k]) for k in ("host_name", "date") if k in context)
    fig.suptitle(f"fp8scale producers: bandwidth vs M ({args.json.name}{'; ' + where if where else ''})", fontsize=10)
    fig.tight_layout()
    # A 64-colour palette PNG: the lines and text lose nothing visible and the
    # file is a fifth of the RGBA one (benchmarks/results keeps it).
    buf = io.BytesIO()
    fig.savefig(buf, dpi=args.dpi, format="png")
    Image.open(buf).convert("RGB").quantize(colors=64).save(out, optimize=True)
    print(f"{out}: {len(keys)} panels, {sum(len(v) for v in panels.values())} lines, copy baselines: "
          + (", ".join(f"{k} {v:.0f} GB/s" for k, v in sorted(copies.items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
