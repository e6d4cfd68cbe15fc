"""The drop-in entry points on meta tensors: each returns the dtype, shape and
strides the engine's own function returns, refuses what fp8scale does not
compute by name, and traces into one graph. No GPU needed; test_gpu.py holds
their bits to fp8scale's own functions.

The expected layouts are the engines' allocation rules, restated:
- row-major scales: x.shape[:-1] + (G,), contiguous (all of them);
- vLLM and SGLang column-major: (M, G) with strides (1, M), or (1, align(M, 4))
  with the TMA-aligned flag;
- aiter with transpose_scale: a [G][M] buffer returned as its contiguous
  (M, G) view (strides (G, 1)), or with is_x_scale_strided as (1, M).
"""

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from conftest import needs_ops
from fp8scale.compat import aiter, sgl_kernel, sglang, vllm

pytestmark = needs_ops

BF16, F32, FN, FNUZ = torch.bfloat16, torch.float32, torch.float8_e4m3fn, torch.float8_e4m3fnuz
MS = (0, 1, 5, 130)


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def contiguous_strides(shape):
    return torch.empty(shape, device="meta").stride()


def align4(m):
    return (m + 3) // 4 * 4


def assert_layout(t, dtype, shape, strides):
    assert t.dtype == dtype and tuple(t.shape) == tuple(shape)
    if t.numel():  # an empty tensor's strides are its allocator's
        assert tuple(t.stride()) == tuple(strides), (tuple(t.stride()), strides)


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("col, tma", [(False, False), (False, True), (True, False), (True, True)])
def test_vllm_layouts(m, col, tma):
    q, s = vllm.per_token_group_quant_fp8(meta(m, 1024), 128, column_major_scales=col, tma_aligned_scales=tma)
    assert_layout(q, FN, (m, 1024), (1024, 1))
    if col:
        assert_layout(s, F32, (m, 8), (1, align4(m) if tma else m))
    else:  # tma_aligned_scales alone leaves the scales row-major, as in vLLM
        assert_layout(s, F32, (m, 8), (8, 1))


