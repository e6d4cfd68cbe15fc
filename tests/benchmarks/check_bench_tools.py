#!/usr/bin/env python3
"""benchmarks/bench_table.py and plot_bench.py on the committed sweep.

    check_bench_tools.py REPO_ROOT WORK_DIR [--plot]

Without --plot, 1-3; with it, 4.

1. --compact of a small three-repetition run keeps each entry's median (not
   the mean) and its cv, drops the repetitions and the other aggregates, and
   keeps the binary's name without the directory it ran from.
2. The committed sweep is compact already: compacting it changes no byte.
3. Its group quant table holds the numbers the README's performance table
   quotes (M = 65536: 357.40 us row-major, 351.13 us column-major).
4. (--plot) plot_bench.py draws it: 14 panels into a PNG (exit 77, skipped,
   where matplotlib is missing).
"""
import importlib.util
import json
import os
import subprocess
import sys

root, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
table = os.path.join(root, "benchmarks", "bench_table.py")
sweep = os.path.join(root, "benchmarks", "results", "h200_bench_producers.json")


def run(*args):
    return subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True).stdout


if sys.argv[3:] == ["--plot"]:
    if importlib.util.find_spec("matplotlib") is None:
        print("matplotlib is not installed: plot_bench.py not run")
        sys.exit(77)
    png = os.path.join(work, "bandwidth.png")
    out = run(os.path.join(root, "benchmarks", "plot_bench.py"), sweep, "-o", png)
    assert "14 panels" in out and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", out
    print(out.strip())
    sys.exit(0)


def entry(run_name, aggregate, real_time, us):
    e = {"name": f"{run_name}_{aggregate}" if aggregate else run_name, "run_name": run_name,
         "run_type": "aggregate" if aggregate else "iteration", "real_time": real_time, "time_unit": "ns",
         "us_per_call": us, "family_index": 0, "cpu_time": 1.0, "repetitions": 3}
    if aggregate:
        e["aggregate_name"] = aggregate
    return e


name = "group_quant/row_major/8/iterations:3/manual_time"
raw = {"context": {"copy_baseline_GBps": "4000", "executable": "/some/build/dir/bench_producers"}, "benchmarks": [
    entry(name, None, 1000.0, 1.0), entry(name, None, 1200.0, 1.2), entry(name, None, 2000.0, 2.0),
    entry(name, "mean", 1400.0, 1.4), entry(name, "median", 1200.0, 1.2), entry(name, "stddev", 432.0, 0.43),
    entry(name, "cv", 0.3086, 0.31)]}
raw_path, small = os.path.join(work, "raw.json"), os.path.join(work, "small.json")
json.dump(raw, open(raw_path, "w"))
run(table, "--compact", raw_path, small)
got = json.load(open(small))
assert got["context"] == {"copy_baseline_GBps": "4000", "executable": "bench_producers"}, got["context"]
assert len(got["benchmarks"]) == 1, got["benchmarks"]
e = got["benchmarks"][0]
assert e["aggregate_name"] == "median" and e["us_per_call"] == 1.2 and e["real_time"] == 1200.0, e
assert e["cv"] == 0.3086, e
assert "family_index" not in e and "cpu_time" not in e, e

again = os.path.join(work, "sweep_again.json")
run(table, "--compact", sweep, again)
assert open(again, "rb").read() == open(sweep, "rb").read(), "the committed sweep is not in compact form"

tables = run(table, sweep)
assert "| 65536 | 357.40 | 351.13 | 0.982 |" in tables, "group quant at M = 65536 is not the README's 357.40 / 351.13 us"
assert tables.count("| 65536 |") >= 4, tables

print("bench_table.py: compact form and tables ok")
