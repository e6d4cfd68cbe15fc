"""The fp8scale ops: loading the op library and their fake implementations.

The C++ library (libfp8scale_ops.so, built against the libtorch stable ABI)
defines the schemas and the CUDA kernels under the ``fp8scale`` namespace:

  group_quant(x, q!, scale!, group_size=128, scale_ue8m0=False, fmax=0.0, eps=1e-10, enable_pdl=False)
  silu_clamp_quant(x, q!, scale!, limit=0.0, group_size=128, ...)
  rmsnorm_quant(x, weight, q!, scale!, residual!?=None, norm_out!?=None, norm_eps=1e-6, group_size=128, ...)
  materialize(src, dst!)
  materialize_packed_ue8m0(src, dst!)
  materialize_swizzled_128x4(src, dst!)

Each writes its ``!`` arguments (caller-allocated) and returns nothing. The
fake implementations here check what the shapes and dtypes decide, so that
torch.compile and meta tensors see the same refusals as the CUDA kernels.

The 128 x 4 swizzled UE8M0 scales reach the ops as their bytes, a
torch.uint8 tensor: the stable ABI of torch 2.10, which the op library
targets, cannot pass float8_e8m0fnu. The Python functions hand out
float8_e8m0fnu tensors (what torch's scaled_mm takes) and pass
``scale.view(torch.uint8)`` to the ops (op_scale).
"""

from __future__ import annotations

import math
import os
import struct
from pathlib import Path

import torch

from . import _layout

_INPUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
_FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 240.0}
_GROUP_SIZES = (32, 64, 128)
# The group sizes of the exponent layouts, packed UE8M0 and swizzled 128 x 4
# (groups of 128 for DeepGEMM's SM100 GEMMs, 32 for MXFP8): the library's
# isExponentLayoutGroupSize.
PACKED_GROUP_SIZES = (32, 128)


def _library_path() -> Path:
    """FP8SCALE_OPS_LIBRARY if set (a build tree), else the library beside this file."""
    env = os.environ.get("FP8SCALE_OPS_LIBRARY")
    return Path(env) if env else Path(__file__).with_name("libfp8scale_ops.so")


def _load() -> str:
    path = _library_path()
    if not path.is_file():
        return f"the op library {path} is missing (build the package with pip, or set FP8SCALE_OPS_LIBRARY)"
    torch.ops.load_library(str(path))
    return ""


LOAD_ERROR = _load()
AVAILABLE = not LOAD_ERROR


# The ops' default overloads, resolved once: a call through the packet
# (torch.ops.fp8scale.group_quant) looks the overload up on every call.
GROUP_QUANT = torch.ops.fp8scale.group_quant.default if AVAILABLE else None
SILU_CLAMP_QUANT = torch.ops.fp8scale.silu_clamp_quant.default if AVAILABLE else None
RMSNORM_QUANT = torch.ops.fp8scale.rmsnorm_quant.default if AVAILABLE else None
MATERIALIZE = torch.ops.fp8scale.materialize.default if AVAILABLE else None
MATERIALIZE_PACKED_UE8M0 = torch.ops.fp8scale.materialize_packed_ue8m0.default if AVAILABLE else None
MATERIALIZE_SWIZZLED_128X4 = torch.ops.fp8scale.materialize_swizzled_128x4.default if AVAILABLE else None


def require_ops() -> None:
    if not AVAILABLE:
        raise RuntimeError(f"fp8scale: {LOAD_ERROR}")


# --- argument checks shared by the fakes and the Python API ----------------------


def fail(op: str, argument: str, what: str, kind=ValueError):
    raise kind(f"fp8scale.{op}: argument '{argument}' {what}")


def check_tensor(op: str, name: str, t, dtypes=None, dims=None) -> None:
    if not isinstance(t, torch.Tensor):
        fail(op, name, f"must be a torch.Tensor, got {type(t).__name__}", TypeError)
    if dtypes is not None and t.dtype not in dtypes:
        fail(op, name, f"has dtype {t.dtype}, expected {' or '.join(str(d) for d in dtypes)}", TypeError)
    if dims is not None and t.dim() not in dims:
        fail(op, name, f"must be {' or '.join(f'{d}-D' for d in dims)}, got shape {tuple(t.shape)}")


