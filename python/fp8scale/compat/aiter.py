"""aiter's fused RMSNorm-quant and clamp-act-mul-quant, on fp8scale's kernels.

Replaces ``from aiter.ops.triton.quant.fused_fp8_quant import
fused_rms_fp8_group_quant`` and ``from aiter.ops.triton.fusions.fused_clamp_act_mul
import fused_clamp_act_mul`` with ``from fp8scale.compat.aiter import ...``.

aiter's column-major scales (``transpose_scale=True``) are a [G][M] buffer
presented either as a contiguous (M, G) view of it (strides (G, 1): the
default, which aiter's bpreshuffle GEMM tells from row-major by its
stride(0)) or as the strided (M, G) view with strides (1, M)
(``is_x_scale_strided=True``). Both are returned here as aiter does, over a
buffer fp8scale's producer wrote column-major: no copy.
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import _ops
from . import fp8_dtype_of, groups, unsupported

__all__ = ["fused_clamp_act_mul", "fused_rms_fp8_group_quant"]

def _col_major_scale(m: int, g: int, device):
    """A [g][m] float32 buffer and its (m, g) view with strides (1, m)."""
    buf = torch.empty(g, m, dtype=torch.float32, device=device)
    return buf, buf.t()


def fused_rms_fp8_group_quant(
    inp1: torch.Tensor,
    inp1_weight: torch.Tensor,
    inp1_epsilon: float,
    inp2: Optional[torch.Tensor] = None,
    inp2_weight: Optional[torch.Tensor] = None,
    inp2_epsilon: Optional[float] = None,
    group_size: int = 128,
    dtype_quant: torch.dtype = torch.float8_e4m3fn,
    res1: Optional[torch.Tensor] = None,
    output_unquantized_inp1: bool = False,
    transpose_scale: bool = False,
    is_x_scale_strided: bool = False,
):
    """RMSNorm of inp1 (after adding res1), then fp8 group quantization.

    Args:
        inp1: (M, N1) bf16 / fp16 / fp32 on a CUDA device, unit column stride.
        inp1_weight: (N1,) of inp1's dtype. inp1_epsilon: the RMSNorm epsilon.
        inp2, inp2_weight, inp2_epsilon: aiter's second, unquantized RMSNorm:
            NotImplementedError when inp2 is given.
        group_size: 32, 64 or 128 (N1 a multiple of it).
        dtype_quant: torch.float8_e4m3fn or torch.float8_e4m3fnuz (quantized
            to the format's max, as aiter does).
        res1: optional (M, N1) residual; inp1 + res1 is returned as out_res1
            (a new tensor: res1 is copied first, one device copy, then
            updated by the producer) and normalized.
        output_unquantized_inp1: also return the normalized values (out1).
        transpose_scale, is_x_scale_strided: the scale presentation (module
            doc).

    Returns:
        ((q, scale), out1, out2, out_res1): q (M, N1) fp8; scale float32
        (M, N1 // group_size); out1 or None; out2 None; out_res1 or None.
    """
    op = "fused_rms_fp8_group_quant"
    if inp2 is not None:
        unsupported(op, "inp2", "(a second, unquantized RMSNorm) is not supported; normalize it separately")
    _ops.check_tensor(op, "inp1", inp1, _ops._INPUT_DTYPES, (2,))
    _ops.check_tensor(op, "inp1_weight", inp1_weight, (inp1.dtype,))
    m, n1 = inp1.shape
    g = groups(op, "inp1", n1, group_size)
    q = torch.empty(m, n1, dtype=fp8_dtype_of(op, "dtype_quant", dtype_quant), device=inp1.device)
    if transpose_scale:
        buf, scale = _col_major_scale(m, g, inp1.device)
    else:
        buf = scale = torch.empty(m, g, dtype=torch.float32, device=inp1.device)
    out1 = torch.empty(m, n1, dtype=inp1.dtype, device=inp1.device) if output_unquantized_inp1 else None
    out_res1 = None
    if res1 is not None:
        _ops.check_tensor(op, "res1", res1, (inp1.dtype,), (2,))
        out_res1 = res1.clone(memory_format=torch.contiguous_format)
    _ops.RMSNORM_QUANT(inp1, inp1_weight, q, scale, out_res1, out1, inp1_epsilon, group_size)
    if transpose_scale and not is_x_scale_strided:
        scale = buf.view(m, g)
    return (q, scale), out1, None, out_res1


def fused_clamp_act_mul(
    inp: torch.Tensor,
    out: Optional[torch.Tensor] = None,
    scale: Optional[torch.Tensor] = None,
    swiglu_limit: float = 0,
    activation: str = "silu",
    weights: Optional[torch.Tensor] = None,
    dtype_quant: Optional[torch.dtype] = None,
    transpose_scale: bool = False,
    quant_block_size: int = 128,
    scale_dtype_fmt: str = "fp32",
    shuffle_scale: bool = False,
):
    """silu(min(gate, limit)) * clamp(up, -limit, limit), fp8 group quantized.

    Args:
        inp: (M, 2 N) bf16 / fp16 / fp32 on a CUDA device: gate in [0, N), up
            in [N, 2 N).
        out: optional fp8 (M, N) output, contiguous rows; its dtype is the
            format written (aiter's rule: out.dtype wins over dtype_quant).
        scale: optional float32 scales: (M, G) row-major, or the (G, M)
            contiguous buffer with transpose_scale (G = N // quant_block_size).
        swiglu_limit: the clamp; <= 0 disables it.
        activation: "silu" (others: ValueError).
        weights: NotImplementedError. dtype_quant: the fp8 dtype of q; None
            (aiter's unquantized output) is a ValueError.
        transpose_scale: column-major scales, returned as the contiguous
            (M, G) view of the [G][M] buffer, as aiter does.
        quant_block_size: the group size, 32, 64 or 128.
        scale_dtype_fmt: "fp32"; "ue8m0" (and shuffle_scale): NotImplementedError.

    Returns:
        (q, scale).
    """
    op = "fused_clamp_act_mul"
    if dtype_quant is None:
        _ops.fail(op, "dtype_quant", "is None (aiter's unquantized output): fp8scale quantizes; name an fp8 dtype")
    if not isinstance(activation, str) or activation.lower() != "silu":
        _ops.fail(op, "activation", f"= {activation!r}: fp8scale's producer applies silu")
    if weights is not None:
        unsupported(op, "weights", "(row weights) is not supported")
    if scale_dtype_fmt != "fp32" or shuffle_scale:
        unsupported(op, "scale_dtype_fmt" if scale_dtype_fmt != "fp32" else "shuffle_scale",
                    "selects UE8M0 byte scales, which fp8scale does not write yet")
    _ops.check_tensor(op, "inp", inp, _ops._INPUT_DTYPES, (2,))
    m, two_n = inp.shape
    if two_n % 2 != 0:
        _ops.fail(op, "inp", f"has an odd number of columns {two_n} (gate | up)")
    n = two_n // 2
    g = groups(op, "inp", n, quant_block_size)
    if out is None:
        out = torch.empty(m, n, dtype=fp8_dtype_of(op, "dtype_quant", dtype_quant), device=inp.device)
    else:
        _ops.check_tensor(op, "out", out, _ops._FP8_DTYPES, (2,))
    if scale is None and transpose_scale:
        buf, view = _col_major_scale(m, g, inp.device)
    elif scale is None:
        buf = view = torch.empty(m, g, dtype=torch.float32, device=inp.device)
    else:
        _ops.check_tensor(op, "scale", scale, (torch.float32,), (2,))
        want = (g, m) if transpose_scale else (m, g)
        if tuple(scale.shape) != want:
            _ops.fail(op, "scale", f"has shape {tuple(scale.shape)}, expected {want}")
        buf, view = scale, (scale.t() if transpose_scale else scale)
    _ops.SILU_CLAMP_QUANT(inp, out, view, float(swiglu_limit), quant_block_size)
    return out, (buf.view(m, g) if transpose_scale else buf)
