"""What the torch ops cost over the C++ launchers, and against torch.compile.

Three measurements in one process, DeepSeek-V3 shapes (group quant x [M, 7168],
SiLU-clamp x [M, 2 * 2048], RMSNorm quant with residual x [M, 7168]), bf16 in,
e4m3fn out, group 128:

1. graph: device time per call under CUDA-graph replay (a graph of 20 calls,
   median of 15 replays, rounds interleaved; the median over rounds) of
   - op:       torch.ops.fp8scale.<producer> on preallocated outputs,
   - launcher: the same launcher through libfp8scale_launcher_shim (ctypes),
   - compiled: torch.compile of a torch reference of the same function,
   for column-major scales (1, align(M, 4)) and row-major scales.
2. eager: host time per call to enqueue 500 calls at M = 1 (median of 20
   batches) for the Python API (allocation and checks included), the op on
   preallocated outputs, the ctypes call of the launcher, and an op of the
   same schema with an empty body (torch's dispatch alone).

Needs a CUDA GPU, FP8SCALE_OPS_LIBRARY or an installed package, and the test
build's FP8SCALE_LAUNCHER_SHIM and FP8SCALE_DISPATCH_FLOOR libraries:

  b=build/test/python
  FP8SCALE_OPS_LIBRARY=$b/libfp8scale_ops.so FP8SCALE_LAUNCHER_SHIM=$b/libfp8scale_launcher_shim.so \\
  FP8SCALE_DISPATCH_FLOOR=$b/libfp8scale_dispatch_floor.so \\
  PYTHONPATH=python:python/tests python3 python/benchmarks/bench_ops.py --json ops.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch

import fp8scale
from graph_timing import graph_us
from host_timing import host_us
import launcher_shim as shim

K_HIDDEN, I_MOE, GROUP = 7168, 2048, 128
FP8 = torch.float8_e4m3fn
FMAX = 448.0
EPS = 1e-10
LIMIT = 7.0
NORM_EPS = 1e-6
PRODUCERS = ("group_quant", "silu_clamp_quant", "rmsnorm_quant")


# --- torch references (what an engine without fp8scale compiles) -------------


def _quant(y: torch.Tensor, col_major: bool):
    """Group quantization of fp32 y (M, K): s = max(amax, eps) / fmax."""
    m, k = y.shape
    v = y.view(m, k // GROUP, GROUP)
    amax = v.abs().amax(dim=-1).clamp_min(EPS)
    s = amax / torch.full_like(amax, FMAX)
    q = (v / s.unsqueeze(-1)).clamp(-FMAX, FMAX).to(FP8).view(m, k)
    return q, (s.t().contiguous() if col_major else s)


def ref_group_quant(x, col_major: bool):
    return _quant(x.float(), col_major)


def ref_silu_clamp_quant(x, col_major: bool):
    gate, up = x.float().chunk(2, dim=-1)
    y = torch.nn.functional.silu(gate.clamp(max=LIMIT)) * up.clamp(-LIMIT, LIMIT)
    return _quant(y, col_major)


def ref_rmsnorm_quant(x, w, residual, col_major: bool):
    r = (x.float() + residual.float()).to(x.dtype)
    residual.copy_(r)
    rf = r.float()
    y = rf * torch.rsqrt(rf.pow(2).mean(dim=-1, keepdim=True) + NORM_EPS) * w.float()
    return _quant(y, col_major)


# --- one producer at one M -----------------------------------------------------


class Case:
    """Inputs and preallocated outputs of one producer at M rows, and the
    three callables that compute it."""

    def __init__(self, producer: str, m: int, col_major: bool, compiled: dict):
        self.producer, self.m, self.col_major = producer, m, col_major
        gen = torch.Generator(device="cuda").manual_seed(m)
        cols = 2 * I_MOE if producer == "silu_clamp_quant" else K_HIDDEN
        k = I_MOE if producer == "silu_clamp_quant" else K_HIDDEN
        self.x = (torch.randn(m, cols, generator=gen, device="cuda") * 3).to(torch.bfloat16)
        self.w = (torch.rand(K_HIDDEN, generator=gen, device="cuda") + 0.5).to(torch.bfloat16)
        self.residual = torch.randn(m, K_HIDDEN, generator=gen, device="cuda").to(torch.bfloat16)
        self.q = torch.empty(m, k, dtype=FP8, device="cuda")
        self.scale = fp8scale._layout.new_scale(m, k // GROUP, col_major, 4 if col_major else 1, "cuda")
        self.compiled = compiled[(producer, col_major)]

    def op(self, ns=None):
        """The op of namespace `ns` (torch.ops.fp8scale, or the dispatch floor's)."""
        ns = ns or torch.ops.fp8scale
        p, x, q, s = self.producer, self.x, self.q, self.scale
        if p == "group_quant":
            f = ns.group_quant
            return lambda: f(x, q, s, GROUP)
        if p == "silu_clamp_quant":
            f = ns.silu_clamp_quant
            return lambda: f(x, q, s, LIMIT, GROUP)
        f, w, r = ns.rmsnorm_quant, self.w, self.residual
        return lambda: f(x, w, q, s, r, None, NORM_EPS, GROUP)

    def launcher(self):
        """Binds on the current stream: call it inside the capture."""
        p, x, q, s = self.producer, self.x, self.q, self.scale
        if p == "group_quant":
            return shim.group_quant(x, q, s)
        if p == "silu_clamp_quant":
            return shim.silu_clamp_quant(x, q, s, LIMIT)
        return shim.rmsnorm_quant(x, self.w, q, s, NORM_EPS, self.residual)

    def reference(self):
        f, cm = self.compiled, self.col_major
        if self.producer == "rmsnorm_quant":
            return lambda: f(self.x, self.w, self.residual, cm)
        return lambda: f(self.x, cm)

    def python_api(self):
        x, cm = self.x, self.col_major
        la = 4 if cm else 1
        if self.producer == "group_quant":
            return lambda: fp8scale.group_quant(x, GROUP, transpose_scale=cm, ld_align=la)
        if self.producer == "silu_clamp_quant":
            return lambda: fp8scale.silu_clamp_quant(x, LIMIT, GROUP, transpose_scale=cm, ld_align=la)
        return lambda: fp8scale.rmsnorm_quant(x, self.w, NORM_EPS, GROUP, residual=self.residual,
                                              transpose_scale=cm, ld_align=la)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", default="1,16,128,1024,8192,32768", help="token counts M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    ms = [int(v) for v in args.ms.split(",")]
    if shim.LOAD_ERROR:
        raise SystemExit(f"bench_ops: {shim.LOAD_ERROR}")
    fp8scale._ops.require_ops()
    torch.ops.load_library(os.environ["FP8SCALE_DISPATCH_FLOOR"])

    refs = {"group_quant": ref_group_quant, "silu_clamp_quant": ref_silu_clamp_quant,
            "rmsnorm_quant": ref_rmsnorm_quant}
    compiled = {(p, cm): torch.compile(refs[p], dynamic=True) for p in PRODUCERS for cm in (False, True)}
    cases = [Case(p, m, cm, compiled) for p in PRODUCERS for cm in (True, False) for m in ms]
    variants = {"op": Case.op, "launcher": Case.launcher, "compiled": Case.reference}
    samples = {}
    for r in range(args.rounds):
        for c in cases:
            for name, make in variants.items():
                samples.setdefault((c.producer, c.col_major, c.m, name), []).append(graph_us(lambda: make(c)))
        print(f"round {r + 1}/{args.rounds} done", flush=True)

    graph = []
    for c in cases:
        t = {v: statistics.median(samples[(c.producer, c.col_major, c.m, v)]) for v in variants}
        graph.append({"producer": c.producer, "scale": "column-major" if c.col_major else "row-major", "M": c.m,
                      **{f"{v}_us": round(t[v], 3) for v in variants},
                      "op_over_launcher": round(t["op"] / t["launcher"], 4),
                      "compiled_over_op": round(t["compiled"] / t["op"], 3)})

    eager = []
    for p in PRODUCERS:
        c = Case(p, 1, True, compiled)
        t = {"python_api": host_us(c.python_api()), "op": host_us(c.op()), "launcher_ctypes": host_us(c.launcher()),
             "empty_op": host_us(c.op(torch.ops.fp8scale_floor))}
        eager.append({"producer": p, "M": 1, **{f"{k}_us": round(v, 2) for k, v in t.items()},
                      "op_minus_launcher_us": round(t["op"] - t["launcher_ctypes"], 2)})

    device = torch.cuda.get_device_name()
    print(f"\n{device}, torch {torch.__version__}: device us per call under graph replay")
    print(f"{'producer':<17} {'scale':<13} {'M':>6} {'op':>9} {'launcher':>9} {'op/l':>7} {'compiled':>9} {'c/op':>6}")
    for g in graph:
        print(f"{g['producer']:<17} {g['scale']:<13} {g['M']:>6} {g['op_us']:>9.2f} {g['launcher_us']:>9.2f} "
              f"{g['op_over_launcher']:>7.3f} {g['compiled_us']:>9.2f} {g['compiled_over_op']:>6.2f}")
    print("\nhost us per eager call at M = 1 (column-major, ld_align 4)")
    print(f"{'producer':<17} {'python api':>11} {'op':>8} {'ctypes':>8} {'op-ctypes':>10} {'empty op':>9}")
    for e in eager:
        print(f"{e['producer']:<17} {e['python_api_us']:>11.2f} {e['op_us']:>8.2f} {e['launcher_ctypes_us']:>8.2f} "
              f"{e['op_minus_launcher_us']:>10.2f} {e['empty_op_us']:>9.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "rounds": args.rounds, "graph": graph,
                       "eager": eager}, f, indent=1)


if __name__ == "__main__":
    main()