def test_vllm_batched_rows_dtype_and_out_q():
    q, s = vllm.per_token_group_quant_fp8(meta(3, 5, 512), 64, dtype=FNUZ, use_ue8m0=True)
    assert_layout(q, FNUZ, (3, 5, 512), contiguous_strides((3, 5, 512)))
    assert_layout(s, F32, (3, 5, 8), contiguous_strides((3, 5, 8)))
    out_q = meta(7, 256, dtype=FN)
    q, s = vllm.per_token_group_quant_fp8(meta(7, 256), 128, out_q=out_q)
    assert q is out_q and s.shape == (7, 2)


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("col, tma", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("fuse", [False, True])
def test_sglang_layouts(m, col, tma, fuse):
    q, s = sglang.sglang_per_token_group_quant_fp8(meta(m, 1024), 128, column_major_scales=col,
                                                   scale_tma_aligned=tma, fuse_silu_and_mul=fuse, enable_v2=True)
    n = 512 if fuse else 1024
    assert_layout(q, FN, (m, n), (n, 1))
    g = n // 128
    assert_layout(s, F32, (m, g), ((1, align4(m) if tma else m) if col else (g, 1)))


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("fuse", [False, True])
def test_sglang_packed_ue8m0_layout(m, fuse):
    """SGLang's scale_ue8m0 scales: int32 (M, ceil(G / 4)), strides (1, align(M, 4))."""
    q, s = sglang.sglang_per_token_group_quant_fp8(meta(m, 2560), 128, column_major_scales=True,
                                                   scale_tma_aligned=True, scale_ue8m0=True, fuse_silu_and_mul=fuse)
    n = 1280 if fuse else 2560
    assert_layout(q, FN, (m, n), (n, 1))
    words = (n // 128 + 3) // 4
    assert_layout(s, torch.int32, (m, words), (1, align4(m)))
    out = meta(words, align4(m), dtype=torch.int32).t()[:m]
    sgl_kernel.sgl_per_token_group_quant_8bit(meta(m, 2560), meta(m, n, dtype=FN), out, 128, 1e-10, -448.0,
                                              448.0, scale_ue8m0=True, fuse_silu_and_mul=fuse)


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("layout", ["row", "col", "col4"])
def test_sgl_kernel_writes_the_callers_tensors(m, layout):
    x, q = meta(m, 1024), meta(m, 1024, dtype=FN)
    ld = {"row": None, "col": m, "col4": align4(m)}[layout]
    s = meta(m, 8, dtype=F32) if ld is None else meta(8, ld, dtype=F32).t()[:m]
    assert sgl_kernel.sgl_per_token_group_quant_8bit(x, q, s, 128, 1e-10, -448.0, 448.0) is None
    sgl_kernel.sgl_per_token_group_quant_fp8(meta(m, 2048), q, s, 128, 1e-10, -448.0, 448.0,
                                             fuse_silu_and_mul=True)


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("transpose, strided", [(False, False), (True, False), (True, True)])
def test_aiter_rms_layouts(m, transpose, strided):
    (q, s), out1, out2, out_res1 = aiter.fused_rms_fp8_group_quant(
        meta(m, 1024), meta(1024), 1e-6, res1=meta(m, 1024), output_unquantized_inp1=True,
        transpose_scale=transpose, is_x_scale_strided=strided)
    assert_layout(q, FN, (m, 1024), (1024, 1))
    assert_layout(s, F32, (m, 8), (1, m) if strided else (8, 1))
    assert_layout(out1, BF16, (m, 1024), (1024, 1))
    assert_layout(out_res1, BF16, (m, 1024), (1024, 1))
    assert out2 is None
    (q, s), out1, out2, out_res1 = aiter.fused_rms_fp8_group_quant(meta(m, 1024), meta(1024), 1e-6)
    assert out1 is None and out2 is None and out_res1 is None


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("transpose", [False, True])
def test_aiter_clamp_act_mul_layouts(m, transpose):
    q, s = aiter.fused_clamp_act_mul(meta(m, 1024), swiglu_limit=7.0, dtype_quant=FN, transpose_scale=transpose)
    assert_layout(q, FN, (m, 512), (512, 1))
    assert_layout(s, F32, (m, 4), (4, 1))  # transposed bytes in a contiguous (M, G) view, as aiter returns
    buf = meta(4, m, dtype=F32) if transpose else meta(m, 4, dtype=F32)
    out = meta(m, 512, dtype=FNUZ)
    q, s = aiter.fused_clamp_act_mul(meta(m, 1024), out, buf, dtype_quant=FN, transpose_scale=transpose)
    assert q is out and s.untyped_storage().data_ptr() == buf.untyped_storage().data_ptr()


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: vllm.per_token_group_quant_fp8(meta(4, 500), 128), ValueError,
         r"per_token_group_quant_fp8: argument 'x' has 500 columns"),
        (lambda: vllm.per_token_group_quant_fp8(meta(4, 512), 96), ValueError, r"argument 'group_size' = 96"),
        (lambda: vllm.per_token_group_quant_fp8(meta(512), 128), ValueError,
         r"argument 'x' must have 2 or more dimensions"),
        (lambda: vllm.per_token_group_quant_fp8(meta(4, 512), 128, dtype=torch.int8), TypeError,
         r"argument 'dtype'"),
        (lambda: vllm.per_token_group_quant_fp8(meta(4, 512), 128, out_q=meta(4, 256, dtype=FN)), ValueError,
         r"argument 'out_q' has shape \(4, 256\)"),
        (lambda: vllm.per_token_group_quant_fp8(meta(2, 4, 512), 128, column_major_scales=True), ValueError,
         r"argument 'column_major_scales' needs a 2-D x"),
        (lambda: vllm.per_token_group_quant_fp8(meta(4, 2, 512).transpose(0, 1), 128), ValueError,
         r"argument 'x' with 3 dimensions must be contiguous"),
        (lambda: sglang.sglang_per_token_group_quant_fp8(meta(4, 512), 128, column_major_scales=True,
                                                         scale_ue8m0=True),
         ValueError, r"argument 'scale_ue8m0' = True needs a 2-D x, column_major_scales, scale_tma_aligned"),
        (lambda: sgl_kernel.sgl_per_token_group_quant_8bit(meta(4, 512), meta(4, 512, dtype=FN),
                                                           meta(4, 4, dtype=F32), 128, 1e-10, -448.0, 448.0,
                                                           scale_ue8m0=True),
         TypeError, r"argument 'output_s' has dtype torch.float32, expected torch.int32"),
        (lambda: sglang.sglang_per_token_group_quant_fp8(meta(4, 512), 128, masked_m=meta(1)),
         NotImplementedError, r"argument 'masked_m'"),
        (lambda: sglang.sglang_per_token_group_quant_fp8(meta(4, 513), 128, fuse_silu_and_mul=True), ValueError,
         r"argument 'x' has an odd number of columns 513"),
        (lambda: sgl_kernel.sgl_per_token_group_quant_8bit(meta(4, 512), meta(4, 512, dtype=torch.int8),
                                                           meta(4, 4, dtype=F32), 128, 1e-10, -128.0, 127.0),
         TypeError, r"argument 'output_q' has dtype torch.int8"),
        (lambda: sgl_kernel.sgl_per_token_group_quant_8bit(meta(4, 512), meta(4, 512, dtype=FN),
                                                           meta(4, 4, dtype=F32), 128, 1e-10, -400.0, 448.0),
         ValueError, r"argument 'fp8_min' = -400.0"),
        (lambda: sgl_kernel.sgl_per_token_group_quant_8bit(meta(4, 512), meta(4, 512, dtype=FN),
                                                           meta(4, 4, dtype=F32), 128, 1e-10, -500.0, 500.0),
         ValueError, r"argument 'fmax' = 500.0"),
        (lambda: sgl_kernel.sgl_per_token_group_quant_8bit(meta(4, 512), meta(4, 512, dtype=FN),
                                                           meta(8, 4, dtype=F32).t()[:, :4].t()[:3], 128, 1e-10,
                                                           -448.0, 448.0),
         ValueError, r"argument 'scale' has shape"),
        (lambda: aiter.fused_rms_fp8_group_quant(meta(4, 512), meta(512), 1e-6, inp2=meta(4, 512)),
         NotImplementedError, r"fused_rms_fp8_group_quant: argument 'inp2'"),
        (lambda: aiter.fused_rms_fp8_group_quant(meta(4, 512), meta(512, dtype=F32), 1e-6), TypeError,
         r"argument 'inp1_weight' has dtype torch.float32"),
        (lambda: aiter.fused_rms_fp8_group_quant(meta(4, 512), meta(512), 1e-6, dtype_quant=BF16), TypeError,
         r"argument 'dtype_quant'"),
        (lambda: aiter.fused_rms_fp8_group_quant(meta(4, 500), meta(500), 1e-6), ValueError,
         r"argument 'inp1' has 500 columns"),
        (lambda: aiter.fused_clamp_act_mul(meta(4, 512)), ValueError, r"argument 'dtype_quant' is None"),
        (lambda: aiter.fused_clamp_act_mul(meta(4, 512), activation="gelu", dtype_quant=FN), ValueError,
         r"argument 'activation' = 'gelu'"),
        (lambda: aiter.fused_clamp_act_mul(meta(4, 512), weights=meta(4, 1), dtype_quant=FN), NotImplementedError,
         r"argument 'weights'"),
        (lambda: aiter.fused_clamp_act_mul(meta(4, 512), dtype_quant=FN, scale_dtype_fmt="ue8m0",
                                           quant_block_size=32), NotImplementedError,
         r"argument 'scale_dtype_fmt'"),
        (lambda: aiter.fused_clamp_act_mul(meta(4, 512), scale=meta(4, 2, dtype=F32), dtype_quant=FN,
                                           transpose_scale=True), ValueError,
         r"argument 'scale' has shape \(4, 2\), expected \(2, 4\)"),
    ],
)
def test_refusals_name_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_cpu_tensors_are_refused_by_name():
    with pytest.raises(ValueError, match=r"argument 'x' is on cpu"):
        vllm.per_token_group_quant_fp8(torch.empty(4, 512, dtype=BF16), 128)


