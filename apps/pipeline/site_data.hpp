// fp8scale-pipeline: the producer sites' shapes, their input data (built-in
// seeded activations or tensors from a safetensors file), their GEMM weights
// and the sample of GEMM output columns the host checks against fp64.
//
// Every built-in value is a pure function of (seed, site, tensor, index): a
// counter-based hash, not a sequential generator, so the host and GPU paths
// build the same data, threads fill disjoint ranges, and the host path can
// make just the weight rows it checks without the rest of the matrix.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "fp8scale/fp8scale.hpp"
#include "fp8scale/reference/block_scaled_gemm.hpp"
#include "pipeline/options.hpp"
#include "pipeline/safetensors.hpp"

namespace fp8scale {
namespace pipeline {

// ---------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------

/// Calls fn(i) for i in [0, count) on up to hardware_concurrency() threads
/// (at most 32), handing out indices one at a time.
inline void parallelFor(index_t count, const std::function<void(index_t)>& fn) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const index_t threads = std::min<index_t>({static_cast<index_t>(hw), count, 32});
  if (threads <= 1) {
    for (index_t i = 0; i < count; ++i) fn(i);
    return;
  }
  std::atomic<index_t> next{0};
  auto worker = [&]() {
    for (index_t i = next++; i < count; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (index_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

/// DeepSeek-V3: hidden size, attention heads x head dim of the o_proj input
/// (v_head_dim), MoE expert intermediate size, RMSNorm epsilon.
constexpr index_t kHidden = 7168;
constexpr index_t kHeads = 128;
constexpr index_t kHeadDim = 128;
constexpr index_t kMoeIntermediate = 2048;
constexpr float kNormEps = 1e-6f;
/// Activation group size (1 x 128) and weight block edge (128 x 128).
constexpr int kGroup = 128;

enum class ProducerKind : int { kRmsNorm, kGroupQuant, kSiluClamp };

/// One site: what it quantizes and the GEMM that reads the result.
struct SiteShape {
  SiteId id = SiteId::kAttnIn;
  ProducerKind producer = ProducerKind::kRmsNorm;
  index_t K = 0;          ///< columns quantized = the GEMM's K
  index_t inputCols = 0;  ///< columns of one input row: K, or 2 I for SiLU-clamp (gate | up)
  index_t heads = 1;      ///< o_proj_in: H (K = H * D); 1 elsewhere
  index_t headDim = 0;    ///< o_proj_in: D; K elsewhere
  index_t N = 0;          ///< the GEMM's output features
  const char* producerText = "";
  const char* gemmText = "";
};

/// The default (DeepSeek-V3) shape of a site; `attnN` is attn_in's GEMM N.
inline SiteShape defaultShape(SiteId id, index_t attnN) {
  SiteShape s;
  s.id = id;
  switch (id) {
    case SiteId::kAttnIn:
      s = {id, ProducerKind::kRmsNorm, kHidden, kHidden, 1, kHidden, attnN, "RMSNorm quant (+ residual)", "q_a_proj"};
      break;
    case SiteId::kOProjIn:
      s = {id, ProducerKind::kGroupQuant, kHeads * kHeadDim, kHeads * kHeadDim, kHeads, kHeadDim, kHidden,
           "group quant, head-major", "o_proj"};
      break;
    case SiteId::kMoeIn:
      s = {id, ProducerKind::kRmsNorm, kHidden, kHidden, 1, kHidden, 2 * kMoeIntermediate,
           "RMSNorm quant (+ residual)", "experts' gate|up proj"};
      break;
    case SiteId::kDownIn:
      s = {id, ProducerKind::kSiluClamp, kMoeIntermediate, 2 * kMoeIntermediate, 1, kMoeIntermediate, kHidden,
           "SiLU-clamp quant", "experts' down proj"};
      break;
  }
  return s;
}

/// "x[M, 7168]", "x[M, 128, 128]" or "gate|up[M, 2 * 2048]".
inline std::string inputShapeText(const SiteShape& s) {
  if (s.producer == ProducerKind::kSiluClamp) return "gate|up[M, 2 * " + std::to_string(s.K) + "]";
  if (s.heads > 1) return "x[M, " + std::to_string(s.heads) + ", " + std::to_string(s.headDim) + "]";
  return "x[M, " + std::to_string(s.K) + "]";
}

// ---------------------------------------------------------------------------
// Counter-based values
// ---------------------------------------------------------------------------

namespace detail {

/// splitmix64's finalizer: a bijective 64-bit mix.
inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The tensors a site draws values for.
enum class Draw : std::uint64_t { kX = 1, kResidual, kNormWeight, kWeight, kOutliers, kRowGain, kColumns };

/// The key of one (seed, site, tensor) stream.
inline std::uint64_t streamKey(std::uint64_t seed, SiteId site, Draw d) {
  return mix64(mix64(seed) ^ (static_cast<std::uint64_t>(site) << 8 | static_cast<std::uint64_t>(d)));
}

inline std::uint64_t hashAt(std::uint64_t key, std::uint64_t i) { return mix64(key ^ mix64(i)); }

/// Uniform in [0, 1) from the top 24 bits.
inline float uniformAt(std::uint64_t key, std::uint64_t i) {
  return static_cast<float>(hashAt(key, i) >> 40) * 0x1p-24f;
}

/// Roughly normal (mean 0, standard deviation 1, support [-3, 3)): the sum
/// of three uniforms of 21 bits each, centred and scaled.
inline float noiseAt(std::uint64_t key, std::uint64_t i) {
  const std::uint64_t h = hashAt(key, i);
  const float u0 = static_cast<float>(h & 0x1FFFFF) * 0x1p-21f;
  const float u1 = static_cast<float>((h >> 21) & 0x1FFFFF) * 0x1p-21f;
  const float u2 = static_cast<float>((h >> 42) & 0x1FFFFF) * 0x1p-21f;
  return (u0 + u1 + u2 - 1.5f) * 2.0f;
}

}  // namespace detail

/// Outlier channels of the built-in activations: a few columns whose values
/// are 100-1000x the others, as real hidden states and attention outputs have.
struct OutlierChannels {
  static constexpr int kCount = 4;
  index_t column[kCount] = {};
  float gain[kCount] = {};

  static OutlierChannels make(std::uint64_t seed, SiteId site, index_t cols) {
    OutlierChannels o;
    const std::uint64_t key = detail::streamKey(seed, site, detail::Draw::kOutliers);
    for (int i = 0; i < kCount; ++i) {
      o.column[i] = static_cast<index_t>(detail::hashAt(key, 2 * i) % static_cast<std::uint64_t>(cols));
      o.gain[i] = 100.0f * std::pow(10.0f, detail::uniformAt(key, 2 * i + 1));  // [100, 1000)
    }
    return o;
  }
  float gainOf(index_t k) const {
    float g = 1.0f;
    for (int i = 0; i < kCount; ++i)
      if (column[i] == k) g = gain[i];
    return g;
  }
};

// ---------------------------------------------------------------------------
// Site input
// ---------------------------------------------------------------------------

/// A site's input rows in the producer's input type (BFloat16, Float16 or float).
template <class In>
struct SiteInput {
  using input_type = In;
  SiteShape shape;
  index_t rows = 0;            ///< rows available; a run takes the first M
  std::vector<In> x;           ///< [rows, inputCols], row stride inputCols
  std::vector<In> residual;    ///< RMSNorm sites: [rows, K], added to x before the norm
  std::vector<In> normWeight;  ///< RMSNorm sites: [K]
  std::string source;          ///< where the rows come from, for the output
  std::string dtype;           ///< "bf16", "fp16" or "fp32"
};

using AnySiteInput = std::variant<SiteInput<BFloat16>, SiteInput<Float16>, SiteInput<float>>;

template <class In>
const char* inputTypeName() {
  if constexpr (std::is_same<In, float>::value) return "fp32";
  else return In::kName;
}

/// The RMSNorm weight: 1 + noise / 4, seeded per site.
template <class In>
std::vector<In> makeNormWeight(std::uint64_t seed, SiteId site, index_t K) {
  std::vector<In> w(static_cast<std::size_t>(K));
  const std::uint64_t key = detail::streamKey(seed, site, detail::Draw::kNormWeight);
  for (index_t k = 0; k < K; ++k) w[k] = fromFloat<In>(1.0f + 0.25f * detail::noiseAt(key, k));
  return w;
}

/// Built-in activations for `rows` tokens: x(m, k) = gain(m) * noise * outlier(k)
/// in bf16, gain(m) in [0.5, 2) per token, and for RMSNorm sites a residual
/// drawn the same way (the outlier channels are shared, as in a residual stream).
inline SiteInput<BFloat16> makeBuiltinInput(const SiteShape& shape, index_t rows, std::uint64_t seed) {
  SiteInput<BFloat16> in;
  in.shape = shape;
  in.rows = rows;
  in.source = "built-in, seed " + std::to_string(seed);
  in.dtype = "bf16";
  const OutlierChannels outliers = OutlierChannels::make(seed, shape.id, shape.inputCols);
  const std::uint64_t gainKey = detail::streamKey(seed, shape.id, detail::Draw::kRowGain);
  std::vector<float> gain(static_cast<std::size_t>(shape.inputCols));
  for (index_t k = 0; k < shape.inputCols; ++k) gain[k] = outliers.gainOf(k);
  auto fill = [&](std::vector<BFloat16>& v, index_t cols, detail::Draw d) {
    v.resize(static_cast<std::size_t>(rows * cols));
    const std::uint64_t key = detail::streamKey(seed, shape.id, d);
    parallelFor(rows, [&](index_t m) {
      const float g = 0.5f + 1.5f * detail::uniformAt(gainKey, static_cast<std::uint64_t>(m));
      for (index_t k = 0; k < cols; ++k)
        v[m * cols + k] = toBFloat16(g * gain[k] * detail::noiseAt(key, static_cast<std::uint64_t>(m * cols + k)));
    });
  };
  fill(in.x, shape.inputCols, detail::Draw::kX);
  if (shape.producer == ProducerKind::kRmsNorm) {
    fill(in.residual, shape.K, detail::Draw::kResidual);
    in.normWeight = makeNormWeight<BFloat16>(seed, shape.id, shape.K);
  }
  return in;
}

namespace detail {

inline std::string shapeText(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

template <class In>
SiteInput<In> fromFloats(const SiteShape& shape, index_t rows, const std::vector<float>& values, std::uint64_t seed,
                         std::string source) {
  SiteInput<In> in;
  in.shape = shape;
  in.rows = rows;
  in.source = std::move(source);
  in.dtype = inputTypeName<In>();
  in.x.resize(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) in.x[i] = fromFloat<In>(values[i]);  // exact: same dtype
  if (shape.producer == ProducerKind::kRmsNorm) {
    in.residual.assign(static_cast<std::size_t>(rows * shape.K), fromFloat<In>(0.0f));
    in.normWeight = makeNormWeight<In>(seed, shape.id, shape.K);
  }
  return in;
}

}  // namespace detail

/// A site's rows from tensor `tensor` of `file`. The tensor's shape sets the
/// site's K (and I, H, D); its leading dimensions are the rows:
///   attn_in, moe_in  [rows..., K]: the RMSNorm input; the residual added
///                    to it is zero, so the norm sees the tensor itself
///   o_proj_in        [rows..., H, D] (D % 128 == 0: head-major; otherwise the
///                    flat row of H * D) or [rows, K]
///   down_in          [rows..., 2 I]: gate | up
/// K and I must be multiples of 128. The GEMM's N stays the site's default.
/// Returns the input, or a message naming the flag, file, tensor and rule.
inline std::variant<AnySiteInput, std::string> loadSiteInput(const SafetensorsFile& file, SiteId site,
                                                             const std::string& tensor, index_t attnN,
                                                             std::uint64_t seed) {
  const std::string flag = std::string("--map ") + siteName(site) + "=" + tensor + ": ";
  const TensorInfo* info = file.find(tensor);
  auto loaded = file.loadAsFloat(tensor);  // names the file; lists the tensors when not found
  if (!loaded) return flag + loaded.error().what;
  const std::vector<std::uint64_t>& dims = info->shape;
  const std::string where = flag + file.source() + ": tensor " + detail::quoteName(tensor) + " of shape " +
                            detail::shapeText(dims) + ": ";
  if (dims.size() < 2) return where + "needs at least 2 dimensions (rows and columns)";
  SiteShape shape = defaultShape(site, attnN);
  const bool headMajor = site == SiteId::kOProjIn && dims.size() >= 3;
  const std::size_t rowDims = dims.size() - (headMajor ? 2 : 1);
  std::uint64_t rows = 1;
  for (std::size_t i = 0; i < rowDims; ++i) rows *= dims[i];
  std::uint64_t cols = dims.back();
  if (headMajor) cols *= dims[dims.size() - 2];
  if (rows == 0 || cols == 0) return where + "is empty";
  if (rows > static_cast<std::uint64_t>(kMaxRows))
    return where + std::to_string(rows) + " rows, more than the " + std::to_string(kMaxRows) + " this program takes";
  switch (shape.producer) {
    case ProducerKind::kRmsNorm:
      if (cols % kGroup != 0) return where + "K = " + std::to_string(cols) + " is not a multiple of 128";
      {  // the longest row one block takes depends on the element width
        const index_t maxCols =
            info->dtype == Dtype::kF32 ? RmsNormPolicy<float>::kMaxCols : RmsNormPolicy<BFloat16>::kMaxCols;
        if (cols > static_cast<std::uint64_t>(maxCols))
          return where + "K = " + std::to_string(cols) + " is longer than one RMSNorm block takes (" +
                 std::to_string(maxCols) + ")";
      }
      shape.K = shape.inputCols = shape.headDim = static_cast<index_t>(cols);
      break;
    case ProducerKind::kGroupQuant:
      if (cols % kGroup != 0) return where + "K = H * D = " + std::to_string(cols) + " is not a multiple of 128";
      shape.K = shape.inputCols = static_cast<index_t>(cols);
      if (headMajor && dims.back() % kGroup == 0) {
        shape.heads = static_cast<index_t>(dims[dims.size() - 2]);
        shape.headDim = static_cast<index_t>(dims.back());
      } else {
        shape.heads = 1;
        shape.headDim = shape.K;
      }
      break;
    case ProducerKind::kSiluClamp:
      if (cols % (2 * kGroup) != 0)
        return where + "the last dimension " + std::to_string(cols) + " is not 2 * I with I a multiple of 128";
      shape.inputCols = static_cast<index_t>(cols);
      shape.K = shape.headDim = static_cast<index_t>(cols / 2);
      break;
  }
  const std::string source = file.source() + ": " + tensor + " " + detail::shapeText(dims) + " " + dtypeName(info->dtype);
  const index_t r = static_cast<index_t>(rows);
  switch (info->dtype) {
    case Dtype::kBF16: return AnySiteInput(detail::fromFloats<BFloat16>(shape, r, loaded.value().values, seed, source));
    case Dtype::kF16: return AnySiteInput(detail::fromFloats<Float16>(shape, r, loaded.value().values, seed, source));
    default: return AnySiteInput(detail::fromFloats<float>(shape, r, loaded.value().values, seed, source));
  }
}

// ---------------------------------------------------------------------------
// Weights and the checked GEMM columns
// ---------------------------------------------------------------------------

/// Weight element W(n, k) of a site (bf16, as checkpoints store it): noise / sqrt(K).
inline BFloat16 weightAt(std::uint64_t key, index_t n, index_t k, index_t K) {
  return toBFloat16(detail::noiseAt(key, static_cast<std::uint64_t>(n * K + k)) / std::sqrt(static_cast<float>(K)));
}

inline std::uint64_t weightKey(std::uint64_t seed, SiteId site) {
  return detail::streamKey(seed, site, detail::Draw::kWeight);
}

/// The whole weight W[N, K] of a site, bf16 row-major (the GPU path quantizes it).
inline std::vector<BFloat16> makeWeight(const SiteShape& s, std::uint64_t seed) {
  std::vector<BFloat16> w(static_cast<std::size_t>(s.N * s.K));
  const std::uint64_t key = weightKey(seed, s.id);
  parallelFor(s.N, [&](index_t n) {
    for (index_t k = 0; k < s.K; ++k) w[n * s.K + k] = weightAt(key, n, k, s.K);
  });
  return w;
}

/// Checked GEMM columns: kSampleBlocks seeded 128-row weight blocks, and in
/// each kSampleColumnsPerBlock seeded output columns (n) of that block: 64
/// columns, and only 4 x 128 weight rows for the host to build and quantize.
constexpr int kSampleBlocks = 4;
constexpr int kSampleColumnsPerBlock = 16;

/// One sampled weight block: its rows of W, their 128 x 128 block quantization
/// (host reference: the specification of the device weightBlockQuant) and
/// the output columns checked in it.
struct WeightBlockSample {
  index_t block = 0;              ///< nb: rows [nb * 128, nb * 128 + rows) of W
  index_t rows = 0;               ///< 128, or fewer in a last partial block
  std::vector<index_t> columns;   ///< checked columns, local to the block (n = nb * 128 + c)
  std::vector<float> w;           ///< [rows, K] unquantized (bf16 values)
  std::vector<std::uint8_t> q;    ///< [rows, K] e4m3fn
  std::vector<float> scale;       ///< [align(K / 128, 4)]: one row of block scales, padding 0
  std::vector<float> decoded;     ///< [rows, K] decoded q (without the scale)
};

struct WeightSample {
  std::vector<WeightBlockSample> blocks;
  index_t count = 0;  ///< checked columns in all
  /// The global column n of every checked column, in block order.
  std::vector<index_t> columns() const {
    std::vector<index_t> out;
    for (const auto& b : blocks)
      for (index_t c : b.columns) out.push_back(b.block * kWeightBlock + c);
    return out;
  }
  /// The block scales of block b as the (1, K / 128) row-major view the
  /// reference GEMM reads.
  ScaleView<const float, RowMajor> scaleView(const WeightBlockSample& b, index_t K) const {
    return ScaleView<const float, RowMajor>::fromValidated(b.scale.data(), 1, K / kWeightBlock,
                                                           RowMajor{weightScaleLd(K)});
  }
};

/// Picks the checked columns of a site's GEMM and block-quantizes their
/// weight blocks on the host.
inline WeightSample makeWeightSample(const SiteShape& s, std::uint64_t seed) {
  WeightSample out;
  std::mt19937_64 rng(detail::streamKey(seed, s.id, detail::Draw::kColumns));
  const index_t nBlocks = weightScaleRows(s.N);
  std::vector<index_t> order(static_cast<std::size_t>(nBlocks));
  for (index_t i = 0; i < nBlocks; ++i) order[i] = i;
  const index_t take = std::min<index_t>(kSampleBlocks, nBlocks);
  for (index_t i = 0; i < take; ++i)
    std::swap(order[i], order[i + static_cast<index_t>(rng() % static_cast<std::uint64_t>(nBlocks - i))]);
  order.resize(static_cast<std::size_t>(take));
  std::sort(order.begin(), order.end());
  const std::uint64_t key = weightKey(seed, s.id);
  for (index_t nb : order) {
    WeightBlockSample b;
    b.block = nb;
    b.rows = std::min<index_t>(kWeightBlock, s.N - nb * kWeightBlock);
    std::vector<index_t> local(static_cast<std::size_t>(b.rows));
    for (index_t i = 0; i < b.rows; ++i) local[i] = i;
    const index_t cols = std::min<index_t>(kSampleColumnsPerBlock, b.rows);
    for (index_t i = 0; i < cols; ++i)
      std::swap(local[i], local[i + static_cast<index_t>(rng() % static_cast<std::uint64_t>(b.rows - i))]);
    b.columns.assign(local.begin(), local.begin() + cols);
    std::sort(b.columns.begin(), b.columns.end());
    std::vector<BFloat16> wb(static_cast<std::size_t>(b.rows * s.K));
    b.w.resize(wb.size());
    for (index_t r = 0; r < b.rows; ++r)
      for (index_t k = 0; k < s.K; ++k) {
        wb[r * s.K + k] = weightAt(key, nb * kWeightBlock + r, k, s.K);
        b.w[r * s.K + k] = toFloat(wb[r * s.K + k]);
      }
    b.q.resize(wb.size());
    b.scale.assign(static_cast<std::size_t>(weightScaleLd(s.K)), 0.0f);
    const Fp8Matrix<E4M3FN> q{b.q.data(), b.rows, s.K, s.K};
    const Status st = reference::weightBlockQuant<E4M3FN, ScaleFp32>(
        WeightQuantInput<BFloat16>{wb.data(), b.rows, s.K, s.K}, q, weightScaleView(b.scale.data(), b.rows, s.K).value());
    if (!st) throw std::runtime_error("weight sample: " + st.message());
    b.decoded = reference::decodeFp8(q);
    out.count += static_cast<index_t>(b.columns.size());
    out.blocks.push_back(std::move(b));
  }
  return out;
}

}  // namespace pipeline
}  // namespace fp8scale
