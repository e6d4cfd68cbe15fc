"""Schemas, fake implementations and the bad-input messages: no GPU needed."""

import os

import pytest
import torch

import fp8scale
from conftest import needs_ops

pytestmark = needs_ops

BF16, F32, FN, FNUZ = torch.bfloat16, torch.float32, torch.float8_e4m3fn, torch.float8_e4m3fnuz


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def col_major(m, g, ld, device="meta"):
    return torch.empty((g, ld), dtype=F32, device=device).t()[:m]


def test_schemas():
    schemas = {n: str(getattr(torch.ops.fp8scale, n).default._schema) for n in
               ("group_quant", "silu_clamp_quant", "rmsnorm_quant", "materialize")}
    assert schemas["group_quant"].startswith("fp8scale::group_quant(Tensor x, Tensor(a!) q, Tensor(b!) scale, "
                                             "int group_size=128, bool scale_ue8m0=False")
    assert "Tensor(c!)? residual=None, Tensor(d!)? norm_out=None" in schemas["rmsnorm_quant"]
    assert "float limit=0." in schemas["silu_clamp_quant"]
    assert schemas["materialize"] == "fp8scale::materialize(Tensor src, Tensor(a!) dst) -> ()"
    for s in schemas.values():
        assert s.endswith("-> ()")  # out-variants: nothing returned, nothing aliased


@pytest.mark.parametrize("m, g", [(0, 5), (1, 1), (5, 4), (130, 57)])
def test_packed_ue8m0_materialize_on_meta(m, g):
    """DeepGEMM's packed UE8M0 layout: int32 (M, ceil(G / 4)), strides (1, align(M, 4))."""
    out = fp8scale.materialize(meta(m, g, dtype=F32), layout="PACKED_UE8M0")
    words, ld = (g + 3) // 4, (m + 3) // 4 * 4
    assert out.dtype == torch.int32 and out.shape == (m, words)
    if out.numel():
        assert out.stride() == (1, ld)
    torch.ops.fp8scale.materialize_packed_ue8m0(meta(m, g, dtype=F32).t().contiguous().t(), out)


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: fp8scale.materialize(meta(4, 8, dtype=F32), layout="swizzled"), ValueError,
         r"materialize: argument 'layout' = 'swizzled': expected 'column_major', 'packed_ue8m0' or 'swizzled_128x4'"),
        (lambda: torch.ops.fp8scale.materialize_swizzled_128x4(meta(4, 8, dtype=F32), meta(1024, dtype=torch.int8)),
         TypeError, r"materialize_swizzled_128x4: argument 'dst' has dtype torch.int8, expected torch.uint8"),
        # The ops take the swizzled bytes as uint8: torch 2.10's stable ABI cannot pass float8_e8m0fnu.
        (lambda: torch.ops.fp8scale.materialize_swizzled_128x4(meta(4, 8, dtype=F32),
                                                               meta(1024, dtype=torch.float8_e8m0fnu)),
         TypeError, r"argument 'dst' has dtype torch.float8_e8m0fnu, which the stable ABI of torch 2.10 cannot "
                    r"pass: the ops take swizzled UE8M0 scales as their bytes, scale.view\(torch.uint8\)"),
        (lambda: torch.ops.fp8scale.materialize_swizzled_128x4(meta(4, 8, dtype=F32), meta(512, dtype=torch.uint8)),
         ValueError, r"argument 'dst' has shape \(512,\), expected \(1024,\)"),
        (lambda: torch.ops.fp8scale.materialize_swizzled_128x4(meta(4, 8, dtype=F32),
                                                               meta(2048, dtype=torch.uint8)[::2]),
         ValueError, r"argument 'dst' must be contiguous, got strides \(2,\)"),
        (lambda: torch.ops.fp8scale.materialize_packed_ue8m0(meta(4, 8, dtype=F32), meta(4, 2, dtype=F32)),
         TypeError, r"materialize_packed_ue8m0: argument 'dst' has dtype torch.float32"),
        (lambda: torch.ops.fp8scale.materialize_packed_ue8m0(meta(5, 8, dtype=F32),
                                                             meta(2, 5, dtype=torch.int32).t()),
         ValueError, r"argument 'dst' has strides \(1, 5\): expected \(1, ld\) with ld >= align\(M, 4\)"),
        (lambda: torch.ops.fp8scale.materialize_packed_ue8m0(meta(5, 8, dtype=F32), meta(5, 3, dtype=torch.int32)),
         ValueError, r"argument 'dst' has shape \(5, 3\), expected \(5, 2\)"),
    ],
)
def test_packed_ue8m0_refusals_name_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


