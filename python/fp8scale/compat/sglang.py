"""SGLang's ``sglang_per_token_group_quant_fp8``, on fp8scale's kernels.

Replaces ``from sglang.srt.layers.quantization.fp8_kernel import
sglang_per_token_group_quant_fp8`` with ``from fp8scale.compat.sglang import
sglang_per_token_group_quant_fp8``; docs/engines.md shows the call sites.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .. import _ops
from . import (PLATFORM_FP8, call_quant, engine_fmax, engine_scale, groups, input_rows, packed_ue8m0_scale,
               sglang_refusals)

__all__ = ["sglang_per_token_group_quant_fp8"]


def sglang_per_token_group_quant_fp8(
    x: torch.Tensor,
    group_size: int,
    eps: float = 1e-10,
    column_major_scales: bool = False,
    scale_tma_aligned: bool = False,
    scale_ue8m0: bool = False,
    fuse_silu_and_mul: bool = False,
    masked_m: Optional[torch.Tensor] = None,
    enable_v2: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-token-group fp8 quantization with SGLang's signature and outputs.

    Args:
        x: (..., K), bf16 / fp16 / fp32 on a CUDA device, unit last stride;
            more than 2 dimensions need a contiguous x (rows flattened).
            With fuse_silu_and_mul, K = 2 I: gate in [0, I), up in [I, 2 I).
        group_size: 32, 64 or 128.
        eps: floor on a group's amax.
        column_major_scales: scales (M, G) with strides (1, M); 2-D x only.
        scale_tma_aligned: with column_major_scales, strides (1, align(M, 4)).
        scale_ue8m0: power-of-two scales packed as SGLang does for DeepGEMM:
            int32 (M, ceil(G / 4)) with strides (1, align(M, 4)), four
            exponent bytes a word (with column_major_scales,
            scale_tma_aligned and group_size 128, as SGLang requires).
        fuse_silu_and_mul: quantize silu(gate) * up (q and scale of I
            columns).
        masked_m: the masked MoE layout: NotImplementedError.
        enable_v2: selects one of sgl-kernel's kernels; ignored.

    Returns:
        (q, scale): q (..., K) (or (..., I)) in e4m3fn (e4m3fnuz scaled to
        224 on ROCm builds of torch), scale float32 (..., G) row-major or
        (M, G) column-major as selected, or the packed int32 tensor.
    """
    op = "sglang_per_token_group_quant_fp8"
    sglang_refusals(op, masked_m)
    k, cols = input_rows(op, "x", x, fuse_silu_and_mul)
    g = groups(op, "x", cols, group_size)
    q = torch.empty(*x.shape[:-1], cols, dtype=PLATFORM_FP8, device=x.device)
    if scale_ue8m0:
        if not (column_major_scales and scale_tma_aligned) or group_size != 128 or x.dim() != 2:
            _ops.fail(op, "scale_ue8m0", "= True needs a 2-D x, column_major_scales, scale_tma_aligned and "
                                         "group_size 128 (SGLang's packed UE8M0 layout)")
        return q, packed_ue8m0_scale(op, x, q, group_size, engine_fmax(PLATFORM_FP8), eps, fuse_silu_and_mul)
    x2, q2, scale, s2 = engine_scale(op, "column_major_scales", x, q, k, cols, g, column_major_scales,
                                     scale_tma_aligned)
    fmax = engine_fmax(PLATFORM_FP8)
    call_quant(x2, q2, s2, group_size, False, fmax, eps, fuse_silu_and_mul)
    return q, scale
