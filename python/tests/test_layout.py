"""The layout rules and the gate, on the host (no ops, no GPU)."""

import pytest
import torch

import fp8scale
from fp8scale import ScaleConsumer as C
from fp8scale import _layout


@pytest.mark.parametrize(
    "consumer, m, ld, gate",
    [
        (C.ROW_MAJOR, 5, 0, False),
        (C.BPRESHUFFLE_GFX95, 0, 0, False),
        (C.BPRESHUFFLE_GFX95, 1, 1, False),  # one row: the same bytes either way
        (C.BPRESHUFFLE_GFX95, 2, 2, True),
        (C.CUBLASLT_VEC128, 0, 0, False),
        (C.CUBLASLT_VEC128, 1, 4, True),  # ld = 4: padding slots row-major lacks
        (C.CUBLASLT_VEC128, 5, 8, True),
        (C.DEEPGEMM_TMA, 17, 20, True),
        ("deepgemm_tma", 4, 4, True),
        (C.DEEPGEMM_SM100, 17, 20, False),  # packed words: the producer writes them itself
        (C.MXFP8_SWIZZLED, 17, 0, False),
    ],
)
def test_gate_and_consumer_ld(consumer, m, ld, gate):
    assert fp8scale.consumer_scale_ld(consumer, m) == ld
    assert fp8scale.emit_transposed(m, consumer) is gate


@pytest.mark.parametrize(
    "consumer, layout",
    [(C.ROW_MAJOR, "row_major"), (C.BPRESHUFFLE_GFX95, "column_major"), (C.CUBLASLT_VEC128, "column_major"),
     (C.DEEPGEMM_TMA, "column_major"), ("DEEPGEMM_SM100", "packed_ue8m0"), (C.MXFP8_SWIZZLED, "swizzled_128x4")],
)
def test_each_consumer_reads_one_layout(consumer, layout):
    """The layout is keyed on the consumer (layout_policy.hpp's consumerScaleLayout)."""
    assert fp8scale.consumer_scale_layout(consumer) == layout
    assert fp8scale.consumer_is_column_major(consumer) is (layout == "column_major")


def test_unknown_consumer_is_named():
    with pytest.raises(ValueError, match="argument 'consumer' = 'cutlass'"):
        fp8scale.emit_transposed(4, "cutlass")


@pytest.mark.parametrize("m", [0, 1, 2, 5, 17])
@pytest.mark.parametrize("ld_align", [1, 4])
def test_column_major_scale_is_a_view_of_its_buffer(m, ld_align):
    g = 3
    ld = _layout.align_up(m, ld_align)
    s = _layout.new_scale(m, g, True, ld_align, "cpu")
    assert s.shape == (m, g)
    if m > 0:
        assert s.stride() == (1, ld)
        assert fp8scale.scale_layout(s) == ("column_major", ld) or (m == 1 and ld == 1)
    assert s.untyped_storage().nbytes() == g * ld * 4


def test_row_major_scale():
    s = _layout.new_scale(5, 3, False, 1, "cpu")
    assert s.stride() == (3, 1)
    assert fp8scale.scale_layout(s) == ("row_major", 3)
    with pytest.raises(ValueError, match="ld_align"):
        _layout.new_scale(5, 3, False, 4, "cpu")


def test_ambiguous_strides_read_as_row_major():
    # M == 1, G == 1: both readings hold and address the same float.
    s = torch.empty(1, 1).as_strided((1, 1), (1, 1))
    assert fp8scale.scale_layout(s) == ("row_major", 1)
    # M == 1 of a column-major buffer with ld = 4: column-major, padding written.
    s = torch.empty(3, 4).t()[:1]
    assert fp8scale.scale_layout(s) == ("column_major", 4)


def test_strides_of_neither_layout_are_refused():
    s = torch.empty(6, 8)[:, ::2]  # strides (8, 2)
    with pytest.raises(ValueError, match=r"strides \(8, 2\).*neither row-major"):
        fp8scale.scale_layout(s)
    s = torch.empty(2, 8).t()[:5]  # column-major, ld 8 >= 5: fine
    assert fp8scale.scale_layout(s) == ("column_major", 8)


@pytest.mark.parametrize(
    "shape, strides, ld, same",
    [
        ((5, 3), (1, 5), 5, True),  # already ColMajor{5}
        ((5, 3), (1, 8), 5, False),  # another ld
        ((1, 3), (3, 1), 1, True),  # one row, ld == 1
        ((1, 3), (3, 1), 4, False),  # one row, padding slots to write
        ((5, 1), (1, 1), 5, True),  # one group, unit row stride
        ((5, 3), (3, 1), 5, False),
        ((0, 3), (3, 1), 0, True),
        ((0, 3), (3, 1), 4, False),
    ],
)
def test_materialize_no_op_rules(shape, strides, ld, same):
    s = torch.empty(64).as_strided(shape, strides)
    assert fp8scale.same_bytes_as_column_major(s, ld) is same


def test_materialize_returns_its_input_where_the_bytes_agree():
    s = _layout.new_scale(5, 3, True, 1, "cpu")
    assert fp8scale.materialize(s) is s
    one = torch.empty(1, 3)
    assert fp8scale.materialize(one) is one
