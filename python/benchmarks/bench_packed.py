"""DeepGEMM's packed UE8M0 scales: the producer writing them against emission + relayout.

Group quant of bf16 x [M, 7168] into e4m3fn, groups of 128, UE8M0 rule, device
time per call under CUDA-graph replay (graph_timing.graph_us: a graph of 20
calls, median of 15 replays; rounds interleaved, every other one reversed;
the median over rounds and the spread) of

  packed:             group_quant writing the packed int32 words itself
  packed+PDL:         the same with programmatic dependent launch
  row+materialize:    row-major fp32 UE8M0 scales, then materialize_packed_ue8m0
  col4:               column-major fp32 UE8M0 scales, ld = align(M, 4) (what an
                      SM90 DeepGEMM caller writes; no packing)

Needs a CUDA GPU and FP8SCALE_OPS_LIBRARY or an installed package:

  FP8SCALE_OPS_LIBRARY=build/test/python/libfp8scale_ops.so PYTHONPATH=python \\
  python3 python/benchmarks/bench_packed.py --json packed.json
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import fp8scale
from graph_timing import graph_us

K, G, GROUP = 7168, 56, 128


def variants(m: int) -> dict:
    """The calls to time at M = m, on preallocated outputs."""
    x = torch.randn(m, K, device="cuda").to(torch.bfloat16)
    q = torch.empty(m, K, dtype=torch.float8_e4m3fn, device="cuda")
    ld = (m + 3) // 4 * 4
    row = torch.empty(m, G, device="cuda")
    col4 = torch.empty(G * ld, device="cuda").as_strided((m, G), (1, ld))
    packed = fp8scale._layout.new_packed_ue8m0(m, G, x.device)
    op, pack = torch.ops.fp8scale.group_quant.default, torch.ops.fp8scale.materialize_packed_ue8m0.default
    return {
        "packed": lambda: op(x, q, packed, GROUP, True),
        "packed+PDL": lambda: op(x, q, packed, GROUP, True, 0.0, 1e-10, True),
        "row+materialize": lambda: (op(x, q, row, GROUP, True), pack(row, packed)),
        "col4": lambda: op(x, q, col4, GROUP, True),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", default="1,8,64,512,8192,65536", help="token counts M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    ms = [int(v) for v in args.ms.split(",")]
    fp8scale._ops.require_ops()
    samples = {}
    for r in range(args.rounds):
        order = ms if r % 2 == 0 else list(reversed(ms))
        for m in order:
            calls = variants(m)
            names = list(calls) if r % 2 == 0 else list(reversed(calls))
            for name in names:
                samples.setdefault((m, name), []).append(graph_us(lambda: calls[name]))
    names = list(variants(1))
    rows = []
    for m in ms:
        med = {n: statistics.median(samples[(m, n)]) for n in names}
        rows.append({"M": m, **{f"{n}_us": round(med[n], 3) for n in names},
                     **{f"{n}_spread_us": round(max(samples[(m, n)]) - min(samples[(m, n)]), 3) for n in names},
                     "packed_over_row_materialize": round(med["packed"] / med["row+materialize"], 3)})
    device = torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}: us per call, median of {args.rounds} rounds")
    print(f"{'M':>6} " + " ".join(f"{n:>16}" for n in names) + f" {'packed/(row+m)':>15}")
    for r in rows:
        print(f"{r['M']:>6} " + " ".join(f"{r[n + '_us']:>16.2f}" for n in names)
              + f" {r['packed_over_row_materialize']:>15.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "K": K, "group": GROUP, "rounds": args.rounds,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
