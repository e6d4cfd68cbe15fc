"""Drop-in entry points with the signatures engines call today.

Each module takes one engine's function signature, argument names, defaults
and return convention (dtype, shape and strides of every returned tensor),
so that replacing one import moves a call site onto fp8scale's kernels:

=========================  ==================================================
module                     replaces
=========================  ==================================================
``compat.vllm``            ``per_token_group_quant_fp8`` (vLLM
                           ``model_executor/layers/quantization/utils/fp8_utils``)
``compat.sglang``          ``sglang_per_token_group_quant_fp8`` (SGLang
                           ``srt/layers/quantization/fp8_kernel``)
``compat.sgl_kernel``      ``sgl_per_token_group_quant_8bit`` (sgl-kernel,
                           the out-variant), and its alias
                           ``sgl_per_token_group_quant_fp8``
``compat.aiter``           ``fused_rms_fp8_group_quant`` and
                           ``fused_clamp_act_mul`` (aiter ``ops/triton``)
=========================  ==================================================

The numbers are fp8scale's (docs/numerics.md): each function returns the
bits of the matching ``fp8scale`` call. Arguments that select what fp8scale
does not compute raise ``NotImplementedError`` naming the argument, and
arguments that only choose one of the engine's kernels are accepted and
ignored; docs/engines.md lists both.
"""

from __future__ import annotations

import torch

from .. import _layout, _ops

# The fp8 format an engine picks when none is given: e4m3fnuz on ROCm builds
# of torch (MI300), e4m3fn elsewhere. The engines scale e4m3fnuz to 224, not
# its 240 (vLLM get_fp8_min_max, SGLang fp8_kernel).
PLATFORM_FP8 = torch.float8_e4m3fnuz if torch.version.hip else torch.float8_e4m3fn
_FNUZ_ENGINE_MAX = 224.0


def engine_fmax(fp8_dtype) -> float:
    """The fmax the vLLM and SGLang functions quantize to (0: the format's max)."""
    return _FNUZ_ENGINE_MAX if fp8_dtype == torch.float8_e4m3fnuz else 0.0


def fp8_dtype_of(op: str, name: str, dtype):
    if dtype not in _ops._FP8_DTYPES:
        _ops.fail(op, name, f"= {dtype!r}: fp8scale writes torch.float8_e4m3fn or torch.float8_e4m3fnuz",
                  TypeError)
    return dtype


def unsupported(op: str, name: str, what: str):
    raise NotImplementedError(f"fp8scale.compat.{op}: argument '{name}' {what}")


def groups(op: str, name: str, cols: int, group_size) -> int:
    """The group count of `cols` columns; ValueError for an unsupported group
    size or columns that are not a multiple of it."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size not in _ops._GROUP_SIZES:
        _ops.fail(op, "group_size", f"= {group_size!r}: supported group sizes are 32, 64, 128")
    if cols % group_size != 0:
        _ops.fail(op, name, f"has {cols} columns in its last dimension, not a multiple of group_size = {group_size}")
    if not _ops.AVAILABLE:
        _ops.require_ops()  # before allocating: without the op library nothing can run
    return cols // group_size


def rows_of(op: str, name: str, t: torch.Tensor, cols: int) -> torch.Tensor:
    """t as a 2-D (rows, cols) view: t itself when 2-D, else its leading
    dimensions flattened (t has 2 or more), which needs a contiguous t, as
    the engines' CUDA paths do."""
    if t.dim() == 2:
        return t
    if not t.is_contiguous():
        _ops.fail(op, name, f"with {t.dim()} dimensions must be contiguous, got strides {tuple(t.stride())}")
    return t.view(-1, cols)


def input_rows(op: str, name: str, x, fuse_silu_and_mul: bool):
    """x checked as an engine's (..., K) input; returns (K, the columns
    quantized: K, or K / 2 with the fused SiLU-and-mul)."""
    _ops.check_tensor(op, name, x, _ops._INPUT_DTYPES)
    if x.dim() < 2:
        _ops.fail(op, name, f"must have 2 or more dimensions, got shape {tuple(x.shape)}")
    k = x.shape[-1]
    if fuse_silu_and_mul and k % 2 != 0:
        _ops.fail(op, name, f"has an odd number of columns {k} (gate | up)")
    return k, (k // 2 if fuse_silu_and_mul else k)


def sglang_refusals(op: str, masked_m) -> None:
    """What SGLang's and sgl-kernel's quantization take that fp8scale does not compute."""
    if masked_m is not None:
        unsupported(op, "masked_m", "(the masked MoE layout) is not supported")


def packed_ue8m0_scale(op: str, x2, q2, group_size, fmax, eps, silu_and_mul, out=None):
    """SGLang's scale_ue8m0=True: UE8M0-rule scales packed four to an int32
    word (DeepGEMM's packed UE8M0); into `out` when given. Bfloat16 into
    float8_e4m3fn in groups of 32 or 128: the producer (group quant, or SiLU
    with `silu_and_mul`) writes the words itself; otherwise the scales are
    written column-major with the TMA-aligned ld and packed by one more
    launch (fp8scale.materialize(layout="packed_ue8m0"))."""
    m, g = x2.shape[0], q2.shape[1] // group_size
    if out is None:
        out = _layout.new_packed_ue8m0(m, g, x2.device)
    if (x2.dtype == torch.bfloat16 and q2.dtype == torch.float8_e4m3fn
            and group_size in _ops.PACKED_GROUP_SIZES):
        call_quant(x2, q2, out, group_size, True, fmax, eps, silu_and_mul)
        return out
    s = _layout.new_scale(m, g, True, 4, x2.device)
    call_quant(x2, q2, s, group_size, True, fmax, eps, silu_and_mul)
    _ops.MATERIALIZE_PACKED_UE8M0(s, out)
    return out


def engine_scale(op: str, flag: str, x, q, k: int, cols: int, g: int, column_major: bool, tma_aligned: bool):
    """The scale an engine allocates for x (..., K) -> q (..., cols), and the
    2-D x, q and scale the op takes: row-major x.shape[:-1] + (G,), or with
    `column_major` (2-D x only; `flag` names that argument) (M, G) with
    strides (1, M), or (1, align(M, 4)) with `tma_aligned`."""
    if column_major:
        if x.dim() != 2:
            _ops.fail(op, flag, f"needs a 2-D x, got shape {tuple(x.shape)}")
        scale = _layout.new_scale(x.shape[0], g, True, 4 if tma_aligned else 1, x.device)
        return x, q, scale, scale
    scale = torch.empty(*x.shape[:-1], g, dtype=torch.float32, device=x.device)
    return rows_of(op, "x", x, k), rows_of(op, "q", q, cols), scale, rows_of(op, "scale", scale, g)


def call_quant(x2, q2, s2, group_size, scale_ue8m0, fmax, eps, silu_and_mul=False):
    """The group quant op on 2-D tensors, or with `silu_and_mul` the SiLU
    producer with no clamp; trailing arguments only where they are not the
    schema's defaults."""
    if silu_and_mul:
        if not scale_ue8m0 and fmax == 0.0 and eps == 1e-10:
            _ops.SILU_CLAMP_QUANT(x2, q2, s2, 0.0, group_size)
        else:
            _ops.SILU_CLAMP_QUANT(x2, q2, s2, 0.0, group_size, bool(scale_ue8m0), fmax, eps, False)
    elif not scale_ue8m0 and fmax == 0.0 and eps == 1e-10:
        _ops.GROUP_QUANT(x2, q2, s2, group_size)
    else:
        _ops.GROUP_QUANT(x2, q2, s2, group_size, bool(scale_ue8m0), fmax, eps, False)
