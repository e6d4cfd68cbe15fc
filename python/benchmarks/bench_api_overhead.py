"""Host time per eager call: the Python functions against the raw ops.

For each producer at M = 1 (DeepSeek-V3 shapes, bf16 in, e4m3fn out, group
128), with column-major scales (ld_align 4) and row-major scales, the median
host time per call of enqueueing 500 calls (median of 20 batches; the device
drains between batches) of:

- api:    fp8scale.<producer>(...), which allocates q and the scale and calls the op;
- op:     torch.ops.fp8scale.<producer>.default on preallocated outputs;
- alloc:  the two allocations the function makes (q, and the scale as it makes it);
- empty:  one torch.empty.

api - op - alloc is what the Python layer adds. Needs a CUDA GPU and the op
library (an installed package, or FP8SCALE_OPS_LIBRARY and PYTHONPATH=python):

  python3 python/benchmarks/bench_api_overhead.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import torch

import fp8scale
from host_timing import host_us

K, I_MOE, GROUP, LIMIT = 7168, 2048, 128, 7.0
FP8 = torch.float8_e4m3fn


def variants(producer: str, col_major: bool):
    """(api, op, alloc) callables for one producer and scale layout at M = 1."""
    m, dev, la = 1, "cuda", 4 if col_major else 1
    cols = I_MOE if producer == "silu_clamp_quant" else K
    x = torch.randn(m, 2 * cols if producer == "silu_clamp_quant" else cols, device=dev).to(torch.bfloat16)
    w = torch.ones(K, dtype=torch.bfloat16, device=dev)
    residual = torch.zeros(m, K, dtype=torch.bfloat16, device=dev)
    g = cols // GROUP
    ld = (m + la - 1) // la * la

    def alloc():  # as the functions allocate (fp8scale._layout.new_scale)
        q = torch.empty(m, cols, dtype=FP8, device=dev)
        if col_major:
            s = torch.empty(g * ld, dtype=torch.float32, device=dev).as_strided((m, g), (1, ld))
        else:
            s = torch.empty(m, g, dtype=torch.float32, device=dev)
        return q, s

    q, s = alloc()
    if producer == "group_quant":
        op = torch.ops.fp8scale.group_quant.default
        return (lambda: fp8scale.group_quant(x, GROUP, transpose_scale=col_major, ld_align=la),
                lambda: op(x, q, s, GROUP), alloc)
    if producer == "silu_clamp_quant":
        op = torch.ops.fp8scale.silu_clamp_quant.default
        return (lambda: fp8scale.silu_clamp_quant(x, LIMIT, GROUP, transpose_scale=col_major, ld_align=la),
                lambda: op(x, q, s, LIMIT, GROUP), alloc)
    op = torch.ops.fp8scale.rmsnorm_quant.default
    return (lambda: fp8scale.rmsnorm_quant(x, w, 1e-6, GROUP, residual=residual, transpose_scale=col_major,
                                           ld_align=la),
            lambda: op(x, w, q, s, residual, None, 1e-6, GROUP), alloc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    rows = []
    empty = host_us(lambda: torch.empty(1, device="cuda"))
    for producer in ("group_quant", "silu_clamp_quant", "rmsnorm_quant"):
        for col_major in (True, False):
            api, op, alloc = variants(producer, col_major)
            t = {"api": host_us(api), "op": host_us(op), "alloc": host_us(alloc)}
            rows.append({"producer": producer, "scale": "column-major" if col_major else "row-major",
                         **{f"{k}_us": round(v, 2) for k, v in t.items()},
                         "python_layer_us": round(t["api"] - t["op"] - t["alloc"], 2)})
    device = torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}: host us per eager call at M = 1 (torch.empty: {empty:.2f})")
    print(f"{'producer':<17} {'scale':<13} {'api':>7} {'op':>7} {'alloc':>7} {'api-op-alloc':>13}")
    for r in rows:
        print(f"{r['producer']:<17} {r['scale']:<13} {r['api_us']:>7.2f} {r['op_us']:>7.2f} {r['alloc_us']:>7.2f} "
              f"{r['python_layer_us']:>13.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "empty_us": round(empty, 2), "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