def check_device(op: str, tensors) -> None:
    """Every tensor a CUDA (or meta) tensor on one device."""
    first = None
    for name, t in tensors:
        if t is None:
            continue
        check_tensor(op, name, t)  # a non-tensor is a TypeError naming it, before its device is read
        if t.device.type not in ("cuda", "meta"):
            hint = "" if torch.cuda.is_available() else (
                " (torch sees no GPU here; meta tensors give the ops' shapes and layouts without one, "
                "and the host references are in include/fp8scale/reference)")
            fail(op, name, f"is on {t.device}: fp8scale ops run on CUDA tensors{hint}")
        if first is None:
            first = (name, t.device)
        elif t.device != first[1]:
            fail(op, name, f"is on {t.device}, '{first[0]}' on {first[1]} (all tensors of one call share a device)")


_FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def _float32(v: float) -> float:
    """v rounded to the nearest fp32 (inf past its range), as a C++ float parameter receives it."""
    try:
        return struct.unpack("f", struct.pack("f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def check_options(op: str, group_size, fp8_dtype, fmax, eps) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size not in _GROUP_SIZES:
        fail(op, "group_size", f"= {group_size!r}: supported group sizes are 32, 64, 128")
    top = _FP8_MAX[fp8_dtype]
    if not (fmax == 0.0 or 0.0 < fmax <= top):
        fail(op, "fmax", f"= {fmax!r}: must be in (0, {top:g}] for {fp8_dtype} (0: the format's max)")
    # As the C++ checks, in fp32 (the ops take eps and fmax as C++ floats):
    # eps > 0, and the smallest scale eps / fmax a normal, finite fp32, or
    # 1 / scale of an all-zero group could overflow to inf.
    eps32 = _float32(eps)
    if not eps32 > 0.0:
        fail(op, "eps", f"= {eps!r}: must be > 0")
    smallest = _float32(eps32 / _float32(fmax or top))  # double division, then rounded: the fp32 quotient
    if not smallest >= 2.0 ** -126:
        fail(op, "eps", f"= {eps!r}: eps / fmax must be at least 2^-126 (the smallest normal fp32 scale)")
    if not smallest <= _FLOAT32_MAX:
        fail(op, "eps", f"= {eps!r}: eps / fmax must be a finite fp32 number")


def groups_of(op: str, cols: int, group_size: int, what: str = "x") -> int:
    if cols % group_size != 0:
        fail(op, what, f"has {cols} columns, not a multiple of group_size = {group_size}")
    return cols // group_size


def check_shape(op: str, name: str, t: torch.Tensor, shape) -> None:
    if tuple(t.shape) != tuple(shape):
        fail(op, name, f"has shape {tuple(t.shape)}, expected {tuple(shape)}")


def check_scale(op: str, scale: torch.Tensor, m: int, g: int) -> None:
    check_tensor(op, "scale", scale, (torch.float32,), (2,))
    check_shape(op, "scale", scale, (m, g))
    try:
        _layout.scale_layout(scale)
    except ValueError as e:
        raise ValueError(str(e).replace("fp8scale:", f"fp8scale.{op}:", 1)) from None


def check_packed_ue8m0(op: str, name: str, t: torch.Tensor, m: int, g: int) -> None:
    """DeepGEMM's packed UE8M0 words of (m, g) exponents: int32 (m, ceil(g / 4))
    with strides (1, ld), ld >= align(m, 4) and a multiple of 4 (the C++
    packedUe8m0Arg)."""
    check_tensor(op, name, t, (torch.int32,), (2,))
    check_shape(op, name, t, (m, (g + 3) // 4))
    ld = 0 if m == 0 and t.stride(1) % 4 != 0 else t.stride(1)  # as the C++ op reads an empty tensor
    if (m > 1 and t.stride(0) != 1) or ld < (m + 3) // 4 * 4 or ld % 4 != 0:
        fail(op, name, f"has strides {tuple(t.stride())}: expected (1, ld) with ld >= align(M, 4) and a "
                       "multiple of 4")


def check_swizzled_128x4(op: str, name: str, t: torch.Tensor, m: int, g: int) -> None:
    """The 128 x 4 swizzled UE8M0 bytes of (m, g) exponents as the ops take
    them: a contiguous 1-D torch.uint8 tensor of align(m, 128) * align(g, 4)
    bytes (the C++ swizzled128x4Arg)."""
    if isinstance(t, torch.Tensor) and t.dtype == torch.float8_e8m0fnu:
        fail(op, name, "has dtype torch.float8_e8m0fnu, which the stable ABI of torch 2.10 cannot pass: the ops "
                       "take swizzled UE8M0 scales as their bytes, scale.view(torch.uint8)", TypeError)
    check_tensor(op, name, t, (torch.uint8,), (1,))
    check_shape(op, name, t, (_layout.swizzled_128x4_bytes(m, g),))
    if t.shape[0] > 1 and t.stride(0) != 1:
        fail(op, name, f"must be contiguous, got strides {tuple(t.stride())}")


def is_exponent_layout(scale) -> bool:
    """Whether a producer op's scale is in an exponent layout: the packed
    UE8M0 words (int32) or the swizzled 128 x 4 bytes (uint8; a
    float8_e8m0fnu tensor is refused by check_swizzled_128x4)."""
    return isinstance(scale, torch.Tensor) and scale.dtype in (torch.int32, torch.uint8, torch.float8_e8m0fnu)


def op_scale(scale: torch.Tensor) -> torch.Tensor:
    """A scale tensor as the ops take it: the swizzled float8_e8m0fnu bytes
    viewed as torch.uint8, any other tensor as it is."""
    return scale.view(torch.uint8) if scale.dtype == torch.float8_e8m0fnu else scale


def check_producer_scale(op: str, scale, m: int, g: int, group_size, scale_ue8m0) -> None:
    """A producer op's scale: float32 (M, G) in a layout of scale_layout(), or
    an exponent layout with scale_ue8m0 and groups of 32 or 128 (the C++
    withExponentScale; x and q dtypes are the caller's check)."""
    if not is_exponent_layout(scale):
        check_scale(op, scale, m, g)
        return
    if scale.dtype == torch.int32:
        check_packed_ue8m0(op, "scale", scale, m, g)
        what = "packed UE8M0 scales (int32)"
    else:
        check_swizzled_128x4(op, "scale", scale, m, g)
        what = "swizzled UE8M0 scales"
    if not scale_ue8m0:
        fail(op, "scale_ue8m0", f"must be True: {what} hold UE8M0 exponents")
    if group_size not in PACKED_GROUP_SIZES:
        fail(op, "group_size", f"= {group_size}: {what} take groups of 32 or 128")


def check_group_quant(x, q, scale, group_size, fmax, eps, scale_ue8m0=False) -> None:
    op = "group_quant"
    exponents = is_exponent_layout(scale)
    check_tensor(op, "x", x, (torch.bfloat16,) if exponents else _INPUT_DTYPES, (2, 3))
    check_tensor(op, "q", q, (torch.float8_e4m3fn,) if exponents else _FP8_DTYPES, (2, 3))
    check_device(op, (("x", x), ("q", q), ("scale", scale)))
    check_options(op, group_size, q.dtype, fmax, eps)
    if x.dim() == 3 and x.shape[2] % group_size != 0:
        fail(op, "x", f"has head dim {x.shape[2]}, not a multiple of group_size = {group_size} "
                      "(a group may not straddle two heads)")
    m = x.shape[0]
    k = x.shape[1] if x.dim() == 2 else x.shape[1] * x.shape[2]
    g = groups_of(op, k, group_size)
    if x.dim() == 3 and q.dim() == 3:
        check_shape(op, "q", q, x.shape)
    else:
        check_shape(op, "q", q, (m, k))
    check_producer_scale(op, scale, m, g, group_size, scale_ue8m0)


def check_silu_clamp_quant(x, q, scale, group_size, fmax, eps, limit=0.0, scale_ue8m0=False) -> None:
    op = "silu_clamp_quant"
    exponents = is_exponent_layout(scale)
    check_tensor(op, "x", x, (torch.bfloat16,) if exponents else _INPUT_DTYPES, (2,))
    check_tensor(op, "q", q, (torch.float8_e4m3fn,) if exponents else _FP8_DTYPES, (2,))
    check_device(op, (("x", x), ("q", q), ("scale", scale)))
    check_options(op, group_size, q.dtype, fmax, eps)
    if limit != limit:
        fail(op, "limit", "is NaN (<= 0 disables the clamp)")
    m, two_i = x.shape
    if two_i % 2 != 0:
        fail(op, "x", f"has an odd number of columns {two_i} (gate | up)")
    g = groups_of(op, two_i // 2, group_size)
    check_shape(op, "q", q, (m, two_i // 2))
    check_producer_scale(op, scale, m, g, group_size, scale_ue8m0)


def check_rmsnorm_quant(x, weight, q, scale, residual, norm_out, norm_eps, group_size, fmax, eps,
                        scale_ue8m0=False) -> None:
    op = "rmsnorm_quant"
    exponents = is_exponent_layout(scale)
    check_tensor(op, "x", x, (torch.bfloat16,) if exponents else _INPUT_DTYPES, (2,))
    check_tensor(op, "weight", weight, (x.dtype,), (1,))
    check_tensor(op, "q", q, (torch.float8_e4m3fn,) if exponents else _FP8_DTYPES, (2,))
    for name, t in (("residual", residual), ("norm_out", norm_out)):
        if t is not None:
            check_tensor(op, name, t, (x.dtype,), (2,))
            check_shape(op, name, t, x.shape)
    check_device(op, (("x", x), ("weight", weight), ("q", q), ("scale", scale), ("residual", residual),
                      ("norm_out", norm_out)))
    check_options(op, group_size, q.dtype, fmax, eps)
    if not norm_eps >= 0.0:
        fail(op, "norm_eps", f"= {norm_eps!r}: must be >= 0")
    m, k = x.shape
    max_cols = 512 * 8 * (16 // x.element_size())  # one block of 512 threads x 8 vectors (RmsNormPolicy::kMaxCols)
    if k > max_cols:
        fail(op, "x", f"has {k} columns, more than the {max_cols} one row block holds for {x.dtype}")
    g = groups_of(op, k, group_size)
    check_shape(op, "weight", weight, (k,))
    check_shape(op, "q", q, (m, k))
    check_producer_scale(op, scale, m, g, group_size, scale_ue8m0)


def check_materialize(src, dst) -> None:
    op = "materialize"
    check_tensor(op, "src", src, (torch.float32,), (2,))
    check_tensor(op, "dst", dst, (torch.float32,), (2,))
    check_device(op, (("src", src), ("dst", dst)))
    check_shape(op, "dst", dst, src.shape)
    _layout.scale_layout(src)
    m = src.shape[0]
    if not (dst.stride(0) == 1 and dst.stride(1) >= m):
        fail(op, "dst", f"has strides {tuple(dst.stride())}: expected column-major (1, ld) with ld >= M")


def check_materialize_exponents(op, src, dst, check_dst) -> None:
    """materialize_packed_ue8m0 / materialize_swizzled_128x4: float32 (M, G)
    src; dst checked (dtype, shape, strides) by check_dst(op, "dst", dst, M, G)."""
    check_tensor(op, "src", src, (torch.float32,), (2,))
    check_tensor(op, "dst", dst)
    check_device(op, (("src", src), ("dst", dst)))
    _layout.scale_layout(src)
    check_dst(op, "dst", dst, *src.shape)


# --- fake implementations -----------------------------------------------------------

if AVAILABLE:

    @torch.library.register_fake("fp8scale::group_quant")
    def _group_quant_fake(x, q, scale, group_size=128, scale_ue8m0=False, fmax=0.0, eps=1e-10, enable_pdl=False):
        check_group_quant(x, q, scale, group_size, fmax, eps, scale_ue8m0)

    @torch.library.register_fake("fp8scale::silu_clamp_quant")
    def _silu_clamp_quant_fake(x, q, scale, limit=0.0, group_size=128, scale_ue8m0=False, fmax=0.0, eps=1e-10,
                               enable_pdl=False):
        check_silu_clamp_quant(x, q, scale, group_size, fmax, eps, limit, scale_ue8m0)

    @torch.library.register_fake("fp8scale::rmsnorm_quant")
    def _rmsnorm_quant_fake(x, weight, q, scale, residual=None, norm_out=None, norm_eps=1e-6, group_size=128,
                            scale_ue8m0=False, fmax=0.0, eps=1e-10, enable_pdl=False):
        check_rmsnorm_quant(x, weight, q, scale, residual, norm_out, norm_eps, group_size, fmax, eps, scale_ue8m0)

    @torch.library.register_fake("fp8scale::materialize")
    def _materialize_fake(src, dst):
        check_materialize(src, dst)

    @torch.library.register_fake("fp8scale::materialize_packed_ue8m0")
    def _materialize_packed_ue8m0_fake(src, dst):
        check_materialize_exponents("materialize_packed_ue8m0", src, dst, check_packed_ue8m0)

    @torch.library.register_fake("fp8scale::materialize_swizzled_128x4")
    def _materialize_swizzled_128x4_fake(src, dst):
        check_materialize_exponents("materialize_swizzled_128x4", src, dst, check_swizzled_128x4)

    # CPU tensors: the same checks, which refuse them by name (the dispatcher's
    # own message would not say which argument).
    for _name, _fake in (("group_quant", _group_quant_fake), ("silu_clamp_quant", _silu_clamp_quant_fake),
                         ("rmsnorm_quant", _rmsnorm_quant_fake), ("materialize", _materialize_fake),
                         ("materialize_packed_ue8m0", _materialize_packed_ue8m0_fake),
                         ("materialize_swizzled_128x4", _materialize_swizzled_128x4_fake)):
        torch.library.impl(f"fp8scale::{_name}", "CPU")(_fake)
