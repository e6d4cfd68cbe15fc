"""Scale layouts and the layout gate, as the C++ headers define them.

The rules here mirror include/fp8scale/layout_policy.hpp (the gate, the
consumers' ld, materialize's no-op cases) and python/csrc/tensor_args.hpp
(how a scale tensor's strides name its layout); tests/test_layout.py holds
them to the C++ behaviour on the GPU.
"""

from __future__ import annotations

import enum
from typing import Optional, Tuple

import torch


class ScaleConsumer(str, enum.Enum):
    """The block-scaled GEMM that reads the activation scales.

    ROW_MAJOR: reads (M, G) row-major (gfx942 blockscale GEMM, most Triton GEMMs).
    BPRESHUFFLE_GFX95: aiter's gemm_a8w8_blockscale_bpreshuffle on gfx950: [G][M], ld == M.
    CUBLASLT_VEC128: cuBLASLt VEC128_32F scales (sm_90, CUDA >= 12.9): [G][align(M, 4)];
        torch's F.scaled_mm with BlockWise1x128 scales is this consumer (its GEMM
        runs on align(M, 4) rows; examples/python/deepseek_v3_sites.py).
    DEEPGEMM_TMA: DeepGEMM-style TMA loads: [G][align(M, 4)].
    DEEPGEMM_SM100: DeepGEMM's SM100 FP8 GEMMs: packed UE8M0 int32 words,
        strides (1, align(M, 4)) (group_quant(scale_layout="packed_ue8m0")).
    MXFP8_SWIZZLED: Blackwell MXFP8 block-scaled MMA (cuBLASLt VEC32_UE8M0,
        CUTLASS): UE8M0 bytes in 128 x 4 tiles.
    """

    ROW_MAJOR = "row_major"
    BPRESHUFFLE_GFX95 = "bpreshuffle_gfx95"
    CUBLASLT_VEC128 = "cublaslt_vec128"
    DEEPGEMM_TMA = "deepgemm_tma"
    DEEPGEMM_SM100 = "deepgemm_sm100"
    MXFP8_SWIZZLED = "mxfp8_swizzled"


def _consumer(consumer) -> ScaleConsumer:
    """A ScaleConsumer, or its value or name in any case ("cublaslt_vec128",
    "CUBLASLT_VEC128")."""
    if isinstance(consumer, ScaleConsumer):
        return consumer
    try:
        return ScaleConsumer(consumer.lower() if isinstance(consumer, str) else consumer)
    except ValueError:
        names = ", ".join(repr(c.value) for c in ScaleConsumer)
        raise ValueError(f"fp8scale: argument 'consumer' = {consumer!r}: expected one of {names}") from None


def align_up(value: int, alignment: int) -> int:
    """The smallest multiple of `alignment` (>= 1) that is >= `value`."""
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 1:
        raise ValueError(f"fp8scale: argument 'ld_align' = {alignment!r}: must be an int >= 1")
    return (value + alignment - 1) // alignment * alignment


def consumer_scale_layout(consumer) -> str:
    """The layout `consumer` reads its scales in: "row_major",
    "column_major", "packed_ue8m0" or "swizzled_128x4". Keyed on the
    consumer, never the device (consumerScaleLayout of layout_policy.hpp)."""
    c = _consumer(consumer)
    if c is ScaleConsumer.ROW_MAJOR:
        return "row_major"
    if c is ScaleConsumer.DEEPGEMM_SM100:
        return "packed_ue8m0"
    if c is ScaleConsumer.MXFP8_SWIZZLED:
        return "swizzled_128x4"
    return "column_major"


def consumer_is_column_major(consumer) -> bool:
    """Whether `consumer` reads column-major float32 scales."""
    return consumer_scale_layout(consumer) == "column_major"


def consumer_scale_ld(consumer, m: int) -> int:
    """The ld `consumer` reads for `m` rows: m (bpreshuffle), align(m, 4)
    (cuBLASLt, DeepGEMM; the packed words of DeepGEMM on SM100), 0 where no
    ld applies (row-major, the MXFP8 tiles)."""
    c = _consumer(consumer)
    if c is ScaleConsumer.BPRESHUFFLE_GFX95:
        return m
    if c in (ScaleConsumer.CUBLASLT_VEC128, ScaleConsumer.DEEPGEMM_TMA, ScaleConsumer.DEEPGEMM_SM100):
        return align_up(m, 4)
    return 0


def emit_transposed(m: int, consumer) -> bool:
    """The layout gate: whether a producer feeding `consumer` should write its
    scales column-major itself (transpose_scale=True, ld_align from
    consumer_scale_ld). True when the consumer reads column-major and
    row-major bytes are not already its bytes: for m >= 2, and at m == 1 for
    consumers with a padded ld (cuBLASLt, DeepGEMM read ld = 4 there). False
    for a row-major consumer, for the exponent consumers (their producers
    write consumer_scale_layout() itself) and for m < 1. emitTransposed(consumer, m) of
    include/fp8scale/layout_policy.hpp; sglang's
    emit_transposed_bpreshuffle_scale is its BPRESHUFFLE_GFX95 case.
    """
    if not consumer_is_column_major(consumer):
        return False
    return m >= 2 or (m == 1 and consumer_scale_ld(consumer, m) != m)


