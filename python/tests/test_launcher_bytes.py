"""The torch ops write the bytes the C++ launchers write on the same input:
fp8 codes, the whole scale buffer (padding slots included) and, for RMSNorm,
the updated residual and the normalized output. bfloat16 input (what the
shim instantiates); the other input dtypes are held to the transposed-emission
and torch-reference tests of test_gpu.py."""

import ctypes
import itertools

import pytest
import torch

import launcher_shim as shim
from conftest import needs_cuda, needs_ops
from test_gpu import MS, activations

pytestmark = pytest.mark.skipif(bool(shim.LOAD_ERROR), reason=f"launcher shim: {shim.LOAD_ERROR}")

GARBAGE = float("nan")
LAYOUTS = ("row_major", "col_major_ld_m", "col_major_ld_align4")


def scale_buffer(m, g, layout):
    """A garbage-filled buffer and the (m, g) scale tensor over it."""
    if layout == "row_major":
        buf = torch.full((m, g), GARBAGE, dtype=torch.float32, device="cuda")
        return buf, buf
    ld = m if layout == "col_major_ld_m" else (m + 3) // 4 * 4
    buf = torch.full((g, ld), GARBAGE, dtype=torch.float32, device="cuda")
    return buf, buf.t()[:m]


def assert_same_bits(a: torch.Tensor, b: torch.Tensor, what: str):
    ia = a.contiguous().view(torch.uint8)
    ib = b.contiguous().view(torch.uint8)
    diff = (ia != ib).nonzero()
    assert diff.numel() == 0, f"{what}: {diff.shape[0]} bytes differ, first at {diff[0].tolist()}"


def run_both(producer, m, k, fp8, ue8m0, group_size, layout, enable_pdl=False):
    """(op results, launcher results): each a list of named tensors."""
    seed = hash((producer, m, k, group_size)) % 1000
    opt = dict(group_size=group_size, ue8m0=ue8m0, fmax=0.0, eps=1e-10, enable_pdl=enable_pdl)
    cols = k
    g = cols // group_size
    results = []
    x = activations(m, 2 * k if producer == "silu_clamp_quant" else k, torch.bfloat16, seed)
    w = (torch.rand(k, device="cuda") + 0.5).to(torch.bfloat16)
    r0 = activations(m, k, torch.bfloat16, seed + 1)
    for via_op in (True, False):
        q = torch.full((m, cols), 0x7F, dtype=torch.uint8, device="cuda").view(fp8)
        buf, scale = scale_buffer(m, g, layout)
        named = [("q", q), ("scale buffer", buf)]
        if producer == "group_quant":
            if via_op:
                torch.ops.fp8scale.group_quant(x, q, scale, group_size, ue8m0, 0.0, 1e-10, enable_pdl)
            else:
                shim.group_quant(x, q, scale, **opt)()
        elif producer == "silu_clamp_quant":
            if via_op:
                torch.ops.fp8scale.silu_clamp_quant(x, q, scale, 7.0, group_size, ue8m0, 0.0, 1e-10, enable_pdl)
            else:
                shim.silu_clamp_quant(x, q, scale, 7.0, **opt)()
        else:
            residual = r0.clone()
            norm_out = torch.full_like(x, GARBAGE)
            named += [("residual", residual), ("norm_out", norm_out)]
            if via_op:
                torch.ops.fp8scale.rmsnorm_quant(x, w, q, scale, residual, norm_out, 1e-6, group_size, ue8m0, 0.0,
                                                 1e-10, enable_pdl)
            else:
                shim.rmsnorm_quant(x, w, q, scale, 1e-6, residual, norm_out, **opt)()
        results.append(named)
    torch.cuda.synchronize()
    return results


def cases():
    for producer, fp8, ue8m0, m, layout in itertools.product(
            ("group_quant", "silu_clamp_quant", "rmsnorm_quant"), (torch.float8_e4m3fn, torch.float8_e4m3fnuz),
            (False, True), MS, LAYOUTS):
        for k in ((256, 2048) if producer == "silu_clamp_quant" else (512, 7168)):
            yield producer, fp8, ue8m0, m, k, layout


@needs_ops
@needs_cuda
@pytest.mark.parametrize("producer, fp8, ue8m0, m, k, layout", list(cases()))
def test_op_bytes_equal_launcher_bytes(producer, fp8, ue8m0, m, k, layout):
    ops, launcher = run_both(producer, m, k, fp8, ue8m0, 128, layout)
    for (name, a), (_, b) in zip(ops, launcher):
        assert_same_bits(a, b, name)


@needs_ops
@needs_cuda
@pytest.mark.parametrize("producer", ("group_quant", "silu_clamp_quant", "rmsnorm_quant"))
@pytest.mark.parametrize("group_size", (32, 64))
@pytest.mark.parametrize("m", (3, 17))
@pytest.mark.parametrize("enable_pdl", (False, True))
def test_op_bytes_equal_launcher_bytes_other_group_sizes(producer, group_size, m, enable_pdl):
    ops, launcher = run_both(producer, m, 512, torch.float8_e4m3fn, False, group_size, "col_major_ld_align4",
                             enable_pdl)
    for (name, a), (_, b) in zip(ops, launcher):
        assert_same_bits(a, b, name)


def test_shim_reaches_the_launchers_checks():
    """The comparison is only as good as the shim: its calls must reach the
    launcher, whose refusal (host-side, before any device work) comes back
    with the launcher's message. Raw addresses: no GPU needed."""
    o = shim.Outputs(0x1000, 100, 0, 0, 0x2000, 1)
    opt = shim.options()
    call = shim.bind("fp8scale_shim_group_quant", 0x3000, 4, 100, 100, ctypes.byref(o), ctypes.byref(opt))
    with pytest.raises(RuntimeError, match=r"groupQuant: argument 'K' = 100: not a multiple of the group size"):
        call()
    o = shim.Outputs(0x1000, 128, 0, 1, 0x2000, 3)  # column-major ld 3 < M = 4
    call = shim.bind("fp8scale_shim_group_quant", 0x3000, 4, 128, 128, ctypes.byref(o), ctypes.byref(opt))
    with pytest.raises(RuntimeError, match=r"argument 'ld' = 3"):
        call()
