"""torch.compile of the Python functions: one graph, no break, dynamic M.

Meta tensors, so these run without a GPU; tests/test_gpu.py compiles the
same functions with inductor on a GPU and compares the bits with eager.
"""

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import fp8scale
from conftest import needs_ops

pytestmark = needs_ops

BF16 = torch.bfloat16
K, I = 1024, 512


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def producers(x, w, r, gate_up):
    """Every producer of the package, both scale layouts, as a model calls them."""
    q1, s1 = fp8scale.rmsnorm_quant(x, w, residual=r, transpose_scale=True, ld_align=4)
    q2, s2 = fp8scale.group_quant(x, 128, transpose_scale=True, ld_align=4, scale_ue8m0=True)
    q3, s3 = fp8scale.silu_clamp_quant(gate_up, 7.0, 128, fp8_dtype=torch.float8_e4m3fnuz, fmax=224.0)
    q4, s4, y = fp8scale.rmsnorm_quant(x, w, group_size=64, return_norm_out=True)
    return q1, s1, q2, s2, q3, s3, q4, s4, y


def inputs(m):
    return meta(m, K), meta(K), meta(m, K), meta(m, 2 * I)


def test_explain_finds_one_graph_and_no_break():
    explained = torch._dynamo.explain(producers)(*inputs(7))
    assert explained.break_reasons == []
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    explained = torch._dynamo.explain(lambda s: fp8scale.materialize(s, ld_align=4))(meta(7, 8, dtype=torch.float32))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dynamic_m_compiles_once(backend):
    """fullgraph=True, dynamic=True: M = 7, 64, 1000 share one graph. M = 1
    adds one (torch specializes sizes 0 and 1); no M after that compiles."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(producers, fullgraph=True, dynamic=True, backend=counter)
    compiles = []
    for m in (7, 64, 1000):
        out = compiled(*inputs(m))
        assert out[1].shape == (m, K // 128) and out[1].stride() == (1, (m + 3) // 4 * 4)
        assert out[5].stride() == (I // 128, 1) and out[4].dtype == torch.float8_e4m3fnuz
        compiles.append(counter.frame_count)
    assert compiles[0] >= 1 and compiles == [compiles[0]] * 3
    compiled(*inputs(1))
    after_one = counter.frame_count
    assert after_one > compiles[0]
    compiled(*inputs(33))
    compiled(*inputs(2))
    assert counter.frame_count == after_one


def test_materialize_compiles_once_for_row_major_input():
    """Row-major scales of 2+ rows and groups are never the consumer's bytes:
    materialize relays them whatever M, with no guard on M's alignment. (A
    single group of unit stride can be: there the answer depends on M.)"""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("eager")
    compiled = torch.compile(lambda s: fp8scale.materialize(s, ld_align=4), fullgraph=True, dynamic=True,
                             backend=counter)
    for m in (6, 7, 9, 8, 12, 64):
        s = meta(m, 8, dtype=torch.float32)
        out = compiled(s)
        assert out.stride() == (1, (m + 3) // 4 * 4) and out is not s
    assert counter.frame_count == 1


def test_errors_under_compile_name_the_argument():
    """Under torch.compile the messages arrive in torch's compile errors
    (RuntimeError subclasses): from the function's own check, and from the
    fake implementation's."""
    compiled = torch.compile(lambda x: fp8scale.group_quant(x, 96), fullgraph=True, dynamic=True, backend="eager")
    with pytest.raises(RuntimeError, match=r"argument 'group_size' = 96"):
        compiled(meta(4, 384))
    compiled = torch.compile(lambda x: fp8scale.group_quant(x, eps=0.0), fullgraph=True, dynamic=True,
                             backend="eager")
    with pytest.raises(RuntimeError, match=r"argument 'eps' = 0.0: must be > 0"):
        compiled(meta(4, 512))


@pytest.mark.parametrize("layout", ("packed_ue8m0", "swizzled_128x4"))
@pytest.mark.parametrize("direct", (False, True))
def test_exponent_layout_path_compiles_once_for_every_m(layout, direct):
    """UE8M0 scales column-major, then laid out by materialize, or the
    layout written by the producer itself (DeepGEMM's packed words in
    groups of 128; the swizzled bytes in groups of 32, whose float8_e8m0fnu
    tensor reaches the op as its uint8 view): one graph, no break, and no
    recompile as M changes (after the first dynamic compile)."""
    group = 128 if layout == "packed_ue8m0" else 32

    def site(x):
        if direct:
            return fp8scale.group_quant(x, group, scale_ue8m0=True, scale_layout=layout)
        q, s = fp8scale.group_quant(x, group, transpose_scale=True, ld_align=4, scale_ue8m0=True)
        return q, fp8scale.materialize(s, layout=layout)

    explained = torch._dynamo.explain(site)(meta(7, K))
    assert explained.break_reasons == [] and (explained.graph_count, explained.graph_break_count) == (1, 0)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(site, fullgraph=True, dynamic=True, backend=counter)
    frames = []
    for m in (7, 64, 1000, 33):
        q, out = compiled(meta(m, K))
        if layout == "packed_ue8m0":
            assert out.dtype == torch.int32 and out.shape == (m, (K // 128 + 3) // 4)
            assert out.stride() == (1, (m + 3) // 4 * 4)
        else:
            assert out.dtype == torch.float8_e8m0fnu and out.shape == ((m + 127) // 128 * 128 * (K // 32),)
        frames.append(counter.frame_count)
    assert frames == [frames[0]] * 4
