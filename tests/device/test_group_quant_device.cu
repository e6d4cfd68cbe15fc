// Group quant on the GPU: the TRANSPOSE_SCALE contract, bit-exactness against
// the host reference, head-major input, argument errors and > 2^31 elements.
#include <gtest/gtest.h>

#include "producer_harness.cuh"

namespace fp8scale::test {
namespace {

template <class C>
class GroupQuantDevice : public DeviceTest {};
TYPED_TEST_SUITE(GroupQuantDevice, AllCombos, ComboNames);

/// One group-quant case: the TRANSPOSE_SCALE contract with column-major
/// ld = `ld` (contractLd(M) when -1), and the host reference bit for bit.
template <class C>
void runGroupQuantCase(index_t M, index_t K, int groupSize, unsigned seed, index_t ld = -1) {
  using In = typename C::In;
  using Format = typename C::Format;
  if (ld < 0) ld = contractLd(M);
  SCOPED_TRACE(::testing::Message() << "M=" << M << " K=" << K << " group=" << groupSize << " ld=" << ld);
  const auto x = makeActivations<In>(M, K, K, seed, Format::kMax);
  DeviceBuffer<In> dx(M * K + 8);
  std::vector<In> padded = x;
  padded.resize(M * K + 8, fromF<In>(0.0f));
  dx.upload(padded);
  QuantOptions opt;
  opt.rule = C::kRule;
  opt.groupSize = groupSize;
  const auto in = GroupQuantInput<In>::matrix(dx.get(), M, K, K);
  const ContractOutput got = checkTransposeContract<Format>(M, K, groupSize, ld, [&](auto q, auto scale) {
    return groupQuant<Format>(in, q, scale, opt, nullptr);
  });

  // Pure group quant equals the host reference bit for bit.
  const index_t G = K / groupSize;
  std::vector<std::uint8_t> q(M * K);
  std::vector<float> s(M * G);
  ASSERT_TRUE((reference::groupQuant<Format, typename C::Rule>(x.data(), M, K, K, groupSize,
                                                                Fp8Matrix<Format>{q.data(), M, K, K},
                                                                rowMajorView(s.data(), M, G).value())));
  std::size_t qDiff = 0;
  for (std::size_t i = 0; i < q.size(); ++i) qDiff += q[i] != got.q[i];
  EXPECT_EQ(qDiff, 0u) << "fp8 bytes differ from the host reference";
  EXPECT_EQ(countBitDiffs(s, got.rowMajorScale), 0u) << "scales differ from the host reference";
}

TYPED_TEST(GroupQuantDevice, TransposedEmitMatchesMaterializedAndHostReferenceBitForBit) {
  for (index_t M : kContractRows)
    for (index_t K : {128, 512, 2304, 7168}) runGroupQuantCase<TypeParam>(M, K, 128, static_cast<unsigned>(M * 31 + K));
}

// Groups of 32 and 64 on both launch shapes: small grids (fewer blocks than
// SMs: one 16-byte vector a thread) and M = 1000 (256-thread blocks of two).
TYPED_TEST(GroupQuantDevice, SmallerGroupsFollowTheSameContract) {
  for (int groupSize : {32, 64})
    for (index_t M : {1, 3, 17, 1000})
      for (index_t K : {512, 2304}) runGroupQuantCase<TypeParam>(M, K, groupSize, static_cast<unsigned>(M + K));
}

// Both launch shapes on either side of the small-grid boundary of this
// device (the launcher picks by the device's SM count), at K = 7168 and at
// groups of 128 and 32.
TYPED_TEST(GroupQuantDevice, BothSidesOfTheSmallGridBoundary) {
  using In = typename TypeParam::In;
  for (int groupSize : {128, 32})
    for (index_t M : smallGridBoundaryRows<In>(7168 / groupSize, groupSize))
      runGroupQuantCase<TypeParam>(M, 7168, groupSize, static_cast<unsigned>(M * 3 + groupSize));
}

// The kernel whose blocks loop over row tiles (grids above two waves of the
// device: M = 4096 at K = 7168 on any GPU of up to 170 SMs), with column-major
// ld = M (no padding tile) and ld > M (the block whose loop reaches the
// padding tile writes it). Also with groups of 32 and 64 (more lanes' slices
// a group tile, other tiles).
TYPED_TEST(GroupQuantDevice, RowLoopingKernelWithAndWithoutScalePadding) {
  // ld = M + 20: more padding slots a column than the padding tile has
  // threads a column, so they loop.
  for (index_t ld : {4096, 4099, 4116}) runGroupQuantCase<TypeParam>(4096, 7168, 128, static_cast<unsigned>(ld), ld);
  for (int groupSize : {32, 64}) runGroupQuantCase<TypeParam>(4095, 7168, groupSize, 7u, 4096);
}

// The padding tile of the block-per-tile kernels (one block per group
// tile, past the last row tile): the small grid (M = 2 and 3,
// 128-thread blocks) and a block per row tile (M = 130 and 129, 256
// threads), with two slots a column (ld = align(M, 4) at M % 4 == 2, which
// the contract's M list lacks) and with padding wider than a block
// (ld - M = 300); at K = 7296 (57 groups) the last group tile is partial, so
// its padding block must stop at the last column.
TYPED_TEST(GroupQuantDevice, PaddingTileWritesEverySlot) {
  for (index_t K : {7168, 7296}) {
    for (index_t M : {2, 130}) runGroupQuantCase<TypeParam>(M, K, 128, static_cast<unsigned>(M), alignUp(M, 4));
    for (index_t M : {3, 129}) runGroupQuantCase<TypeParam>(M, K, 128, static_cast<unsigned>(M), M + 300);
  }
  // Groups of 32 / 64 with an odd group count (229 / 115: a partial last
  // group tile whatever the tile), on the small grid (M = 6) and on
  // 256-thread blocks (M = 130).
  for (index_t M : {6, 130}) {
    runGroupQuantCase<TypeParam>(M, 32 * 229, 32, 11u, alignUp(M, 4));
    runGroupQuantCase<TypeParam>(M, 64 * 115, 64, 13u, alignUp(M, 4));
  }
}

class GroupQuantDeviceShapes : public DeviceTest {};

// The looping kernel on a grid of one block along the rows (what the
// launcher plans on a device with few SMs, or for very many groups a row),
// with a partial last row tile (M = 41: tiles of 8 rows, the sixth holds
// one) and more padding slots a column than that tile has rows: the threads
// past the rows of the partial tile write their slots of the padding tile,
// the next tile their block visits. Groups of 32 (two lanes a group), so a
// column's slots span 5 (ld = M + 9) or all 8 (ld = M + 40, looping) rows
// of the padding tile.
TEST_F(GroupQuantDeviceShapes, LoopingKernelOnOneBlockAlongTheRowsWritesEveryPaddingSlot) {
  using Policy = GroupTilePolicy<BFloat16>;
  constexpr int kGroup = 32;
  const index_t M = 41, K = kGroup * 40, G = K / kGroup;
  const auto x = makeActivations<BFloat16>(M, K, K, 23u, E4M3FN::kMax);
  DeviceBuffer<BFloat16> dx(x.size());
  dx.upload(x);
  QuantOptions opt;
  opt.groupSize = kGroup;
  const auto in = GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K);
  for (index_t ld : {M + 9, M + 40}) {
    SCOPED_TRACE(::testing::Message() << "ld=" << ld);
    const ContractOutput got = checkTransposeContract<E4M3FN>(M, K, kGroup, ld, [&](auto q, auto scale) {
      using Layout = typename decltype(scale)::layout_type;
      if constexpr (!Layout::kColumnMajor) {
        return groupQuant<E4M3FN>(in, q, scale, opt, nullptr);
      } else {
        // targetBlocks 1: rowTileBlocks caps the row-tile axis at one block.
        const detail::GroupTileGrid grid = detail::groupTileGrid("test", true, M, G, kGroup, Policy::kThreads,
                                                                 Policy::kElems, 1, 0, Policy::kSectorScales);
        EXPECT_TRUE(grid.status.isOk());
        EXPECT_EQ(grid.gridX, 1);
        EXPECT_EQ(grid.tileRows, 8);
        detail::groupQuantKernel<BFloat16, E4M3FN, ScaleFp32, kGroup, ColMajor, Policy::kElems, /*kLoop*/ true,
                                 /*kPadding*/ true>
            <<<dim3(1, static_cast<unsigned>(grid.gridY)), Policy::kThreads>>>(
                in, q, scale, E4M3FN::kMax, opt.eps, grid.tileRows, grid.tileGroups, false);
        EXPECT_EQ(deviceLastError(), kDeviceSuccess);
        return Result<QuantizedTensor<E4M3FN, ColMajor>>(QuantizedTensor<E4M3FN, ColMajor>{q, scale, kGroup});
      }
    });
    std::vector<std::uint8_t> q(M * K);
    std::vector<float> s(M * G);
    ASSERT_TRUE((reference::groupQuant<E4M3FN, ScaleFp32>(x.data(), M, K, K, kGroup,
                                                           Fp8Matrix<E4M3FN>{q.data(), M, K, K},
                                                           rowMajorView(s.data(), M, G).value())));
    EXPECT_TRUE(q == got.q);
    EXPECT_EQ(countBitDiffs(s, got.rowMajorScale), 0u);
  }
}

// The MLA o_proj input: [M, H, D] with padded token and head strides.
TEST_F(GroupQuantDeviceShapes, HeadMajorInputEqualsItsDenseCopy) {
  const index_t M = 17, H = 16, D = 128, headStride = D + 32, tokenStride = H * headStride + 64, K = H * D;
  const auto x = makeActivations<BFloat16>(M, tokenStride, tokenStride, 5, 448.0f);
  std::vector<BFloat16> dense(M * K);
  for (index_t m = 0; m < M; ++m)
    for (index_t h = 0; h < H; ++h)
      for (index_t d = 0; d < D; ++d) dense[m * K + h * D + d] = x[m * tokenStride + h * headStride + d];
  DeviceBuffer<BFloat16> dx(x.size());
  dx.upload(x);
  QuantOptions opt;
  const auto in = GroupQuantInput<BFloat16>::headMajor(dx.get(), M, H, D, tokenStride, headStride);
  const ContractOutput got = checkTransposeContract<E4M3FN>(M, K, 128, alignUp(M, 4), [&](auto q, auto scale) {
    return groupQuant<E4M3FN>(in, q, scale, opt, nullptr);
  });
  std::vector<std::uint8_t> q(M * K);
  std::vector<float> s(M * (K / 128));
  ASSERT_TRUE((reference::groupQuant<E4M3FN, ScaleFp32>(dense.data(), M, K, K, 128,
                                                         Fp8Matrix<E4M3FN>{q.data(), M, K, K},
                                                         rowMajorView(s.data(), M, K / 128).value())));
  EXPECT_TRUE(q == got.q);
  EXPECT_EQ(countBitDiffs(s, got.rowMajorScale), 0u);
}

// sglang's DeepSeek o_proj input: the batched attention output [H, M, D]
// viewed as [M, H, D] (tokenStride = D, headStride = M * D), no copy.
TEST_F(GroupQuantDeviceShapes, TransposedHeadMajorInputEqualsItsDenseCopy) {
  for (index_t M : {1, 17, 129, 1000}) {  // 1000: the 256-thread kernel, two vectors a thread
    const index_t H = 16, D = 128, K = H * D;
    const auto hmd = makeActivations<BFloat16>(H * M, D, D, static_cast<unsigned>(M), 448.0f);  // [H, M, D]
    std::vector<BFloat16> dense(M * K);
    for (index_t m = 0; m < M; ++m)
      for (index_t h = 0; h < H; ++h)
        for (index_t d = 0; d < D; ++d) dense[m * K + h * D + d] = hmd[(h * M + m) * D + d];
    DeviceBuffer<BFloat16> dx(hmd.size());
    dx.upload(hmd);
    QuantOptions opt;
    opt.rule = ScaleRule::kUE8M0;
    const auto in = GroupQuantInput<BFloat16>::headMajor(dx.get(), M, H, D, D, M * D);
    const ContractOutput got = checkTransposeContract<E4M3FN>(M, K, 128, alignUp(M, 4), [&](auto q, auto scale) {
      return groupQuant<E4M3FN>(in, q, scale, opt, nullptr);
    });
    std::vector<std::uint8_t> q(M * K);
    std::vector<float> s(M * (K / 128));
    ASSERT_TRUE((reference::groupQuant<E4M3FN, ScaleUE8M0>(dense.data(), M, K, K, 128,
                                                            Fp8Matrix<E4M3FN>{q.data(), M, K, K},
                                                            rowMajorView(s.data(), M, K / 128).value())));
    EXPECT_TRUE(q == got.q) << "M=" << M;
    EXPECT_EQ(countBitDiffs(s, got.rowMajorScale), 0u) << "M=" << M;
  }
}

// M == 0 with a column-major view of ld > 0 (a graph's preallocated buffer):
// every slot is padding, written by the padding tile (the only work launched).
TEST_F(GroupQuantDeviceShapes, EmptyBatchClearsAPaddedColumnMajorBuffer) {
  const index_t G = 56, ld = 8;
  DeviceBuffer<float> ds(G * ld);
  ds.poison(kGarbage);
  QuantOptions opt;
  auto r = groupQuant<E4M3FN>(GroupQuantInput<BFloat16>::matrix(nullptr, 0, 7168, 7168),
                              Fp8Matrix<E4M3FN>{nullptr, 0, 7168, 7168}, colMajorView(ds.get(), 0, G, ld).value(), opt,
                              nullptr);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  for (float v : ds.download()) ASSERT_EQ(v, 0.0f);
}

TEST_F(GroupQuantDeviceShapes, BadArgumentsAreRefusedByNameAndNothingRuns) {
  const index_t M = 4, K = 512;
  DeviceBuffer<BFloat16> dx(M * (K + 8) + 8);
  DeviceBuffer<std::uint8_t> dq(M * K + 32);
  DeviceBuffer<float> ds(M * 4);
  dq.poison(kGarbage);
  QuantOptions opt;
  auto run = [&](GroupQuantInput<BFloat16> in, Fp8Matrix<E4M3FN> q, auto scale, QuantOptions o) {
    return groupQuant<E4M3FN>(in, q, scale, o, nullptr).status();
  };
  const Fp8Matrix<E4M3FN> q{dq.get(), M, K, K};
  const auto sv = rowMajorView(ds.get(), M, 4).value();
  // A row stride whose rows start off 16-byte boundaries.
  Status st = run(GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K + 1), q, sv, opt);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned);
  EXPECT_STREQ(st.argument(), "ldx");
  // An input pointer off a 16-byte boundary.
  st = run(GroupQuantInput<BFloat16>::matrix(dx.get() + 1, M, K, K), q, sv, opt);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned);
  EXPECT_STREQ(st.argument(), "x");
  // A scale view whose ld is below its layout's minimum (built unchecked).
  st = run(GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K), q,
           ScaleView<float, ColMajor>::fromValidated(ds.get(), M, 4, ColMajor{M - 1}), opt);
  EXPECT_EQ(st.code(), StatusCode::kLdTooSmall);
  EXPECT_STREQ(st.argument(), "scale");
  // An output pointer with another alignment than the input's: refused by
  // contract at any M (q must allow the widest per-thread store, 16 bytes for
  // 16-bit input, though this small shape would run 8-byte stores).
  st = run(GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K), Fp8Matrix<E4M3FN>{dq.get() + 8, M, K, K}, sv, opt);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned);
  EXPECT_STREQ(st.argument(), "q");
  // K not a multiple of the group size.
  st = run(GroupQuantInput<BFloat16>::matrix(dx.get(), M, 500, K), Fp8Matrix<E4M3FN>{dq.get(), M, 500, K},
           rowMajorView(ds.get(), M, 3).value(), opt);
  EXPECT_EQ(st.code(), StatusCode::kInvalidShape);
  EXPECT_STREQ(st.argument(), "K");
  // Unsupported group size, fmax past the format's max.
  QuantOptions bad = opt;
  bad.groupSize = 256;
  EXPECT_EQ(run(GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K), q, rowMajorView(ds.get(), M, 2).value(), bad)
                .code(),
            StatusCode::kUnsupportedGroupSize);
  bad = opt;
  bad.fmax = 500.0f;
  EXPECT_STREQ(run(GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K), q, sv, bad).argument(), "fmax");
  // A head dim that would let a group straddle two heads.
  st = run(GroupQuantInput<BFloat16>::headMajor(dx.get(), M, 4, 96, 4 * 96, 96), Fp8Matrix<E4M3FN>{dq.get(), M, 384, K},
           rowMajorView(ds.get(), M, 3).value(), opt);
  EXPECT_STREQ(st.argument(), "headDim");
  // M == 0 is valid and launches nothing.
  st = run(GroupQuantInput<BFloat16>::matrix(nullptr, 0, K, K), Fp8Matrix<E4M3FN>{nullptr, 0, K, K},
           rowMajorView<float>(nullptr, 0, 4).value(), opt);
  EXPECT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(runtime::deviceSynchronize(), kDeviceSuccess);
  for (auto b : dq.download()) ASSERT_EQ(b, kGarbage) << "a refused call wrote output";
}

