"""vLLM's ``per_token_group_quant_fp8``, on fp8scale's kernels.

Replaces ``from vllm.model_executor.layers.quantization.utils.fp8_utils import
per_token_group_quant_fp8`` with ``from fp8scale.compat.vllm import
per_token_group_quant_fp8``; docs/engines.md shows the call sites.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .. import _ops
from . import PLATFORM_FP8, call_quant, engine_fmax, engine_scale, fp8_dtype_of, groups, input_rows

__all__ = ["per_token_group_quant_fp8"]


def per_token_group_quant_fp8(
    x: torch.Tensor,
    group_size: int,
    eps: float = 1e-10,
    dtype: Optional[torch.dtype] = None,
    column_major_scales: bool = False,
    tma_aligned_scales: bool = False,
    out_q: Optional[torch.Tensor] = None,
    use_ue8m0: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-token-group fp8 quantization with vLLM's signature and outputs.

    Args:
        x: (..., K), bf16 / fp16 / fp32 on a CUDA device, unit last stride;
            more than 2 dimensions need a contiguous x (the rows are
            flattened).
        group_size: 32, 64 or 128 (K a multiple of it).
        eps: floor on a group's amax.
        dtype: the fp8 dtype of q; None: e4m3fn (e4m3fnuz on ROCm builds of
            torch). e4m3fnuz quantizes to +-224 as vLLM does.
        column_major_scales: scales (M, G) with strides (1, M); 2-D x only.
        tma_aligned_scales: with column_major_scales, strides
            (1, align(M, 4)) (the TMA-aligned ld DeepGEMM reads); ignored
            without it, as in vLLM.
        out_q: optional fp8 output of x's shape, contiguous; its dtype is
            the format written.
        use_ue8m0: power-of-two scales (UE8M0 values stored as float32).
            None means False: vLLM resolves None from its DeepGEMM
            configuration, which fp8scale cannot see, so pass it explicitly.

    Returns:
        (q, scale): q of x's shape; scale float32 (..., K // group_size),
        row-major, or (M, G) column-major as selected above, the padding
        rows of an aligned ld written 0.

    Raises:
        TypeError for wrong dtypes, ValueError for wrong shapes, strides or
        options (each naming the argument), RuntimeError from the kernel's
        launcher (alignment).
    """
    op = "per_token_group_quant_fp8"
    k, _ = input_rows(op, "x", x, False)
    g = groups(op, "x", k, group_size)
    if out_q is None:
        q = torch.empty(*x.shape, dtype=PLATFORM_FP8 if dtype is None else fp8_dtype_of(op, "dtype", dtype),
                        device=x.device)
    else:
        _ops.check_tensor(op, "out_q", out_q, _ops._FP8_DTYPES)
        if out_q.shape != x.shape:
            _ops.fail(op, "out_q", f"has shape {tuple(out_q.shape)}, expected x's {tuple(x.shape)}")
        q = out_q
    x2, q2, scale, s2 = engine_scale(op, "column_major_scales", x, q, k, k, g, column_major_scales,
                                     tma_aligned_scales)
    call_quant(x2, q2, s2, group_size, use_ue8m0, engine_fmax(q.dtype), eps)
    return q, scale
