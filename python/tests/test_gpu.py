"""The ops on the GPU: transposed emission against row-major + materialize,
bit for bit, the zero-copy views, the padding, a torch reference, opcheck,
torch.compile, CUDA graphs and streams."""

import itertools

import pytest
import torch

import fp8scale
from conftest import needs_cuda, needs_ops

pytestmark = [needs_ops, needs_cuda]

IN_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
FP8 = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
MS = (0, 1, 2, 3, 8, 16, 17, 128, 1000)
GARBAGE = float("nan")


def activations(m, k, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(m, k, generator=g, device="cuda", dtype=torch.float32) * 3
    if m > 0:
        x[:, ::97] *= 40  # outliers, as activations have
    return x.to(dtype)


def col_major_out(m, g, ld):
    """A [g, ld] buffer filled with garbage and its (m, g) view, strides (1, ld)."""
    buf = torch.full((g, ld), GARBAGE, dtype=torch.float32, device="cuda")
    return buf, buf.t()[:m]


def cases():
    for producer, dtype, fp8, rule, m in itertools.product(
            ("group_quant", "silu_clamp_quant", "rmsnorm_quant"), IN_DTYPES, FP8, (False, True), MS):
        for k in ((256, 2048) if producer == "silu_clamp_quant" else (512, 7168)):
            yield producer, dtype, fp8, rule, m, k


@pytest.mark.parametrize("producer, dtype, fp8, ue8m0, m, k", list(cases()))
def test_transposed_emission_equals_row_major_plus_materialize(producer, dtype, fp8, ue8m0, m, k):
    seed = hash((producer, str(dtype), m, k)) % 1000
    if producer == "group_quant":
        x = activations(m, k, dtype, seed)
        cols = k
        op = torch.ops.fp8scale.group_quant
        args = lambda: (128, ue8m0)
        call = lambda q, s: op(x, q, s, *args())
    elif producer == "silu_clamp_quant":
        x = activations(m, 2 * k, dtype, seed)
        cols = k
        call = lambda q, s: torch.ops.fp8scale.silu_clamp_quant(x, q, s, 7.0, 128, ue8m0)
    else:
        x = activations(m, k, dtype, seed)
        cols = k
        w = (torch.rand(k, device="cuda") + 0.5).to(dtype)
        r0 = activations(m, k, dtype, seed + 1)
        residuals = []

        def call(q, s):
            r = r0.clone()
            y = torch.empty_like(x)
            torch.ops.fp8scale.rmsnorm_quant(x, w, q, s, r, y, 1e-6, 128, ue8m0)
            residuals.append((r, y))
    g = cols // 128

    q_row = torch.empty(m, cols, dtype=fp8, device="cuda")
    s_row = torch.full((m, g), GARBAGE, device="cuda")
    call(q_row, s_row)
    for ld_align in (1, 4):
        ld = fp8scale.align_up(m, ld_align)
        buf, s_col = col_major_out(m, g, ld)
        q_col = torch.empty(m, cols, dtype=fp8, device="cuda")
        call(q_col, s_col)
        s_mat = fp8scale.materialize(s_row, ld_align)
        torch.cuda.synchronize()
        # The view: strides (1, ld) over the producer's own buffer.
        if m > 1 or ld > 1:
            assert s_col.stride() == (1, ld)
        assert s_col.untyped_storage().data_ptr() == buf.untyped_storage().data_ptr()
        assert torch.equal(q_col.view(torch.uint8), q_row.view(torch.uint8))
        assert torch.equal(s_col.view(torch.int32), s_row.view(torch.int32))  # bits, through (m, g)
        assert torch.equal(s_mat.view(torch.int32), s_row.view(torch.int32))
        # Padding slots [M, ld) of each group: 0 over the NaN fill.
        if ld > m:
            assert torch.equal(buf[:, m:], torch.zeros(g, ld - m, device="cuda"))
            full = s_mat.as_strided((g, ld), (ld, 1)) if s_mat.stride() == (1, ld) else None
            assert full is not None and torch.equal(full[:, m:], torch.zeros(g, ld - m, device="cuda"))
    if producer == "rmsnorm_quant":
        (r1, y1), (r2, y2), (r3, y3) = residuals
        assert torch.equal(r1, r2) and torch.equal(r1, r3) and torch.equal(y1, y2) and torch.equal(y1, y3)
        assert torch.equal(r1, (x.float() + r0.float()).to(dtype)) or dtype == torch.float32


def torch_group_quant(x, group_size, fp8, fmax, eps):
    """The reference: s = max(amax, eps) / fmax, q = x * (1 / s), divisions
    tensor by tensor (IEEE), as docs/numerics.md specifies."""
    m, k = x.shape
    v = x.float().view(m, k // group_size, group_size)
    amax = v.abs().amax(dim=-1).clamp_min(torch.tensor(eps, device=x.device))
    s = amax / torch.full_like(amax, fmax)
    inv = torch.ones_like(s) / s
    top = torch.finfo(fp8).max
    q = (v * inv.unsqueeze(-1)).clamp(-top, top).to(fp8).view(m, k)
    return q, s


@pytest.mark.parametrize("dtype", IN_DTYPES)
@pytest.mark.parametrize("fp8, fmax", [(torch.float8_e4m3fn, 448.0), (torch.float8_e4m3fnuz, 240.0),
                                       (torch.float8_e4m3fnuz, 224.0)])
@pytest.mark.parametrize("group_size", (32, 64, 128))
@pytest.mark.parametrize("m", (1, 17, 1000))
def test_group_quant_equals_torch_reference(dtype, fp8, fmax, group_size, m):
    x = activations(m, 7168, dtype, 7)
    q, s = fp8scale.group_quant(x, group_size, transpose_scale=True, ld_align=4, fp8_dtype=fp8, fmax=fmax)
    q_ref, s_ref = torch_group_quant(x, group_size, fp8, fmax, 1e-10)
    assert torch.equal(s.view(torch.int32), s_ref.view(torch.int32))
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


def test_head_major_input_equals_the_matrix_input():
    m, h, d = 17, 8, 256
    big = activations(m, 2 * h * d, torch.bfloat16, 3)
    x3 = big[:, : h * d].view(m, h, d)  # token stride 2 H D, head stride D
    x3 = x3.as_strided((m, h, d), (2 * h * d, d, 1))
    q3, s3 = fp8scale.group_quant(x3, transpose_scale=True)
    q2, s2 = fp8scale.group_quant(x3.reshape(m, h * d).contiguous(), transpose_scale=True)
    assert q3.shape == (m, h, d)
    assert torch.equal(q3.view(torch.uint8).view(m, h * d), q2.view(torch.uint8))
    assert torch.equal(s3, s2)


def test_m0_writes_only_the_padding():
    buf, s = col_major_out(0, 56, 4)
    x = torch.empty(0, 7168, dtype=torch.bfloat16, device="cuda")
    torch.ops.fp8scale.group_quant(x, torch.empty(0, 7168, dtype=torch.float8_e4m3fn, device="cuda"), s)
    assert torch.equal(buf, torch.zeros_like(buf))


def test_launcher_refusals_name_the_argument():
    x = activations(4, 7168 + 128, torch.bfloat16, 1)[:, 1:7169]  # rows 2 bytes past a 16-byte boundary
    with pytest.raises(RuntimeError, match=r"fp8scale.group_quant: .*argument 'x'"):
        fp8scale.group_quant(x)
    # ld = 5 over 279 floats: the view fits, its last padding slot (280th) does not.
    s_buf = torch.empty(56 * 5 - 1, device="cuda")
    with pytest.raises(ValueError, match=r"argument 'scale' storage holds 1116 bytes"):
        torch.ops.fp8scale.group_quant(activations(4, 7168, torch.bfloat16, 1),
                                       torch.empty(4, 7168, dtype=torch.float8_e4m3fn, device="cuda"),
                                       s_buf.as_strided((4, 56), (1, 5)))
    x = activations(4, 512, torch.bfloat16, 1)
    q = torch.empty(4, 512, dtype=torch.float8_e4m3fn, device="cuda")
    with pytest.raises(ValueError, match=r"argument 'q' overlaps 'scale'"):
        torch.ops.fp8scale.group_quant(x, q, q.view(torch.float32)[:, :4])


def test_ops_take_swizzled_bytes_as_uint8():
    """torch 2.10's stable ABI, which the op library targets, cannot pass a
    float8_e8m0fnu tensor: the op names the argument and the uint8 view it
    takes, and the Python functions pass that view themselves."""
    x = activations(4, 512, torch.bfloat16, 1)
    q = torch.empty(4, 512, dtype=torch.float8_e4m3fn, device="cuda")
    e8m0 = torch.empty(128 * 4, dtype=torch.float8_e8m0fnu, device="cuda")
    with pytest.raises(ValueError, match=r"group_quant: argument 'scale' has a dtype the stable ABI of torch 2.10 "
                                         r"cannot pass, such as torch.float8_e8m0fnu: the ops take swizzled UE8M0 "
                                         r"scales as their bytes, scale.view\(torch.uint8\)"):
        torch.ops.fp8scale.group_quant(x, q, e8m0, 128, True)
    s = torch.exp2(torch.randint(-20, 20, (4, 4), device="cuda").float())
    with pytest.raises(ValueError, match=r"materialize_swizzled_128x4: argument 'dst' has a dtype the stable ABI"):
        torch.ops.fp8scale.materialize_swizzled_128x4(s, e8m0)
    with pytest.raises(ValueError, match=r"materialize_swizzled_128x4: argument 'dst' has dtype torch.int8, "
                                         r"expected torch.uint8"):
        torch.ops.fp8scale.materialize_swizzled_128x4(s, e8m0.view(torch.int8))
    with pytest.raises(ValueError, match=r"rmsnorm_quant: argument 'x' has a dtype the stable ABI"):
        torch.ops.fp8scale.rmsnorm_quant(e8m0.view(4, 128), e8m0[:128], q[:, :128], e8m0.view(torch.uint8)[:128])
    torch.ops.fp8scale.group_quant(x, q, e8m0.view(torch.uint8), 128, True)
    q2, s2 = fp8scale.group_quant(x, scale_ue8m0=True, scale_layout="swizzled_128x4")
    assert s2.dtype == torch.float8_e8m0fnu
    assert torch.equal(q2.view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(s2.view(torch.uint8), e8m0.view(torch.uint8))


# What the C++ op checks on CUDA tensors is a ValueError naming the argument
# (a std::invalid_argument), as the fakes raise on meta tensors; the Python
# functions check types and dtypes themselves (TypeError).
@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda x: fp8scale.rmsnorm_quant(x, torch.ones(256, dtype=x.dtype, device="cuda")),
         ValueError, r"rmsnorm_quant: argument 'weight' has shape \(256,\), expected \(512,\)"),
        (lambda x: fp8scale.rmsnorm_quant(x, torch.ones(512, device="cuda")),
         TypeError, r"rmsnorm_quant: argument 'weight' has dtype torch.float32"),
        (lambda x: fp8scale.group_quant(x, eps=0.0), ValueError, r"group_quant: argument 'eps'"),
        (lambda x: fp8scale.group_quant(x, fp8_dtype=torch.float8_e4m3fnuz, fmax=448.0),
         ValueError, r"group_quant: argument 'fmax'"),
        (lambda x: fp8scale.silu_clamp_quant(x, float("nan")), ValueError, r"silu_clamp_quant: argument 'limit'"),
        (lambda x: fp8scale.rmsnorm_quant(x, torch.ones(512, dtype=x.dtype, device="cuda"), -1.0), ValueError,
         r"rmsnorm_quant: argument 'norm_eps' = -1"),
        (lambda x: torch.ops.fp8scale.group_quant(x, torch.empty(4, 512, dtype=torch.float8_e4m3fn, device="cuda"),
                                                  torch.empty(4, 5, device="cuda")),
         ValueError, r"group_quant: argument 'scale' has shape \(4, 5\)"),
        (lambda x: torch.ops.fp8scale.group_quant(x, torch.empty(4, 512, dtype=torch.float8_e4m3fn, device="cuda"),
                                                  torch.empty(4, 4, device="cuda"), 96),
         ValueError, r"group_quant: argument 'group_size' = 96"),
    ],
)
def test_cuda_op_errors_have_the_documented_type(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(activations(4, 512, torch.bfloat16, 1))


# opcheck's test_schema compares the mutated outputs with arithmetic that
# torch has no fp8 kernel for ("mul_cuda" not implemented for Float8_e4m3fn),
# so it runs the other three checks; the (a!) annotations are held by
# test_ops_host.test_schemas and the mutation by the tests above.
OPCHECK_TESTS = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def test_opcheck():
    x = activations(17, 512, torch.bfloat16, 2)
    for s in (torch.empty(17, 4, device="cuda"), col_major_out(17, 4, 20)[1]):
        q = torch.empty(17, 512, dtype=torch.float8_e4m3fn, device="cuda")
        torch.library.opcheck(torch.ops.fp8scale.group_quant.default, (x, q, s), test_utils=OPCHECK_TESTS)
    torch.library.opcheck(torch.ops.fp8scale.silu_clamp_quant.default,
                          (activations(5, 512, torch.bfloat16, 3), torch.empty(5, 256, dtype=torch.float8_e4m3fn,
                                                                               device="cuda"),
                           col_major_out(5, 2, 8)[1], 7.0), test_utils=OPCHECK_TESTS)
    w = torch.ones(512, dtype=torch.bfloat16, device="cuda")
    torch.library.opcheck(torch.ops.fp8scale.rmsnorm_quant.default,
                          (x, w, torch.empty(17, 512, dtype=torch.float8_e4m3fn, device="cuda"),
                           col_major_out(17, 4, 17)[1], x.clone(), torch.empty_like(x)), test_utils=OPCHECK_TESTS)
    torch.library.opcheck(torch.ops.fp8scale.materialize.default,
                          (torch.rand(17, 4, device="cuda"), col_major_out(17, 4, 20)[1]), test_utils=OPCHECK_TESTS)
    # opcheck clones its arguments: an aligned M keeps dst's ld (a clone of
    # strides (1, 20) over 17 rows would be (1, 17), not a packed ld).
    ue8m0 = torch.exp2(torch.randint(-20, 20, (20, 5), device="cuda").float())
    packed = torch.empty(2, 20, dtype=torch.int32, device="cuda").t()
    torch.library.opcheck(torch.ops.fp8scale.materialize_packed_ue8m0.default, (ue8m0, packed),
                          test_utils=OPCHECK_TESTS)
    swizzled = torch.empty(128 * 8, dtype=torch.uint8, device="cuda")  # the swizzled bytes as the ops take them
    torch.library.opcheck(torch.ops.fp8scale.materialize_swizzled_128x4.default, (ue8m0, swizzled),
                          test_utils=OPCHECK_TESTS)


class Site(torch.nn.Module):
    """A decoder layer's producer sites: RMSNorm quant, then SiLU quant."""

    def forward(self, x, w, gate_up):
        q1, s1 = fp8scale.rmsnorm_quant(x, w, transpose_scale=True, ld_align=4)
        q2, s2 = fp8scale.silu_clamp_quant(gate_up, 7.0, transpose_scale=True, ld_align=4)
        return q1, s1, q2, s2


def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    x = activations(33, 7168, torch.bfloat16, 4)
    w = (torch.rand(7168, device="cuda") + 0.5).to(torch.bfloat16)
    gu = activations(33, 4096, torch.bfloat16, 5)
    eager = Site()(x, w, gu)
    compiled = torch.compile(Site(), fullgraph=True)(x, w, gu)
    for a, b in zip(eager, compiled):
        assert a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(a.view(torch.uint8) if a.dtype != torch.float32 else a,
                           b.view(torch.uint8) if b.dtype != torch.float32 else b)


def test_cuda_graph_replays():
    x = activations(64, 7168, torch.bfloat16, 6)
    q = torch.empty(64, 7168, dtype=torch.float8_e4m3fn, device="cuda")
    buf, s = col_major_out(64, 56, 64)
    torch.ops.fp8scale.group_quant(x, q, s)  # warm-up outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        torch.ops.fp8scale.group_quant(x, q, s)
    x.copy_(activations(64, 7168, torch.bfloat16, 8))
    buf.fill_(GARBAGE)
    g.replay()
    torch.cuda.synchronize()
    q_ref, s_ref = fp8scale.group_quant(x)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(s, s_ref)


def test_side_stream_orders_with_its_stream():
    side = torch.cuda.Stream()
    x = activations(4096, 7168, torch.bfloat16, 9)
    ref_q, ref_s = fp8scale.group_quant(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.current_stream())
        y = x * 1  # queued on the side stream before the op
        q, s = fp8scale.group_quant(y)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8)) and torch.equal(s, ref_s)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_non_zero_device_is_honoured():
    with torch.cuda.device(0):
        x = activations(17, 512, torch.bfloat16, 1).to("cuda:1")
        q, s = fp8scale.group_quant(x, transpose_scale=True)
    assert q.device == x.device and s.device == x.device
    ref_q, ref_s = fp8scale.group_quant(x.to("cuda:0"), transpose_scale=True)
    assert torch.equal(q.cpu().view(torch.uint8), ref_q.cpu().view(torch.uint8))
    assert torch.equal(s.cpu(), ref_s.cpu())


