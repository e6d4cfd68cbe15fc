"""sgl-kernel's ``sgl_per_token_group_quant_8bit``, on fp8scale's kernels.

Replaces ``from sgl_kernel import sgl_per_token_group_quant_8bit`` (or its
alias ``sgl_per_token_group_quant_fp8``) with ``from fp8scale.compat.sgl_kernel
import ...``: the out-variant that writes the caller's tensors.
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import _ops
from . import call_quant, groups, input_rows, packed_ue8m0_scale, rows_of, sglang_refusals

__all__ = ["sgl_per_token_group_quant_8bit", "sgl_per_token_group_quant_fp8"]


def sgl_per_token_group_quant_8bit(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    group_size: int,
    eps: float,
    fp8_min: float,
    fp8_max: float,
    scale_ue8m0: bool = False,
    fuse_silu_and_mul: bool = False,
    masked_m: Optional[torch.Tensor] = None,
    enable_v2: Optional[bool] = None,
) -> None:
    """Per-token-group fp8 quantization into caller-allocated outputs.

    Args:
        input: (..., K), bf16 / fp16 / fp32 on a CUDA device, unit last
            stride; more than 2 dimensions need contiguous tensors. With
            fuse_silu_and_mul, K = 2 I: gate in [0, I), up in [I, 2 I).
        output_q: fp8 (e4m3fn or e4m3fnuz), (..., K) or (..., I), contiguous
            rows. int8 output: TypeError (fp8scale writes fp8 only).
        output_s: float32 (M, G) scales, row-major (G, 1) or column-major
            (1, ld) with ld >= M over a storage that holds its [G][ld] block
            (padding rows written 0), or (..., G) contiguous; with
            scale_ue8m0, the int32 (M, ceil(G / 4)) packed UE8M0 tensor with
            strides (1, ld), ld >= align(M, 4) a multiple of 4.
        group_size: 32, 64 or 128. eps: floor on a group's amax.
        fp8_min, fp8_max: the quantization range; fp8_min must be -fp8_max,
            and fp8_max in (0, the format's max].
        scale_ue8m0: power-of-two scales, packed into the int32 output_s.
        fuse_silu_and_mul: quantize silu(gate) * up.
        masked_m: the masked MoE layout: NotImplementedError.
        enable_v2: selects one of sgl-kernel's kernels; ignored.
    """
    op = "sgl_per_token_group_quant_8bit"
    sglang_refusals(op, masked_m)
    k, cols = input_rows(op, "input", input, fuse_silu_and_mul)
    _ops.check_tensor(op, "output_q", output_q, _ops._FP8_DTYPES)
    _ops.check_tensor(op, "output_s", output_s, (torch.int32,) if scale_ue8m0 else (torch.float32,))
    if fp8_min != -fp8_max:
        _ops.fail(op, "fp8_min", f"= {fp8_min!r}: fp8scale quantizes to [-fp8_max, fp8_max], fp8_max = {fp8_max!r}")
    g = groups(op, "input", cols, group_size)
    x2, q2 = rows_of(op, "input", input, k), rows_of(op, "output_q", output_q, cols)
    if scale_ue8m0:
        if input.dim() != 2:
            _ops.fail(op, "scale_ue8m0", f"= True needs a 2-D input, got shape {tuple(input.shape)}")
        packed_ue8m0_scale(op, x2, q2, group_size, float(fp8_max), eps, fuse_silu_and_mul, out=output_s)
        return
    s2 = output_s if output_s.dim() == 2 else rows_of(op, "output_s", output_s, g)
    fmax = float(fp8_max)
    call_quant(x2, q2, s2, group_size, False, fmax, eps, fuse_silu_and_mul)


sgl_per_token_group_quant_fp8 = sgl_per_token_group_quant_8bit
