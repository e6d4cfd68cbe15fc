"""fp8scale for PyTorch: fp8 activation producers that write their per-group
scales in the layout the block-scaled GEMM reads.

Each producer returns ``(q, scale)``. ``scale`` is an (M, G) float32 tensor,
G = K // group_size, with s(m, g) = ``scale[m, g]`` in either layout:

- ``transpose_scale=False``: row-major, strides (G, 1).
- ``transpose_scale=True``: column-major, strides (1, ld) with
  ld = align(M, ld_align), a view of a [G, ld] buffer whose padding slots
  (rows M .. ld - 1 of each group) the producer writes 0. The GEMM takes
  ``scale.data_ptr()`` and ``scale.stride(1)``; nothing is copied.

``emit_transposed(m, consumer)`` is the gate that picks between them, and
``materialize`` the relayout where a row-major emission must become the
consumer's layout. The ops themselves, out-variants that write
caller-allocated tensors, are ``torch.ops.fp8scale.*`` (see ``_ops``).
Numerics: docs/numerics.md; every op is bit-identical to the C++ launcher.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from . import _layout, _ops
from ._layout import (
    ScaleConsumer,
    align_up,
    consumer_is_column_major,
    consumer_scale_layout,
    consumer_scale_ld,
    detect_scale_consumer,
    emit_transposed,
    same_bytes_as_column_major,
    scale_layout,
)

__all__ = [
    "ScaleConsumer",
    "align_up",
    "consumer_is_column_major",
    "consumer_scale_layout",
    "consumer_scale_ld",
    "detect_scale_consumer",
    "emit_transposed",
    "group_quant",
    "materialize",
    "rmsnorm_quant",
    "scale_layout",
    "silu_clamp_quant",
]

__version__ = "0.1.0"

_EPS = 1e-10  # the ops' default eps (their schemas)
_NORM_EPS = 1e-6  # rmsnorm_quant's default norm_eps (its schema)


# The Python functions check what they need to allocate the outputs (types,
# dims, the group size), with plain comparisons that torch.compile traces
# without a graph break, and leave every other check to the op: the C++ op on
# CUDA tensors, the fake implementation (_ops) on meta and fake tensors, so
# each check runs once per call.


def _check_x(op: str, x, dims) -> None:
    _ops.check_tensor(op, "x", x, _ops._INPUT_DTYPES, dims)


def _check_like_x(op: str, x, tensors) -> None:
    """The error for a tensor (None allowed after the first) that is not of x's dtype."""
    for i, (name, t) in enumerate(tensors):
        if t is None and i > 0:
            continue
        if not isinstance(t, torch.Tensor):
            _ops.fail(op, name, f"must be a torch.Tensor, got {type(t).__name__}", TypeError)
        if t.dtype != x.dtype:
            _ops.fail(op, name, f"has dtype {t.dtype}, expected x's dtype {x.dtype}", TypeError)


# The exponent layouts a producer writes by name: the tensor each consumer takes.
_EXPONENT_LAYOUTS = {
    "packed_ue8m0": "packed UE8M0 scales",
    "swizzled_128x4": "swizzled UE8M0 scales",
}


def _exponent_layout(op, scale_layout, transpose_scale, ld_align, scale_ue8m0) -> Optional[str]:
    """The exponent layout `scale_layout` names ("packed_ue8m0" or
    "swizzled_128x4"), or None for "row_major" / "column_major", which must
    agree with transpose_scale."""
    name = scale_layout.lower() if isinstance(scale_layout, str) else None
    if name in _EXPONENT_LAYOUTS:
        if transpose_scale or ld_align != 1:
            _ops.fail(op, "transpose_scale" if transpose_scale else "ld_align",
                      f"does not apply to scale_layout={name!r} (the layout fixes its strides)")
        if not scale_ue8m0:
            _ops.fail(op, "scale_ue8m0", f"must be True: {_EXPONENT_LAYOUTS[name]} hold UE8M0 exponents")
        return name
    if name in ("row_major", "column_major"):
        if (name == "column_major") != bool(transpose_scale):
            _ops.fail(op, "scale_layout", f"= {scale_layout!r} disagrees with transpose_scale={transpose_scale!r}")
        return None
    _ops.fail(op, "scale_layout",
              f"= {scale_layout!r}: expected 'row_major', 'column_major', 'packed_ue8m0' or 'swizzled_128x4'")


