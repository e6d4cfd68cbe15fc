#!/usr/bin/env python3
"""DeepSeek-V3's fp8 activation sites, from PyTorch, feeding a block-scaled GEMM.

Each site quantizes its activations in 1 x 128 groups and hands (q, scale) to
an fp8 GEMM whose weights are quantized in 128 x 128 blocks. The GEMM here is
torch's own F.scaled_mm (cuBLASLt's VEC128 scales on sm_90), which reads the
activation scales column-major with strides (1, rows), and only for a row
count that is a multiple of 4: the cuBLASLt consumer of layout_policy.hpp,
ld = align(M, 4). The GEMM runs on ld rows: q is written into an (ld, K)
buffer, the scale tensor is viewed as (ld, G) over the producer's [G][ld]
block, whose padding slots hold 0, and rows M .. ld - 1 of the output are
dropped (rows of a GEMM are independent).

Per site and M the layer's scales reach the GEMM two ways:
  emit:         the gate asks for column-major, the producer writes it; its
                scale tensor has strides (1, ld) over the producer's own
                buffer and goes to the GEMM as it is;
  materialize:  the producer writes row-major scales and materialize
                relayouts them (the copy the emit path removes).
Both must give the same fp8 codes, the same scales and the same GEMM output,
bit for bit; the GEMM output is also compared with a bf16 GEMM of the
unquantized operands.

  PYTHONPATH=python python3 examples/python/deepseek_v3_sites.py [--ms 1,3,8,128,1000]

Needs a CUDA GPU of compute capability 9.0 (torch's blockwise scaled_mm runs
there only), a torch with F.scaled_mm, and the fp8scale package.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import fp8scale
from fp8scale import ScaleConsumer

HIDDEN, HEADS, HEAD_DIM, MOE_I = 7168, 128, 128, 2048
BLOCK = 128
CONSUMER = ScaleConsumer.CUBLASLT_VEC128


@dataclass
class Site:
    name: str
    producer: str  # rmsnorm_quant | group_quant | silu_clamp_quant
    K: int  # the GEMM's K (columns quantized)
    N: int  # the GEMM's output features
    gemm: str


SITES = (
    Site("attn_in", "rmsnorm_quant", HIDDEN, 1536, "input_layernorm -> q_a_proj"),
    Site("o_proj_in", "group_quant", HEADS * HEAD_DIM, HIDDEN, "attention output [M, 128, 128] -> o_proj"),
    Site("moe_in", "rmsnorm_quant", HIDDEN, 2 * MOE_I, "post_attention_layernorm -> experts' gate_up_proj"),
    Site("down_in", "silu_clamp_quant", MOE_I, HIDDEN, "SiLU(gate) * up -> experts' down_proj"),
)


def block_quant_weight(w: torch.Tensor):
    """W (N, K) bf16 as e4m3fn codes and (N / 128, K / 128) float32 scales,
    s = amax / 448 per 128 x 128 block (divisions tensor by tensor)."""
    n, k = w.shape
    blocks = w.float().view(n // BLOCK, BLOCK, k // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3)).clamp_min(1e-10)
    s = amax / torch.full_like(amax, 448.0)
    q = (blocks / s[:, None, :, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.view(n, k), s


def gemm(q_rows: torch.Tensor, m: int, scale: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
    """y (m, N) bf16 = (q * scale) @ (wq * ws)^T over ld = align(m, 4) rows:
    q_rows (ld, K) fp8, scale the (m, G) view with strides (1, ld) (1 x 128
    groups), weight scales 128 x 128."""
    ld = q_rows.shape[0]
    assert scale.stride() == (1, ld), scale.stride()
    scale_rows = scale.as_strided((ld, scale.shape[1]), (1, ld))  # the padding slots: rows m .. ld - 1, 0
    y = F.scaled_mm(q_rows, wq.t(), scale_rows, F.ScalingType.BlockWise1x128, ws.t(),
                    F.ScalingType.BlockWise128x128, output_dtype=torch.bfloat16)
    return y[:m]


class SiteInputs:
    """One site's activations and weights at M tokens (seeded)."""

    def __init__(self, site: Site, m: int, seed: int):
        g = torch.Generator(device="cuda").manual_seed(seed)
        rand = lambda *shape: torch.randn(*shape, generator=g, device="cuda")
        self.site = site
        if site.producer == "group_quant":
            self.x = (rand(m, HEADS, HEAD_DIM) * 2).to(torch.bfloat16)
        elif site.producer == "silu_clamp_quant":
            self.x = (rand(m, 2 * site.K) * 2).to(torch.bfloat16)
        else:
            self.x = rand(m, site.K).to(torch.bfloat16)
            self.residual = (rand(m, site.K) * 4).to(torch.bfloat16)
            self.norm_w = (torch.rand(site.K, generator=g, device="cuda") + 0.5).to(torch.bfloat16)
        self.w = (rand(site.N, site.K) * 0.02).to(torch.bfloat16)
        self.wq, self.ws = block_quant_weight(self.w)

    def produce(self, transpose_scale: bool):
        """The site's producer through the out-variant op, writing q into the
        first M rows of an (ld, K) buffer. Returns (q_rows, scale, the GEMM
        input in bf16 for the reference)."""
        m, k = self.x.shape[0], self.site.K
        ld = fp8scale.consumer_scale_ld(CONSUMER, m)
        q_rows = torch.empty(ld, k, dtype=torch.float8_e4m3fn, device="cuda")  # rows >= m: don't care
        q = q_rows[:m]
        if transpose_scale:
            s = torch.empty(k // BLOCK, ld, device="cuda").t()[:m]  # (m, G), strides (1, ld)
        else:
            s = torch.empty(m, k // BLOCK, device="cuda")
        p = self.site.producer
        if p == "group_quant":
            torch.ops.fp8scale.group_quant(self.x, q.view(self.x.shape), s, BLOCK)
            return q_rows, s, self.x.reshape(m, -1)
        if p == "silu_clamp_quant":
            torch.ops.fp8scale.silu_clamp_quant(self.x, q, s, 0.0, BLOCK)
            gate, up = self.x.float().chunk(2, dim=-1)
            return q_rows, s, (F.silu(gate) * up).to(torch.bfloat16)
        residual = self.residual.clone()  # updated in place: each path starts from the same residual
        norm = torch.empty_like(self.x)
        torch.ops.fp8scale.rmsnorm_quant(self.x, self.norm_w, q, s, residual, norm, 1e-6, BLOCK)
        return q_rows, s, norm


def block(scale: torch.Tensor) -> torch.Tensor:
    """The whole [G][ld] block under an (m, G) scale with strides (1, ld)."""
    ld = scale.stride(1)
    return scale.as_strided((scale.shape[1], ld), (ld, 1))


def run_site(site: Site, m: int) -> dict:
    inputs = SiteInputs(site, m, seed=1000 * SITES.index(site) + m)
    ld_align = 4  # consumer_scale_ld(CUBLASLT_VEC128, m) == align(m, 4)
    # The emit path: the gate decides (true for every m >= 1 with this
    # consumer: row-major bytes lack the padding slots), and the producer's
    # scale tensor goes to the GEMM as it is.
    assert fp8scale.emit_transposed(m, CONSUMER)
    q_e, s_e, ref_in = inputs.produce(transpose_scale=True)
    # The materialize path.
    q_m, s_row, _ = inputs.produce(transpose_scale=False)
    s_m = fp8scale.materialize(s_row, ld_align=ld_align)
    y_e = gemm(q_e, m, s_e, inputs.wq, inputs.ws)
    y_m = gemm(q_m, m, s_m, inputs.wq, inputs.ws)
    m_rows = slice(0, m)
    y_ref = ref_in.float() @ inputs.w.float().t()
    torch.cuda.synchronize()
    rel = ((y_e.float() - y_ref).norm() / y_ref.norm()).item()
    return {
        "q": torch.equal(q_e[m_rows].view(torch.uint8), q_m[m_rows].view(torch.uint8)),
        "scale": torch.equal(block(s_e), block(s_m)),  # padding slots included
        "gemm": torch.equal(y_e.view(torch.int16), y_m.view(torch.int16)),
        "rel_err": rel,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", default="1,3,8,17,128,1000", help="token counts")
    args = ap.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("deepseek_v3_sites: needs a CUDA GPU of compute capability 9.0 (torch's blockwise scaled_mm)")
        return 2
    ms = [int(v) for v in args.ms.split(",")]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; consumer: F.scaled_mm (cuBLASLt), "
          f"activation scales (1, align(M, 4))")
    print(f"{'site':<10} {'M':>5}  {'q':<5} {'scale':<5} {'gemm':<5} {'rel. err.':>9}  GEMM")
    ok = True
    for site in SITES:
        for m in ms:
            r = run_site(site, m)
            good = r["q"] and r["scale"] and r["gemm"] and r["rel_err"] < 0.05
            ok &= good
            yes = lambda b: "same" if b else "DIFF"
            print(f"{site.name:<10} {m:>5}  {yes(r['q']):<5} {yes(r['scale']):<5} {yes(r['gemm']):<5} "
                  f"{r['rel_err']:>9.2e}  {site.gemm}")
    print("all sites: emit == row-major + materialize, bit for bit" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