@pytest.mark.parametrize("m, g", [(0, 5), (1, 1), (5, 4), (130, 57)])
def test_swizzled_128x4_materialize_on_meta(m, g):
    """The 128 x 4 swizzled layout: 1-D float8_e8m0fnu of align(M, 128) * align(G, 4) bytes
    (the op takes them viewed as uint8)."""
    out = fp8scale.materialize(meta(m, g, dtype=F32), layout="SWIZZLED_128X4")
    assert out.dtype == torch.float8_e8m0fnu and out.shape == ((m + 127) // 128 * 128 * ((g + 3) // 4 * 4),)
    torch.ops.fp8scale.materialize_swizzled_128x4(meta(m, g, dtype=F32).t().contiguous().t(), out.view(torch.uint8))


def producers_into(layout, m, k, group):
    """(q, scale) of each producer writing `layout` for (M, K) outputs."""
    return (fp8scale.group_quant(meta(m, k), group, scale_ue8m0=True, scale_layout=layout),
            fp8scale.silu_clamp_quant(meta(m, 2 * k), 7.0, group, scale_ue8m0=True, scale_layout=layout.upper()),
            fp8scale.rmsnorm_quant(meta(m, k), meta(k), group_size=group, residual=meta(m, k), scale_ue8m0=True,
                                   scale_layout=layout)[:2])


@pytest.mark.parametrize("m, k", [(0, 512), (1, 128), (5, 640), (130, 7168)])
@pytest.mark.parametrize("group", (32, 128))
def test_producers_write_packed_ue8m0_words_on_meta(m, k, group):
    """scale_layout="packed_ue8m0": each producer's own int32 (M, ceil(G / 4))
    words, strides (1, align(M, 4)), and the ops' fakes take them."""
    words, ld = (k // group + 3) // 4, (m + 3) // 4 * 4
    for q, s in producers_into("packed_ue8m0", m, k, group):
        assert q.dtype == FN and q.shape == (m, k)
        assert s.dtype == torch.int32 and s.shape == (m, words)
        if s.numel():
            assert s.stride() == (1, ld)


@pytest.mark.parametrize("m, k", [(0, 512), (1, 128), (5, 640), (130, 7168)])
@pytest.mark.parametrize("group", (32, 128))
def test_producers_write_swizzled_128x4_bytes_on_meta(m, k, group):
    """scale_layout="swizzled_128x4": each producer's own 1-D float8_e8m0fnu
    tensor of align(M, 128) * align(G, 4) bytes, as F.scaled_mm's
    SWIZZLE_32_4_4 takes it."""
    for q, s in producers_into("swizzled_128x4", m, k, group):
        assert q.dtype == FN and q.shape == (m, k)
        assert s.dtype == torch.float8_e8m0fnu and s.shape == ((m + 127) // 128 * 128 * ((k // group + 3) // 4 * 4),)
        assert s.stride() == (1,)


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: fp8scale.group_quant(meta(4, 512), scale_layout="packed_ue8m0"), ValueError,
         r"group_quant: argument 'scale_ue8m0' must be True"),
        (lambda: fp8scale.group_quant(meta(4, 512), 64, scale_ue8m0=True, scale_layout="packed_ue8m0"), ValueError,
         r"group_quant: argument 'group_size' = 64: packed UE8M0 scales take groups of 32 or 128"),
        (lambda: fp8scale.group_quant(meta(4, 512, dtype=torch.float16), scale_ue8m0=True,
                                      scale_layout="packed_ue8m0"),
         TypeError, r"group_quant: argument 'x' has dtype torch.float16: packed UE8M0 scales"),
        (lambda: fp8scale.group_quant(meta(4, 512), scale_ue8m0=True, transpose_scale=True,
                                      scale_layout="packed_ue8m0"),
         ValueError, r"argument 'transpose_scale' does not apply to scale_layout='packed_ue8m0'"),
        (lambda: fp8scale.group_quant(meta(4, 512), scale_layout="swizzled"), ValueError,
         r"argument 'scale_layout' = 'swizzled': expected 'row_major', 'column_major', 'packed_ue8m0' or "
         r"'swizzled_128x4'"),
        (lambda: fp8scale.group_quant(meta(4, 512), scale_layout="swizzled_128x4"), ValueError,
         r"group_quant: argument 'scale_ue8m0' must be True: swizzled UE8M0 scales hold UE8M0 exponents"),
        (lambda: fp8scale.group_quant(meta(4, 512), scale_ue8m0=True, ld_align=4, scale_layout="swizzled_128x4"),
         ValueError, r"argument 'ld_align' does not apply to scale_layout='swizzled_128x4'"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), meta(512), group_size=64, scale_ue8m0=True,
                                        scale_layout="swizzled_128x4"),
         ValueError, r"rmsnorm_quant: argument 'group_size' = 64: swizzled UE8M0 scales take groups of 32 or 128"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512, dtype=F32), meta(512, dtype=F32), scale_ue8m0=True,
                                        scale_layout="packed_ue8m0"),
         TypeError, r"rmsnorm_quant: argument 'x' has dtype torch.float32: packed UE8M0 scales"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), meta(512), scale_ue8m0=True, fp8_dtype=FNUZ,
                                        scale_layout="swizzled_128x4"),
         TypeError, r"rmsnorm_quant: argument 'fp8_dtype' = torch.float8_e4m3fnuz: swizzled UE8M0 scales go with"),
        (lambda: torch.ops.fp8scale.rmsnorm_quant(meta(4, 512), meta(512), meta(4, 512, dtype=FN),
                                                  meta(512, dtype=torch.uint8)),
         ValueError, r"rmsnorm_quant: argument 'scale_ue8m0' must be True: swizzled UE8M0 scales"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=FN),
                                                meta(256, dtype=torch.uint8), 128, True),
         ValueError, r"group_quant: argument 'scale' has shape \(256,\), expected \(512,\)"),
        (lambda: torch.ops.fp8scale.silu_clamp_quant(meta(4, 1024), meta(4, 512, dtype=FN),
                                                     meta(4, 128, dtype=torch.uint8), 7.0, 128, True),
         ValueError, r"silu_clamp_quant: argument 'scale' must be 1-D"),
        (lambda: fp8scale.group_quant(meta(4, 512), scale_layout="column_major"), ValueError,
         r"argument 'scale_layout' = 'column_major' disagrees with transpose_scale=False"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=FN),
                                                meta(1, 4, dtype=torch.int32).t(), 128, False),
         ValueError, r"group_quant: argument 'scale_ue8m0' must be True"),
        (lambda: torch.ops.fp8scale.group_quant(meta(5, 512), meta(5, 512, dtype=FN),
                                                meta(1, 5, dtype=torch.int32).t(), 128, True),
         ValueError, r"group_quant: argument 'scale' has strides \(1, 5\): expected \(1, ld\)"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=torch.float8_e4m3fnuz),
                                                meta(1, 4, dtype=torch.int32).t(), 128, True),
         TypeError, r"group_quant: argument 'q' has dtype torch.float8_e4m3fnuz"),
        (lambda: fp8scale.silu_clamp_quant(meta(4, 1024), 7.0, 64, scale_ue8m0=True, scale_layout="packed_ue8m0"),
         ValueError, r"silu_clamp_quant: argument 'group_size' = 64: packed UE8M0 scales take groups of 32 or 128"),
        (lambda: torch.ops.fp8scale.silu_clamp_quant(meta(4, 1024, dtype=F32), meta(4, 512, dtype=FN),
                                                     meta(1, 4, dtype=torch.int32).t(), 7.0, 128, True),
         TypeError, r"silu_clamp_quant: argument 'x' has dtype torch.float32"),
    ],
)
def test_group_quant_packed_refusals_name_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_functions_elide_only_the_schema_defaults():
    """The functions leave out trailing op arguments equal to these constants:
    they must be the schemas' defaults."""
    defaults = {}
    for name in ("group_quant", "silu_clamp_quant", "rmsnorm_quant"):
        for a in getattr(torch.ops.fp8scale, name).default._schema.arguments:
            if a.has_default_value():
                defaults.setdefault(a.name, set()).add(a.default_value)
    assert defaults["group_size"] == {128} and defaults["eps"] == {fp8scale._EPS}
    assert defaults["norm_eps"] == {fp8scale._NORM_EPS} and defaults["residual"] == defaults["norm_out"] == {None}
    assert defaults["scale_ue8m0"] == defaults["enable_pdl"] == {False} and defaults["fmax"] == {0.0}