def _check_exponent_producer(op, layout, x, group_size, fp8_dtype) -> None:
    """What a producer into an exponent layout takes beyond the shared checks."""
    what = _EXPONENT_LAYOUTS[layout]
    if x.dtype != torch.bfloat16:
        _ops.fail(op, "x", f"has dtype {x.dtype}: {what} are produced from torch.bfloat16", TypeError)
    if fp8_dtype != torch.float8_e4m3fn:
        _ops.fail(op, "fp8_dtype", f"= {fp8_dtype!r}: {what} go with torch.float8_e4m3fn", TypeError)
    if group_size not in _ops.PACKED_GROUP_SIZES:
        _ops.fail(op, "group_size", f"= {group_size!r}: {what} take groups of 32 or 128")


def _producer_scale(op, x, m, cols, group_size, transpose_scale, ld_align, fp8_dtype, scale_ue8m0, scale_layout):
    """The scale a producer writes: scale_layout's exponent layout when it
    names one, else float32 as transpose_scale and ld_align say."""
    layout = None
    if scale_layout is not None:
        layout = _exponent_layout(op, scale_layout, transpose_scale, ld_align, scale_ue8m0)
        if layout is not None:
            _check_exponent_producer(op, layout, x, group_size, fp8_dtype)
    return _scale(op, x, m, cols, group_size, transpose_scale, ld_align, fp8_dtype, layout)