def dropins(x, w, r, gate_up):
    """Each drop-in, as an engine's model calls it."""
    a = vllm.per_token_group_quant_fp8(x, 128, column_major_scales=True, tma_aligned_scales=True, use_ue8m0=True)
    b = sglang.sglang_per_token_group_quant_fp8(gate_up, 128, column_major_scales=True, fuse_silu_and_mul=True)
    (q, s), _, _, res = aiter.fused_rms_fp8_group_quant(x, w, 1e-6, res1=r, transpose_scale=True)
    c = aiter.fused_clamp_act_mul(gate_up, swiglu_limit=7.0, dtype_quant=FN, transpose_scale=True)
    d = sglang.sglang_per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True,
                                                scale_ue8m0=True)
    return a + b + (q, s, res) + c + d


def test_dropins_trace_into_one_graph_with_dynamic_m():
    def inputs(m):
        return meta(m, 1024), meta(1024), meta(m, 1024), meta(m, 1024)

    explained = torch._dynamo.explain(dropins)(*inputs(7))
    assert explained.break_reasons == [] and (explained.graph_count, explained.graph_break_count) == (1, 0)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(dropins, fullgraph=True, dynamic=True, backend=counter)
    for m in (7, 64, 1000):
        out = compiled(*inputs(m))
        assert out[1].stride() == (1, align4(m)) and out[3].stride() == (1, m) and out[8].stride() == (4, 1)
        assert out[10].dtype == torch.int32 and out[10].stride() == (1, align4(m))  # packed UE8M0
    assert counter.frame_count == 1
