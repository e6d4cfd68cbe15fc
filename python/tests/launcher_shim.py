"""ctypes over libfp8scale_launcher_shim.so (launcher_shim.cu): the C++
launchers called with raw pointers, no torch op in between. The tests hold the
ops' bytes to these calls; benchmarks/bench_ops.py times both.

FP8SCALE_LAUNCHER_SHIM names the library (the test build sets it)."""

from __future__ import annotations

import ctypes
import os
from typing import Callable, Optional

import torch

import fp8scale

_i64, _i32, _f32, _vp = ctypes.c_int64, ctypes.c_int32, ctypes.c_float, ctypes.c_void_p


class Outputs(ctypes.Structure):
    _fields_ = [("q", _vp), ("ldq", _i64), ("e4m3fnuz", _i32), ("col_major", _i32), ("scale", _vp), ("ld", _i64)]


class Options(ctypes.Structure):
    _fields_ = [("group_size", _i32), ("ue8m0", _i32), ("fmax", _f32), ("eps", _f32), ("enable_pdl", _i32)]


_TAIL = [ctypes.POINTER(Outputs), ctypes.POINTER(Options), _vp, ctypes.c_char_p, _i64]
_SIGNATURES = {
    "fp8scale_shim_group_quant": [_vp, _i64, _i64, _i64] + _TAIL,
    "fp8scale_shim_silu_clamp_quant": [_vp, _i64, _i64, _i64, _f32] + _TAIL,
    "fp8scale_shim_rmsnorm_quant": [_vp, _i64, _i64, _i64, _vp, _f32, _vp, _i64, _vp, _i64] + _TAIL,
}

PATH = os.environ.get("FP8SCALE_LAUNCHER_SHIM", "")
LOAD_ERROR = "" if PATH and os.path.isfile(PATH) else "FP8SCALE_LAUNCHER_SHIM does not name the built shim library"


def _lib():
    lib = ctypes.CDLL(PATH)
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return lib


_LIB = None if LOAD_ERROR else _lib()


def _row_stride(t: torch.Tensor) -> int:
    return t.shape[1] if t.shape[0] <= 1 else t.stride(0)


def _first_element(t: torch.Tensor) -> int:
    """The address of t's first element, also where t has no elements (a
    column-major scale at M == 0 still owns its padding slots)."""
    return t.untyped_storage().data_ptr() + t.storage_offset() * t.element_size()


def outputs(q: torch.Tensor, scale: torch.Tensor) -> Outputs:
    layout, ld = fp8scale.scale_layout(scale)
    return Outputs(_first_element(q), _row_stride(q), int(q.dtype == torch.float8_e4m3fnuz),
                   int(layout == "column_major"), _first_element(scale), ld)


def options(group_size=128, ue8m0=False, fmax=0.0, eps=1e-10, enable_pdl=False) -> Options:
    return Options(group_size, int(ue8m0), fmax, eps, int(enable_pdl))


def _stream() -> int:
    """torch's current CUDA stream; 0 (the legacy default stream) without a GPU."""
    return torch.cuda.current_stream().cuda_stream if torch.cuda.is_available() else 0


def bind(name: str, *args) -> Callable[[], None]:
    """A call of shim function `name` with its arguments converted once: what
    remains per call is ctypes' own cost. Raises RuntimeError on a refusal."""
    fn = getattr(_LIB, name)
    err = ctypes.create_string_buffer(512)
    full = [*args, _stream(), err, len(err)]

    def call() -> None:
        code = fn(*full)
        if code != 0:
            raise RuntimeError(f"{name}: status {code}: {err.value.decode()}")

    return call


def group_quant(x, q, scale, **opt) -> Callable[[], None]:
    o, s = outputs(q, scale), options(**opt)
    return bind("fp8scale_shim_group_quant", x.data_ptr(), x.shape[0], x.shape[1], _row_stride(x),
                ctypes.byref(o), ctypes.byref(s))


def silu_clamp_quant(x, q, scale, limit, **opt) -> Callable[[], None]:
    o, s = outputs(q, scale), options(**opt)
    return bind("fp8scale_shim_silu_clamp_quant", x.data_ptr(), x.shape[0], x.shape[1] // 2, _row_stride(x), limit,
                ctypes.byref(o), ctypes.byref(s))


def rmsnorm_quant(x, weight, q, scale, norm_eps, residual: Optional[torch.Tensor] = None,
                  norm_out: Optional[torch.Tensor] = None, **opt) -> Callable[[], None]:
    o, s = outputs(q, scale), options(**opt)
    res = (residual.data_ptr(), _row_stride(residual)) if residual is not None else (None, 0)
    nrm = (norm_out.data_ptr(), _row_stride(norm_out)) if norm_out is not None else (None, 0)
    return bind("fp8scale_shim_rmsnorm_quant", x.data_ptr(), x.shape[0], x.shape[1], _row_stride(x),
                weight.data_ptr(), norm_eps, *res, *nrm, ctypes.byref(o), ctypes.byref(s))