// 64-bit indexing: with M * K > 2^31 elements, the last row is quantized
// exactly like the same row alone.
TEST_F(GroupQuantDeviceShapes, LargeTensorLastRowEqualsTheRowAlone) {
  const index_t K = 7168, M = (index_t{1} << 31) / K + 2;  // 299595 rows: 2,147,496,960 > 2^31 elements
  ASSERT_GT(M * K, index_t{1} << 31);
  DeviceBuffer<BFloat16> dx(M * K);
  DeviceBuffer<std::uint8_t> dq(M * K);
  DeviceBuffer<float> ds(M * 56);
  ASSERT_NE(dx.get(), nullptr);
  ASSERT_NE(dq.get(), nullptr);
  FP8SCALE_DEVICE_CHECK(runtime::memset(dx.get(), 0, M * K * sizeof(BFloat16)));
  const auto row = makeActivations<BFloat16>(1, K, K, 77, 448.0f);
  FP8SCALE_DEVICE_CHECK(runtime::memcpy(dx.get() + (M - 1) * K, row.data(), K * 2, runtime::Copy::HostToDevice));
  QuantOptions opt;
  auto all = groupQuant<E4M3FN>(GroupQuantInput<BFloat16>::matrix(dx.get(), M, K, K),
                                Fp8Matrix<E4M3FN>{dq.get(), M, K, K}, colMajorView(ds.get(), M, 56).value(), opt,
                                nullptr);
  ASSERT_TRUE(all.isOk()) << all.status().message();
  DeviceBuffer<std::uint8_t> q1(K);
  DeviceBuffer<float> s1(56);
  auto one = groupQuant<E4M3FN>(GroupQuantInput<BFloat16>::matrix(dx.get() + (M - 1) * K, 1, K, K),
                                Fp8Matrix<E4M3FN>{q1.get(), 1, K, K}, colMajorView(s1.get(), 1, 56).value(), opt,
                                nullptr);
  ASSERT_TRUE(one.isOk());
  FP8SCALE_DEVICE_CHECK(runtime::deviceSynchronize());
  std::vector<std::uint8_t> lastRow(K);
  FP8SCALE_DEVICE_CHECK(runtime::memcpy(lastRow.data(), dq.get() + (M - 1) * K, K, runtime::Copy::DeviceToHost));
  EXPECT_TRUE(lastRow == q1.download());
  std::vector<float> lastScales(56);
  for (index_t g = 0; g < 56; ++g)
    FP8SCALE_DEVICE_CHECK(runtime::memcpy(&lastScales[g], ds.get() + g * M + (M - 1), 4, runtime::Copy::DeviceToHost));
  EXPECT_EQ(countBitDiffs(lastScales, s1.download()), 0u);
}

}  // namespace
}  // namespace fp8scale::test