def _scale(op, x, m, cols, group_size, transpose_scale, ld_align, fp8_dtype, layout=None):
    """Checks what allocating a producer's outputs needs, and allocates the
    scale (m, cols // group_size) on x's device (layout: an exponent layout's
    tensor)."""
    if fp8_dtype not in _ops._FP8_DTYPES:
        _ops.fail(op, "fp8_dtype", f"= {fp8_dtype!r}: expected torch.float8_e4m3fn or torch.float8_e4m3fnuz",
                  TypeError)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size not in _ops._GROUP_SIZES:
        _ops.fail(op, "group_size", f"= {group_size!r}: supported group sizes are 32, 64, 128")
    if cols % group_size != 0:
        _ops.fail(op, "x", f"has {cols} columns, not a multiple of group_size = {group_size}")
    if not _ops.AVAILABLE:
        _ops.require_ops()  # before allocating: without the op library nothing can run
    if layout == "packed_ue8m0":
        return _layout.new_packed_ue8m0(m, cols // group_size, x.device)
    if layout == "swizzled_128x4":
        return _layout.new_swizzled_128x4(m, cols // group_size, x.device)
    return _layout.new_scale(m, cols // group_size, transpose_scale, ld_align, x.device)


# Sizes go to torch.empty as separate arguments (torch.empty(m, k, ...)): a
# size tuple or torch.Size costs its argument parser about 1 us more per call.
# Trailing arguments go to the op only where they differ from its schema's
# defaults: each argument handed to an op costs the dispatcher's parsing.


def group_quant(
    x: torch.Tensor,
    group_size: int = 128,
    *,
    transpose_scale: bool = False,
    ld_align: int = 1,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    scale_ue8m0: bool = False,
    fmax: Optional[float] = None,
    eps: float = _EPS,
    enable_pdl: bool = False,
    scale_layout: Optional[str] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-group fp8 quantization of activations.

    Args:
        x: (M, K) with stride(1) == 1 (any row stride), or (M, H, D) with
            stride(2) == 1 and any token and head strides (K = H * D; a group
            never straddles two heads). bfloat16, float16 or float32, CUDA.
        group_size: columns per scale: 32, 64 or 128.
        transpose_scale: write the scales column-major (see the module doc).
        ld_align: column-major ld = align(M, ld_align): 1 for aiter's
            bpreshuffle GEMM, 4 for cuBLASLt VEC128 and DeepGEMM
            (consumer_scale_ld gives the consumer's).
        fp8_dtype: torch.float8_e4m3fn (max 448) or torch.float8_e4m3fnuz (max 240).
        scale_ue8m0: round each scale up to a power of two (UE8M0 values,
            stored as float32).
        fmax: largest magnitude after scaling (None: the format's max; 224
            is allowed on e4m3fnuz).
        eps: floor on a group's amax.
        enable_pdl: programmatic dependent launch (sm_90+).
        scale_layout: None or "row_major" / "column_major" (as
            transpose_scale says), or an exponent layout of the SM100
            consumers, written by the producer itself (no relayout):
            "packed_ue8m0", DeepGEMM's packed UE8M0 scales for its SM100
            GEMMs: int32 (M, ceil(G / 4)) with strides (1, align(M, 4)), byte
            g % 4 of word (g / 4) * ld + m the exponent of s(m, g);
            "swizzled_128x4", the MXFP8 scales of cuBLASLt's VEC32_UE8M0 mode
            and F.scaled_mm's SwizzleType.SWIZZLE_32_4_4: 1-D
            torch.float8_e8m0fnu of align(M, 128) * align(G, 4) bytes in tiles
            of 128 rows x 4 groups (row m, group g of a tile at byte
            (m % 32) * 16 + (m // 32) * 4 + g). Every padding byte 0. Both take
            bfloat16 x, float8_e4m3fn, scale_ue8m0=True and groups of 32 or
            128; transpose_scale and ld_align do not apply.

    Returns:
        q: fp8, x's shape, contiguous. scale: (M, K // group_size) float32,
        s = max(amax, eps) / fmax (fp32 rule, IEEE division), q = round(x / s);
        or the exponent layout's tensor (scale_layout).

    Raises:
        TypeError: a non-tensor or a wrong dtype. ValueError: wrong device,
        shapes, group size, fmax, eps or scale layout, naming the argument.
        RuntimeError: what only the kernel's launcher checks (alignment of
        x), naming it.
    """
    op = "group_quant"
    _check_x(op, x, (2, 3))
    k = x.shape[1] if x.dim() == 2 else x.shape[1] * x.shape[2]
    scale = _producer_scale(op, x, x.shape[0], k, group_size, transpose_scale, ld_align, fp8_dtype, scale_ue8m0,
                            scale_layout)
    if x.dim() == 2:
        q = torch.empty(x.shape[0], k, dtype=fp8_dtype, device=x.device)
    else:
        q = torch.empty(x.shape[0], x.shape[1], x.shape[2], dtype=fp8_dtype, device=x.device)
    op_scale = _ops.op_scale(scale)  # swizzled bytes go to the op as uint8
    if scale_ue8m0 or fmax is not None or eps != _EPS or enable_pdl:
        _ops.GROUP_QUANT(x, q, op_scale, group_size, scale_ue8m0, 0.0 if fmax is None else fmax, eps, enable_pdl)
    elif group_size != 128:
        _ops.GROUP_QUANT(x, q, op_scale, group_size)
    else:
        _ops.GROUP_QUANT(x, q, op_scale)
    return q, scale


def silu_clamp_quant(
    x: torch.Tensor,
    limit: float = 0.0,
    group_size: int = 128,
    *,
    transpose_scale: bool = False,
    ld_align: int = 1,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    scale_ue8m0: bool = False,
    fmax: Optional[float] = None,
    eps: float = _EPS,
    enable_pdl: bool = False,
    scale_layout: Optional[str] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """fp8 quantization of silu(min(gate, limit)) * clamp(up, -limit, limit).

    Args:
        x: (M, 2 I) with stride(1) == 1: gate in columns [0, I), up in
            [I, 2 I) (the gate_up projection's output). bf16 / fp16 / fp32.
        limit: the swiglu limit; <= 0 disables the clamp.
        The rest as group_quant.

    Returns:
        q: (M, I) fp8; scale: (M, I // group_size) float32, laid out as in
        group_quant, or the exponent layout's tensor (scale_layout).
    """
    op = "silu_clamp_quant"
    _check_x(op, x, (2,))
    m, two_i = x.shape
    if two_i % 2 != 0:
        _ops.fail(op, "x", f"has an odd number of columns {two_i} (gate | up)")
    scale = _producer_scale(op, x, m, two_i // 2, group_size, transpose_scale, ld_align, fp8_dtype, scale_ue8m0,
                            scale_layout)
    q = torch.empty(m, two_i // 2, dtype=fp8_dtype, device=x.device)
    op_scale = _ops.op_scale(scale)  # swizzled bytes go to the op as uint8
    if scale_ue8m0 or fmax is not None or eps != _EPS or enable_pdl:
        _ops.SILU_CLAMP_QUANT(x, q, op_scale, limit, group_size, scale_ue8m0, 0.0 if fmax is None else fmax, eps,
                              enable_pdl)
    elif group_size != 128:
        _ops.SILU_CLAMP_QUANT(x, q, op_scale, limit, group_size)
    else:
        _ops.SILU_CLAMP_QUANT(x, q, op_scale, limit)
    return q, scale


def rmsnorm_quant(
    x: torch.Tensor,
    weight: torch.Tensor,
    norm_eps: float = 1e-6,
    group_size: int = 128,
    *,
    residual: Optional[torch.Tensor] = None,
    return_norm_out: bool = False,
    transpose_scale: bool = False,
    ld_align: int = 1,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    scale_ue8m0: bool = False,
    fmax: Optional[float] = None,
    eps: float = _EPS,
    enable_pdl: bool = False,
    scale_layout: Optional[str] = None,
):
    """RMSNorm, then fp8 group quantization of its output.

    Args:
        x: (M, K) with stride(1) == 1, bf16 / fp16 / fp32, K <= 4096 vectors
            of 16 bytes. weight: (K,) of x's dtype, contiguous.
        norm_eps: the RMSNorm epsilon.
        residual: optional (M, K) of x's dtype, updated in place to
            x + residual (rounded to the dtype); the norm then reads it.
        return_norm_out: also return the normalized values in x's dtype.
        The rest as group_quant.

    Returns:
        (q, scale), or (q, scale, norm_out) with return_norm_out.
    """
    op = "rmsnorm_quant"
    _check_x(op, x, (2,))
    if not isinstance(weight, torch.Tensor) or weight.dtype != x.dtype or (
            residual is not None and (not isinstance(residual, torch.Tensor) or residual.dtype != x.dtype)):
        _check_like_x(op, x, (("weight", weight), ("residual", residual)))
    m, k = x.shape
    scale = _producer_scale(op, x, m, k, group_size, transpose_scale, ld_align, fp8_dtype, scale_ue8m0, scale_layout)
    q = torch.empty(m, k, dtype=fp8_dtype, device=x.device)
    norm_out = torch.empty(m, k, dtype=x.dtype, device=x.device) if return_norm_out else None
    op_scale = _ops.op_scale(scale)  # swizzled bytes go to the op as uint8
    if scale_ue8m0 or fmax is not None or eps != _EPS or enable_pdl:
        _ops.RMSNORM_QUANT(x, weight, q, op_scale, residual, norm_out, norm_eps, group_size, scale_ue8m0,
                           0.0 if fmax is None else fmax, eps, enable_pdl)
    elif norm_out is not None or norm_eps != _NORM_EPS or group_size != 128:
        _ops.RMSNORM_QUANT(x, weight, q, op_scale, residual, norm_out, norm_eps, group_size)
    elif residual is not None:
        _ops.RMSNORM_QUANT(x, weight, q, op_scale, residual)
    else:
        _ops.RMSNORM_QUANT(x, weight, q, op_scale)
    return (q, scale, norm_out) if return_norm_out else (q, scale)


def materialize(scale: torch.Tensor, ld_align: int = 1, *, layout: str = "column_major") -> torch.Tensor:
    """The scales in the consumer's layout.

    layout="column_major" (the default): column-major (1, ld), ld =
    align(M, ld_align). Returns `scale` itself where it already addresses
    those bytes with no padding slot to fill: column-major with that ld, and a
    row-major scale of one row when ld == 1 (M == 1, ld_align == 1).
    Otherwise a new (M, G) view with strides (1, ld) over a [G, ld] buffer,
    padding slots 0.

    layout="packed_ue8m0": DeepGEMM's packed UE8M0 scales (its SM100 GEMMs;
    get_mn_major_tma_aligned_packed_ue8m0_tensor): an int32 tensor
    (M, ceil(G / 4)) with strides (1, align(M, 4)) whose word (g / 4) * ld + m
    holds in byte g % 4 the biased exponent of s(m, g), every other byte 0.

    layout="swizzled_128x4": the MXFP8 scales of cuBLASLt's VEC32_UE8M0
    mode and F.scaled_mm's SwizzleType.SWIZZLE_32_4_4: a 1-D
    torch.float8_e8m0fnu tensor of align(M, 128) * align(G, 4) bytes in
    tiles of 128 rows x 4 groups, padding bytes 0 (group_quant's
    scale_layout says where each exponent goes).

    The exponent layouts need UE8M0-rule scales (scale_ue8m0=True: powers of
    two); ld_align does not apply to them.

    Layout names are accepted in any case. Raises TypeError / ValueError
    naming the argument.
    """
    op = "materialize"
    _ops.check_tensor(op, "scale", scale, (torch.float32,), (2,))
    if layout != "column_major":
        name = layout.lower() if isinstance(layout, str) else None
        if name in _EXPONENT_LAYOUTS:
            m, g = scale.shape
            packed = name == "packed_ue8m0"
            out = _layout.new_packed_ue8m0(m, g, scale.device) if packed else _layout.new_swizzled_128x4(
                m, g, scale.device)
            if not _ops.AVAILABLE:
                _ops.require_ops()
            (_ops.MATERIALIZE_PACKED_UE8M0 if packed else _ops.MATERIALIZE_SWIZZLED_128X4)(scale, _ops.op_scale(out))
            return out
        if name != "column_major":
            _ops.fail(op, "layout",
                      f"= {layout!r}: expected 'column_major', 'packed_ue8m0' or 'swizzled_128x4'")
    m, g = scale.shape
    ld = align_up(m, ld_align)
    if same_bytes_as_column_major(scale, ld):
        return scale
    out = _layout.new_scale(m, g, True, ld_align, scale.device)
    if not _ops.AVAILABLE:
        _ops.require_ops()
    _ops.MATERIALIZE(scale, out)
    return out