@pytest.mark.parametrize("m", [0, 1, 5, 130])
def test_fakes_accept_both_layouts_on_meta(m):
    x, q = meta(m, 512), meta(m, 512, dtype=FN)
    torch.ops.fp8scale.group_quant(x, q, meta(m, 4, dtype=F32))
    torch.ops.fp8scale.group_quant(x, q, col_major(m, 4, max(m, 1) + 3))
    torch.ops.fp8scale.silu_clamp_quant(meta(m, 1024), q, col_major(m, 4, m))
    torch.ops.fp8scale.rmsnorm_quant(x, meta(512), q, meta(m, 4, dtype=F32), x.clone(), None)
    torch.ops.fp8scale.materialize(meta(m, 4, dtype=F32), col_major(m, 4, m))
    torch.ops.fp8scale.group_quant(meta(m, 4, 128), meta(m, 4, 128, dtype=FNUZ), meta(m, 4, dtype=F32))


def test_shape_inference_under_fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(17, 7168, dtype=BF16, device="cuda" if torch.cuda.is_available() else "meta")
        q = torch.empty(17, 7168, dtype=FN, device=x.device)
        s = torch.empty(56, 20, dtype=F32, device=x.device).t()[:17]
        torch.ops.fp8scale.group_quant(x, q, s)
        assert s.shape == (17, 56) and s.stride() == (1, 20)


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 500), meta(4, 500, dtype=FN), meta(4, 3, dtype=F32)),
         ValueError, r"group_quant: argument 'x' has 500 columns, not a multiple of group_size = 128"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=FN), meta(4, 4, dtype=F32), 96),
         ValueError, r"argument 'group_size' = 96"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512), meta(4, 4, dtype=F32)),
         TypeError, r"argument 'q' has dtype torch.bfloat16"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512, dtype=torch.int8), meta(4, 512, dtype=FN),
                                                meta(4, 4, dtype=F32)),
         TypeError, r"argument 'x' has dtype torch.int8"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 256, dtype=FN), meta(4, 4, dtype=F32)),
         ValueError, r"argument 'q' has shape \(4, 256\), expected \(4, 512\)"),
        (lambda: torch.ops.fp8scale.group_quant(meta(5, 512), meta(5, 512, dtype=FN),
                                                meta(64, dtype=F32).as_strided((5, 4), (1, 4))),
         ValueError, r"argument 'scale' has strides \(1, 4\).*neither"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=FNUZ), meta(4, 4, dtype=F32),
                                                128, False, 448.0),
         ValueError, r"argument 'fmax' = 448.0: must be in \(0, 240\]"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=FN), meta(4, 4, dtype=F32),
                                                128, False, 0.0, 0.0),
         ValueError, r"argument 'eps'"),
        (lambda: torch.ops.fp8scale.silu_clamp_quant(meta(4, 1000), meta(4, 500, dtype=FN), meta(4, 4, dtype=F32)),
         ValueError, r"silu_clamp_quant: argument 'x' has 500 columns"),
        (lambda: torch.ops.fp8scale.rmsnorm_quant(meta(4, 512), meta(512, dtype=F32), meta(4, 512, dtype=FN),
                                                  meta(4, 4, dtype=F32)),
         TypeError, r"rmsnorm_quant: argument 'weight' has dtype torch.float32"),
        (lambda: torch.ops.fp8scale.rmsnorm_quant(meta(4, 512), meta(512), meta(4, 512, dtype=FN),
                                                  meta(4, 4, dtype=F32), meta(3, 512)),
         ValueError, r"argument 'residual' has shape \(3, 512\)"),
        (lambda: torch.ops.fp8scale.materialize(meta(4, 4, dtype=F32), meta(4, 4, dtype=F32)),
         ValueError, r"materialize: argument 'dst' has strides \(4, 1\): expected column-major"),
        (lambda: torch.ops.fp8scale.group_quant(torch.empty(4, 512, dtype=BF16), torch.empty(4, 512, dtype=FN),
                                                torch.empty(4, 4)),
         ValueError, r"group_quant: argument 'x' is on cpu: fp8scale ops run on CUDA tensors"),
        (lambda: fp8scale.group_quant(torch.empty(4, 512, dtype=BF16)),
         ValueError, r"group_quant: argument 'x' is on cpu"),
        (lambda: fp8scale.group_quant([1.0]), TypeError, r"argument 'x' must be a torch.Tensor, got list"),
        (lambda: fp8scale.group_quant(meta(4, 512), fp8_dtype=torch.float8_e5m2),
         TypeError, r"argument 'fp8_dtype'"),
        (lambda: fp8scale.group_quant(meta(4, 512), transpose_scale=True, ld_align=0),
         ValueError, r"argument 'ld_align' = 0"),
        (lambda: fp8scale.silu_clamp_quant(meta(4, 513)), ValueError, r"odd number of columns 513"),
        (lambda: torch.ops.fp8scale.silu_clamp_quant(meta(4, 1024), meta(4, 512, dtype=FN), meta(4, 4, dtype=F32),
                                                     float("nan")),
         ValueError, r"silu_clamp_quant: argument 'limit' is NaN"),
        (lambda: torch.ops.fp8scale.rmsnorm_quant(meta(4, 32768 + 128), meta(32768 + 128), meta(4, 32768 + 128, dtype=FN),
                                                  meta(4, 257, dtype=F32)),
         ValueError, r"rmsnorm_quant: argument 'x' has 32896 columns, more than the 32768"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 3, 96), meta(4, 3, 96, dtype=FN), meta(4, 2, dtype=F32), 64),
         ValueError, r"argument 'x' has head dim 96, not a multiple of group_size = 64"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=FN), meta(4, 4, dtype=F32),
                                                128, False, 0.0, 1e-45),
         ValueError, r"argument 'eps' = 1e-45: eps / fmax must be at least 2\^-126"),
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=FN), meta(4, 4, dtype=F32),
                                                128, False, 0.0, float("inf")),
         ValueError, r"argument 'eps' = inf: eps / fmax must be a finite fp32 number"),
        # Below the smallest fp32 the C++ parameter receives 0: "must be > 0", as on CUDA.
        (lambda: torch.ops.fp8scale.group_quant(meta(4, 512), meta(4, 512, dtype=FN), meta(4, 4, dtype=F32),
                                                128, False, 0.0, 1e-46),
         ValueError, r"argument 'eps' = 1e-46: must be > 0"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), "w"), TypeError,
         r"rmsnorm_quant: argument 'weight' must be a torch.Tensor, got str"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), meta(512, dtype=F32)), TypeError,
         r"rmsnorm_quant: argument 'weight' has dtype torch.float32, expected x's dtype torch.bfloat16"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), meta(512), residual=meta(4, 512, dtype=torch.float16)),
         TypeError, r"argument 'residual' has dtype torch.float16"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), meta(256)), ValueError,
         r"rmsnorm_quant: argument 'weight' has shape \(256,\), expected \(512,\)"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), meta(512), norm_eps=-1.0), ValueError,
         r"rmsnorm_quant: argument 'norm_eps' = -1.0: must be >= 0"),
        (lambda: fp8scale.group_quant(meta(4, 512), ld_align=4), ValueError,
         r"argument 'ld_align' applies to transpose_scale=True only"),
        (lambda: fp8scale.group_quant(meta(4, 512), fmax=500.0), ValueError,
         r"group_quant: argument 'fmax' = 500.0: must be in \(0, 448\]"),
        (lambda: fp8scale.group_quant(meta(4, 512), 64, eps=-1.0), ValueError, r"group_quant: argument 'eps'"),
        (lambda: fp8scale.silu_clamp_quant(meta(4, 1024), 7.0, 96), ValueError,
         r"silu_clamp_quant: argument 'group_size' = 96"),
        (lambda: fp8scale.emit_transposed(4, "cuBLASLt"), ValueError, r"argument 'consumer' = 'cuBLASLt'"),
        (lambda: fp8scale.group_quant(meta(4, 512), 128.0), ValueError, r"argument 'group_size' = 128.0"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), None), TypeError,
         r"argument 'weight' must be a torch.Tensor, got NoneType"),
        (lambda: fp8scale.rmsnorm_quant(meta(4, 512), meta(512), residual=[0.0]), TypeError,
         r"argument 'residual' must be a torch.Tensor, got list"),
        (lambda: torch.ops.fp8scale.rmsnorm_quant(meta(4, 512), meta(512), meta(4, 512, dtype=FN),
                                                  meta(4, 4, dtype=F32), None, meta(4, 256)),
         ValueError, r"argument 'norm_out' has shape \(4, 256\), expected \(4, 512\)"),
    ],
)
def test_bad_input_names_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_python_api_on_meta_gives_the_layouts():
    x = meta(5, 7168)
    q, s = fp8scale.group_quant(x, transpose_scale=True, ld_align=4)
    assert q.dtype == FN and q.shape == (5, 7168)
    assert s.shape == (5, 56) and s.stride() == (1, 8)
    q, s = fp8scale.group_quant(x)
    assert s.stride() == (56, 1)
    q, s = fp8scale.silu_clamp_quant(meta(3, 4096), 7.0, transpose_scale=True)
    assert q.shape == (3, 2048) and s.stride() == (1, 3)
    q, s, y = fp8scale.rmsnorm_quant(x, meta(7168), return_norm_out=True, fp8_dtype=FNUZ, fmax=224.0)
    assert q.dtype == FNUZ and y.shape == x.shape and y.dtype == x.dtype
    q, s = fp8scale.group_quant(meta(0, 7168), transpose_scale=True, ld_align=4)
    assert s.shape == (0, 56)