# --- torch.compile of a DeepSeek-V3-style block, dynamic M ----------------------


def _block_weights(seed):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def block_quant(n, k):  # 128 x 128 blocks, s = amax / 448 tensor by tensor
        w = torch.randn(n, k, generator=g, device="cuda") * 0.02
        b = w.view(n // 128, 128, k // 128, 128)
        amax = b.abs().amax(dim=(1, 3)).clamp_min(1e-10)
        s = amax / torch.full_like(amax, 448.0)
        return (b / s[:, None, :, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(n, k), s

    norm_w = (torch.rand(1024, generator=g, device="cuda") + 0.5).to(torch.bfloat16)
    return (norm_w, *block_quant(2 * 512, 1024), *block_quant(1024, 512))


# The GEMM as an opaque custom op, as engines wrap theirs: torch 2.11's Dynamo
# does not trace F.scaled_mm's binding (_scaled_mm_v2), which would break the
# graph. It takes dense operands: q over align(M, 4) rows and the scales as
# the column-major (align(M, 4), G) block that F.scaled_mm (cuBLASLt, sm_90)
# reads, which is the producer's [G][ld] buffer itself.
@torch.library.custom_op("fp8scale_test::block_gemm", mutates_args=())
def block_gemm(q_rows: torch.Tensor, s_block: torch.Tensor, wq: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    return F.scaled_mm(q_rows, wq.t(), s_block, F.ScalingType.BlockWise1x128, ws.t(),
                       F.ScalingType.BlockWise128x128, output_dtype=torch.bfloat16)


@block_gemm.register_fake
def _(q_rows, s_block, wq, ws):
    return q_rows.new_empty((q_rows.shape[0], wq.shape[0]), dtype=torch.bfloat16)


def gemm(q, s, wq, ws):
    """(q * s) @ (wq * ws)^T for q (M, K) and s (M, G) with strides (1, ld):
    q copied into ld rows, the scale view widened to its [G][ld] block (no copy)."""
    m, ld = q.shape[0], s.stride(1)
    q_rows = q.new_empty((ld, q.shape[1]))  # rows m .. ld - 1 are not read back
    q_rows.view(torch.uint8)[:m].copy_(q.view(torch.uint8))
    return block_gemm(q_rows, s.as_strided((ld, s.shape[1]), (1, ld)), wq, ws)[:m]


def deepseek_block(x, residual, norm_w, wq1, ws1, wq2, ws2):
    """Residual RMSNorm quant -> gate_up GEMM -> SiLU-clamp quant -> down GEMM."""
    q, s = fp8scale.rmsnorm_quant(x, norm_w, residual=residual, transpose_scale=True, ld_align=4)
    gate_up = gemm(q, s, wq1, ws1)
    q, s = fp8scale.silu_clamp_quant(gate_up, 7.0, transpose_scale=True, ld_align=4)
    return gemm(q, s, wq2, ws2)


@pytest.mark.skipif(not torch.cuda.is_available() or not hasattr(torch.nn.functional, "scaled_mm")
                    or torch.cuda.get_device_capability() != (9, 0),
                    reason="F.scaled_mm with BlockWise1x128 scales runs on sm_90")
def test_compiled_deepseek_block_dynamic_m_equals_eager():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    weights = _block_weights(11)
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(deepseek_block, fullgraph=True, dynamic=True, backend=counter)
    frames = {}
    for m in (7, 64, 1000, 1, 5, 12, 333, 4096):
        x = activations(m, 1024, torch.bfloat16, m)
        r_eager, r_compiled = activations(m, 1024, torch.bfloat16, m + 1), activations(m, 1024, torch.bfloat16, m + 1)
        eager = deepseek_block(x, r_eager, *weights)
        got = compiled(x, r_compiled, *weights)
        assert torch.equal(eager.view(torch.int16), got.view(torch.int16)), f"M = {m}"
        assert torch.equal(r_eager.view(torch.int16), r_compiled.view(torch.int16)), f"residual at M = {m}"
        frames[m] = counter.frame_count
    # M stays symbolic: whether M is a multiple of 4 (the consumer's padded row
    # count ld = align(M, 4) equals M or not: a guard of the GEMM's glue, the
    # producers alone compile once, test_compile_host.py) and M = 1 (torch's
    # 0/1 specialization) are the only graphs; no later M compiles.
    assert frames[1000] == frames[64] and frames[4096] == frames[1], frames


@pytest.mark.parametrize("mode", ["max-autotune-no-cudagraphs", "reduce-overhead"])
def test_compile_modes_equal_eager(mode):
    torch._dynamo.reset()
    x = activations(33, 7168, torch.bfloat16, 4)
    w = (torch.rand(7168, device="cuda") + 0.5).to(torch.bfloat16)
    gu = activations(33, 4096, torch.bfloat16, 5)
    compiled = torch.compile(Site(), fullgraph=True, dynamic=True, mode=mode)
    # reduce-overhead records a CUDA graph on a later call and replays it: new
    # inputs each call, so a replay that skipped the ops would leave stale bytes.
    for call in range(4):
        x.copy_(activations(33, 7168, torch.bfloat16, 40 + call))
        gu.copy_(activations(33, 4096, torch.bfloat16, 50 + call))
        got = compiled(x, w, gu)  # read before the next call, which replays into the same outputs
        eager = Site()(x, w, gu)
        for a, b in zip(eager, got):
            assert a.shape == b.shape and a.stride() == b.stride()
            assert torch.equal(a.view(torch.uint8) if a.dtype != torch.float32 else a,
                               b.view(torch.uint8) if b.dtype != torch.float32 else b), f"call {call}"


# --- the drop-in entry points (fp8scale.compat) give fp8scale's own bits ----------

def same_bits(a, b):
    """Equal dtype, shape, strides and bits (scales through the logical index)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    view = (lambda t: t) if a.dtype == torch.float32 else (lambda t: t.view(torch.uint8))
    assert torch.equal(view(a), view(b))


def storage_bits(t):
    """Every float of t's storage: the padding slots of a column-major scale included."""
    return torch.tensor([], dtype=torch.float32, device=t.device).set_(t.untyped_storage())


@pytest.mark.parametrize("m", (0, 1, 3, 17, 130))
@pytest.mark.parametrize("col, tma", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("fp8, ue8m0", [(torch.float8_e4m3fn, False), (torch.float8_e4m3fnuz, True)])
def test_vllm_and_sglang_dropins_equal_group_quant(m, col, tma, fp8, ue8m0):
    from fp8scale.compat import sgl_kernel, sglang, vllm

    x = activations(m, 1024, torch.bfloat16, 11)
    fmax = 224.0 if fp8 == torch.float8_e4m3fnuz else None  # the engines' e4m3fnuz range
    la = 4 if tma else 1
    q, s = fp8scale.group_quant(x, 128, transpose_scale=col, ld_align=la, fp8_dtype=fp8, scale_ue8m0=ue8m0, fmax=fmax)
    vq, vs = vllm.per_token_group_quant_fp8(x, 128, dtype=fp8, column_major_scales=col, tma_aligned_scales=tma,
                                            use_ue8m0=ue8m0)
    same_bits(vq, q), same_bits(vs, s)
    assert vs.stride() == s.stride() and torch.equal(storage_bits(vs), storage_bits(s))
    if fp8 == torch.float8_e4m3fn and not ue8m0:
        gq, gs = sglang.sglang_per_token_group_quant_fp8(x, 128, column_major_scales=col, scale_tma_aligned=tma)
        same_bits(gq, q), same_bits(gs, s)
        kq, ks = torch.empty_like(q), (col_major_out(m, 8, fp8scale.align_up(m, la))[1] if col else
                                       torch.empty_like(s))
        sgl_kernel.sgl_per_token_group_quant_8bit(x, kq, ks, 128, 1e-10, -448.0, 448.0)
        same_bits(kq, q), same_bits(ks, s)


def test_batched_rows_and_fused_silu_dropins():
    from fp8scale.compat import sgl_kernel, sglang, vllm

    x = activations(12, 512, torch.float16, 12)
    q, s = fp8scale.group_quant(x, 64)
    vq, vs = vllm.per_token_group_quant_fp8(x.view(3, 4, 512), 64)
    same_bits(vq.view(12, 512), q), same_bits(vs.view(12, 8), s)
    gate_up = activations(17, 2048, torch.bfloat16, 13)
    q, s = fp8scale.silu_clamp_quant(gate_up, 0.0, 128, transpose_scale=True, ld_align=4)
    gq, gs = sglang.sglang_per_token_group_quant_fp8(gate_up, 128, column_major_scales=True, scale_tma_aligned=True,
                                                     fuse_silu_and_mul=True)
    same_bits(gq, q), same_bits(gs, s)
    kq, ks = torch.empty_like(q), col_major_out(17, 8, 20)[1]
    sgl_kernel.sgl_per_token_group_quant_fp8(gate_up, kq, ks, 128, 1e-10, -448.0, 448.0, fuse_silu_and_mul=True)
    same_bits(kq, q), same_bits(ks, s)


@pytest.mark.parametrize("m", (0, 1, 5, 130))
@pytest.mark.parametrize("transpose, strided", [(False, False), (True, False), (True, True)])
def test_aiter_dropins_equal_fp8scale(m, transpose, strided):
    from fp8scale.compat import aiter

    x = activations(m, 2048, torch.bfloat16, 14)
    w = (torch.rand(2048, device="cuda") + 0.5).to(torch.bfloat16)
    res1 = activations(m, 2048, torch.bfloat16, 15)
    res1_before = res1.clone()
    residual = res1.clone()
    q, s, y = fp8scale.rmsnorm_quant(x, w, 1e-6, residual=residual, return_norm_out=True, transpose_scale=transpose)
    (aq, as_), out1, out2, out_res1 = aiter.fused_rms_fp8_group_quant(
        x, w, 1e-6, res1=res1, output_unquantized_inp1=True, transpose_scale=transpose, is_x_scale_strided=strided)
    logical = as_.view(16, m).t() if transpose and not strided else as_
    same_bits(aq, q), same_bits(logical, s), same_bits(out1, y), same_bits(out_res1, residual)
    assert out2 is None and torch.equal(res1, res1_before)  # aiter leaves res1 as it was
    gate_up = activations(m, 1024, torch.bfloat16, 16)
    q, s = fp8scale.silu_clamp_quant(gate_up, 7.0, 128, transpose_scale=transpose)
    cq, cs = aiter.fused_clamp_act_mul(gate_up, swiglu_limit=7.0, dtype_quant=torch.float8_e4m3fn,
                                       transpose_scale=transpose)
    same_bits(cq, q), same_bits(cs.view(4, m).t() if transpose else cs, s)


def packed_ue8m0_reference(s):
    """The bytes of DeepGEMM's packed UE8M0 tensor for (M, G) power-of-two
    scales, built with torch indexing: byte g % 4 of word (g / 4) * ld + m is
    the biased exponent of s(m, g), every other byte 0; ld = align(M, 4)."""
    m, g = s.shape
    words, ld = (g + 3) // 4, (m + 3) // 4 * 4
    exps = torch.zeros(m, words * 4, dtype=torch.uint8, device=s.device)
    exps[:, :g] = (s.contiguous().view(torch.int32) >> 23).to(torch.uint8)
    buf = torch.zeros(words, ld, 4, dtype=torch.uint8, device=s.device)
    buf[:, :m, :] = exps.view(m, words, 4).permute(1, 0, 2)
    return buf.flatten()


@pytest.mark.parametrize("m", (0, 1, 3, 4, 5, 17, 127, 128, 129, 1000))
@pytest.mark.parametrize("k", (128, 512, 640, 7168))
@pytest.mark.parametrize("col", (False, True))
def test_packed_ue8m0_materialize_equals_the_byte_reference(m, k, col):
    x = activations(m, k, torch.bfloat16, 21)
    _, s = fp8scale.group_quant(x, 128, transpose_scale=col, ld_align=4 if col else 1, scale_ue8m0=True)
    packed = fp8scale.materialize(s, layout="packed_ue8m0")
    words, ld = (k // 128 + 3) // 4, (m + 3) // 4 * 4
    assert packed.dtype == torch.int32 and packed.shape == (m, words)
    assert packed.numel() == 0 or packed.stride() == (1, ld)
    got = torch.tensor([], dtype=torch.uint8, device="cuda").set_(packed.untyped_storage())
    assert torch.equal(got, packed_ue8m0_reference(s))


def swizzled_128x4_reference(s):
    """The bytes of the 128 x 4 swizzled UE8M0 scales of cuBLASLt's
    VEC32_UE8M0 mode for (M, G) power-of-two scales, built with torch
    indexing as its documentation describes the layout: the exponents padded
    with 0 to align(M, 128) rows and align(G, 4) groups, cut into 128 x 4
    tiles stored in row-major tile order, row r and group c of a tile at byte
    (r % 32) * 16 + (r // 32) * 4 + c."""
    m, g = s.shape
    rows, cols = (m + 127) // 128 * 128, (g + 3) // 4 * 4
    exps = torch.zeros(rows, cols, dtype=torch.uint8, device=s.device)
    exps[:m, :g] = (s.contiguous().view(torch.int32) >> 23).to(torch.uint8)
    # [row tile][r // 32][r % 32][col tile][c] -> [row tile][col tile][r % 32][r // 32][c]
    tiles = exps.view(rows // 128, 4, 32, cols // 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.flatten()


def storage_bytes(t):
    """Every byte of t's storage (the padding slots included)."""
    return torch.tensor([], dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def producer_calls(x, group):
    """Each producer's function and arguments on x (M, K) bf16: group quant,
    SiLU-clamp quant of (M, 2 K), RMSNorm quant with a residual (restored
    before each call: the op updates it in place)."""
    w = activations(1, x.shape[1], torch.bfloat16, 29)[0].abs() + 0.5
    res = activations(x.shape[0], x.shape[1], torch.bfloat16, 31)
    return ((fp8scale.group_quant, lambda: ((x, group), {})),
            (fp8scale.silu_clamp_quant, lambda: ((torch.cat([x, x], 1), 7.0, group), {})),
            (fp8scale.rmsnorm_quant, lambda: ((x, w, 1e-6, group), {"residual": res.clone()})))


@pytest.mark.parametrize("m", (0, 1, 2, 3, 4, 5, 17, 127, 128, 129, 1000))
@pytest.mark.parametrize("k", (128, 512, 7168))
@pytest.mark.parametrize("group", (32, 128))
@pytest.mark.parametrize("layout", ("packed_ue8m0", "swizzled_128x4"))
def test_producers_into_exponent_layouts_equal_emission_and_materialize(m, k, group, layout):
    """Each producer's own exponent layout (scale_layout: group quant,
    SiLU-clamp quant, RMSNorm quant) is the bytes of its row-major UE8M0
    emission laid out by materialize, padding included, and the byte
    reference's; the fp8 bytes are the same."""
    x = activations(m, k, torch.bfloat16, 23)
    reference = packed_ue8m0_reference if layout == "packed_ue8m0" else swizzled_128x4_reference
    for fn, call in producer_calls(x, group):
        args, kwargs = call()
        q, s = fn(*args, scale_ue8m0=True, **kwargs)[:2]
        relaid = fp8scale.materialize(s, layout=layout)
        args, kwargs = call()
        dq, ds = fn(*args, scale_ue8m0=True, scale_layout=layout, **kwargs)[:2]
        same_bits(dq, q)
        assert ds.dtype == relaid.dtype and ds.shape == relaid.shape
        assert ds.numel() == 0 or ds.stride() == relaid.stride()
        assert torch.equal(storage_bytes(ds), storage_bytes(relaid)), fn.__name__
        assert torch.equal(storage_bytes(ds), reference(s)), fn.__name__


@pytest.mark.parametrize("m", (0, 1, 5, 130))
@pytest.mark.parametrize("fuse", (False, True))
def test_sglang_packed_dropin_equals_group_quant_and_materialize(m, fuse):
    from fp8scale.compat import sgl_kernel, sglang

    x = activations(m, 2560, torch.bfloat16, 22)
    if fuse:
        q, s = fp8scale.silu_clamp_quant(x, 0.0, 128, transpose_scale=True, ld_align=4, scale_ue8m0=True)
    else:
        q, s = fp8scale.group_quant(x, 128, transpose_scale=True, ld_align=4, scale_ue8m0=True)
    packed = fp8scale.materialize(s, layout="packed_ue8m0")
    gq, gs = sglang.sglang_per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True,
                                                     scale_ue8m0=True, fuse_silu_and_mul=fuse)
    same_bits(gq, q)
    assert gs.dtype == torch.int32 and gs.shape == packed.shape and torch.equal(gs, packed)
    out_q, out_s = torch.empty_like(q), torch.full_like(storage_bits(packed), float("nan")).view(torch.int32)
    out_s = out_s.as_strided(packed.shape, packed.stride())
    sgl_kernel.sgl_per_token_group_quant_8bit(x, out_q, out_s, 128, 1e-10, -448.0, 448.0, scale_ue8m0=True,
                                              fuse_silu_and_mul=fuse)
    same_bits(out_q, q)
    assert torch.equal(storage_bits(out_s).view(torch.int32), storage_bits(packed).view(torch.int32))