def detect_scale_consumer(device: Optional[torch.device] = None) -> ScaleConsumer:
    """The consumer of float32 scales a device's default blockscale GEMM uses:
    gfx95x -> BPRESHUFFLE_GFX95; other AMD -> ROW_MAJOR; NVIDIA compute
    capability >= 9.0 -> DEEPGEMM_TMA (cuBLASLt reads the same buffer); older
    -> ROW_MAJOR. Never DEEPGEMM_SM100 or MXFP8_SWIZZLED: their UE8M0 scales
    are a choice the site makes by naming its GEMM.
    Raises RuntimeError where torch sees no GPU (name the consumer instead)."""
    if not torch.cuda.is_available():
        raise RuntimeError(
            "fp8scale.detect_scale_consumer: no CUDA or ROCm device is visible to torch "
            "(torch.cuda.is_available() is False); name the consumer, e.g. ScaleConsumer.DEEPGEMM_TMA"
        )
    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    if torch.version.hip is not None:
        arch = getattr(props, "gcnArchName", "")
        return ScaleConsumer.BPRESHUFFLE_GFX95 if arch.startswith("gfx95") else ScaleConsumer.ROW_MAJOR
    return ScaleConsumer.DEEPGEMM_TMA if props.major >= 9 else ScaleConsumer.ROW_MAJOR


def scale_layout(scale: torch.Tensor) -> Tuple[str, int]:
    """How the ops read a (M, G) float32 scale tensor: ("row_major", ld) for
    strides (ld, 1) with ld >= G, ("column_major", ld) for strides (1, ld)
    with ld >= M (padding slots [M, ld) of each group are then written 0).
    Strides (1, 1), where both readings hold (M <= 1 and G <= 1: the same
    bytes), read as row-major, as do the strides of a single row. Raises
    ValueError for any other strides."""
    if scale.dim() != 2:
        raise ValueError(f"fp8scale: argument 'scale' must be 2-D (M, G), got shape {tuple(scale.shape)}")
    m, g = scale.shape
    s0, s1 = scale.stride()
    if s1 == 1 and (s0 >= g or m <= 1):
        return "row_major", (g if m <= 1 else s0)
    if s0 == 1 and s1 >= m:
        return "column_major", s1
    raise ValueError(
        f"fp8scale: argument 'scale' has strides {(s0, s1)} for shape {(m, g)}: neither row-major (ld, 1) "
        f"with ld >= G nor column-major (1, ld) with ld >= M"
    )


def new_scale(m: int, g: int, transpose_scale: bool, ld_align: int, device) -> torch.Tensor:
    """An uninitialized (m, g) float32 scale tensor: row-major (strides (g, 1)),
    or column-major with strides (1, ld), ld = align(m, ld_align), over a
    [g, ld] buffer of its own (the producer writes the padding slots).

    Sizes go to torch.empty as separate arguments and strides to
    torch.empty_strided: a size tuple costs torch.empty's argument parser
    about 1 us more per call. The branch is on ld_align, never on m, so a
    compiled caller with a dynamic M does not guard on M's alignment."""
    if not transpose_scale:
        if ld_align != 1:
            raise ValueError("fp8scale: argument 'ld_align' applies to transpose_scale=True only")
        return torch.empty(m, g, dtype=torch.float32, device=device)
    if ld_align == 1:  # ld == m: the strided tensor's storage is exactly the [g, m] block
        return torch.empty_strided((m, g), (1, m), dtype=torch.float32, device=device)
    ld = align_up(m, ld_align)
    return torch.empty(g * ld, dtype=torch.float32, device=device).as_strided((m, g), (1, ld))


def new_packed_ue8m0(m: int, g: int, device) -> torch.Tensor:
    """An uninitialized packed UE8M0 tensor for (m, g) scales: int32
    (m, ceil(g / 4)) with strides (1, align(m, 4)) over ceil(g / 4) * ld words
    (DeepGEMM's layout; the relayout writes its padding bytes)."""
    words, ld = (g + 3) // 4, (m + 3) // 4 * 4
    return torch.empty(words * ld, dtype=torch.int32, device=device).as_strided((m, words), (1, ld))


def swizzled_128x4_bytes(m: int, g: int) -> int:
    """The bytes of the swizzled UE8M0 scales of (m, g) exponents:
    align(m, 128) * align(g, 4), whole 128 x 4 tiles (the C++
    Swizzled128x4::requiredSpan)."""
    return align_up(m, 128) * align_up(g, 4)


def new_swizzled_128x4(m: int, g: int, device) -> torch.Tensor:
    """An uninitialized swizzled UE8M0 tensor for (m, g) scales: 1-D
    float8_e8m0fnu of swizzled_128x4_bytes(m, g) bytes, the 128 x 4 tiles of
    cuBLASLt's VEC32_UE8M0 mode and F.scaled_mm's SwizzleType.SWIZZLE_32_4_4
    (the writer fills its padding bytes)."""
    return torch.empty(swizzled_128x4_bytes(m, g), dtype=torch.float8_e8m0fnu, device=device)


def same_bytes_as_column_major(scale: torch.Tensor, ld: int) -> bool:
    """Whether `scale` already addresses every s(m, g) where ColMajor{ld} does,
    with no padding slot to fill (materialize's no-op; the C++
    detail::sameBytesAsColMajor)."""
    layout, cur = scale_layout(scale)
    m, g = scale.shape
    if layout == "column_major":
        return cur == ld
    if g == 0:
        return True
    # Row-major bytes of 2+ rows are column-major bytes only for one group of
    # unit row stride; asked first, so that a compiled caller guards on M's
    # alignment only where the answer depends on it.
    if m >= 2 and not (g == 1 and scale.stride(0) == 1):
        return False
    return ld == m