FLOOR = os.environ.get("FP8SCALE_DISPATCH_FLOOR", "")


@needs_ops
@pytest.mark.skipif(not FLOOR, reason="FP8SCALE_DISPATCH_FLOOR not set (the test build sets it)")
def test_dispatch_floor_has_the_ops_schemas():
    """benchmarks/bench_ops.py takes the empty ops of the dispatch-floor
    library as torch's dispatch cost of the producer ops: their schemas must
    be the same."""
    torch.ops.load_library(FLOOR)
    for name in ("group_quant", "silu_clamp_quant", "rmsnorm_quant"):
        ours = getattr(torch.ops.fp8scale, name).default._schema
        floor = getattr(torch.ops.fp8scale_floor, name).default._schema
        assert str(floor).replace("fp8scale_floor::", "fp8scale::") == str(ours)


def test_consumer_names_in_any_case():
    assert fp8scale.emit_transposed(1, "CUBLASLT_VEC128") is True
    assert fp8scale.consumer_scale_ld("DeepGEMM_TMA", 5) == 8
    assert fp8scale.emit_transposed(1, fp8scale.ScaleConsumer.BPRESHUFFLE_GFX95) is False


@pytest.mark.skipif(torch.cuda.is_available(), reason="what a machine without a GPU is told")
def test_no_gpu_messages_say_what_to_do():
    with pytest.raises(ValueError, match=r"argument 'x' is on cpu: fp8scale ops run on CUDA tensors "
                                         r"\(torch sees no GPU here; meta tensors"):
        fp8scale.group_quant(torch.zeros(4, 512, dtype=BF16))
    with pytest.raises(RuntimeError, match=r"detect_scale_consumer: no CUDA or ROCm device"):
        fp8scale.detect_scale_consumer()


def col_major_meta(m, g, ld):
    return torch.empty((g, ld), dtype=F32, device="meta").t()[:m]


OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("col_major", [False, True])
def test_opcheck_on_meta(col_major):
    """torch.library.opcheck of every op on meta tensors (the GPU run is
    test_gpu.test_opcheck): schema, autograd registration, the fake
    implementation and AOT dispatch with dynamic shapes."""
    m = 17
    s = col_major_meta(m, 4, 20) if col_major else meta(m, 4, dtype=F32)
    x, q = meta(m, 512), meta(m, 512, dtype=FN)
    torch.library.opcheck(torch.ops.fp8scale.group_quant.default, (x, q, s), test_utils=OPCHECK_TESTS)
    torch.library.opcheck(torch.ops.fp8scale.silu_clamp_quant.default, (meta(m, 1024), q, s, 7.0),
                          test_utils=OPCHECK_TESTS)
    torch.library.opcheck(torch.ops.fp8scale.rmsnorm_quant.default, (x, meta(512), q, s, meta(m, 512), meta(m, 512)),
                          test_utils=OPCHECK_TESTS)
    torch.library.opcheck(torch.ops.fp8scale.materialize.default, (meta(m, 4, dtype=F32), col_major_meta(m, 4, 20)),
                          test_utils=OPCHECK_TESTS)
    packed = meta(2, 20, dtype=torch.int32).t()[:m]  # (M, ceil(G / 4)) words, strides (1, align(M, 4))
    torch.library.opcheck(torch.ops.fp8scale.materialize_packed_ue8m0.default, (s, packed), test_utils=OPCHECK_TESTS)
    torch.library.opcheck(torch.ops.fp8scale.group_quant.default, (x, q, packed[:, :1], 128, True),
                          test_utils=OPCHECK_TESTS)
    torch.library.opcheck(torch.ops.fp8scale.silu_clamp_quant.default, (meta(m, 1024), q, packed[:, :1], 7.0, 128, True),
                          test_utils=OPCHECK_TESTS)
    torch.library.opcheck(torch.ops.fp8scale.rmsnorm_quant.default,
                          (x, meta(512), q, packed[:, :1], meta(m, 512), None, 1e-6, 128, True), test_utils=OPCHECK_TESTS)
    swizzled = meta(128 * 4, dtype=torch.uint8)  # align(M, 128) * align(G, 4) bytes, as the ops take them
    torch.library.opcheck(torch.ops.fp8scale.materialize_swizzled_128x4.default, (s, swizzled), test_utils=OPCHECK_TESTS)
    for op, args in ((torch.ops.fp8scale.group_quant, (x, q, swizzled, 128, True)),
                     (torch.ops.fp8scale.silu_clamp_quant, (meta(m, 1024), q, swizzled, 7.0, 128, True)),
                     (torch.ops.fp8scale.rmsnorm_quant, (x, meta(512), q, swizzled, meta(m, 512), None, 1e-6, 128, True))):
        torch.library.opcheck(op.default, args, test_utils=OPCHECK_TESTS)
