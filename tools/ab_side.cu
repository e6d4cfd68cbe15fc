// ab_side: one side of an in-process A/B of the producer launchers.
//
// Built twice, once against each set of library headers, into two shared
// libraries (tools/h200_ab_inprocess.sh does it):
//   nvcc -shared -Xcompiler -fPIC -I<old>/include tools/ab_side.cu -o libab_old.so
//   nvcc -shared -Xcompiler -fPIC -Iinclude       tools/ab_side.cu -o libab_new.so
// tools/ab_inprocess.cu loads both into one process and times them on the
// same buffers, replay by replay in alternation (see there for why).
//
// The entries are those of bench_producers' A/B set, with the same names:
// {group_quant, rmsnorm_quant, silu_clamp_quant} x {row_major, col_major
// (ld = M)} x {default launch, /pdl} x M in {1, 8, 64, 128, 512, 2048, 8192, 16384,
// 65536};
// bf16 input, e4m3fn, groups of 128, K = 7168 (SiLU-clamp: I = 2048, limit 7).
// Only the public launcher API is used, so any two library versions with the
// same API can be compared.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "fp8scale/fp8scale.hpp"

extern "C" {
/// Device buffers the driver owns, sized for the largest entry.
struct Fp8scaleAbBuffers {
  void* x;  ///< bf16 [65536, 7168] (SiLU-clamp reads [65536, 2 * 2048])
  void* r;  ///< bf16 residual [65536, 7168]
  void* w;  ///< bf16 weight [7168]
  void* q;  ///< fp8 [65536, 7168]
  void* s;  ///< fp32 scales, 65536 * 56
};
int fp8scale_ab_entries();
const char* fp8scale_ab_name(int entry);
/// Enqueues one call of `entry` on `stream`; 0 when the launcher accepted
/// it, otherwise 1 with its message in err.
int fp8scale_ab_enqueue(int entry, const Fp8scaleAbBuffers* b, cudaStream_t stream, char* err, int errLen);
}

namespace {

using namespace fp8scale;

enum class Producer { kGroup, kRmsNorm, kSilu };

struct Entry {
  Producer producer;
  bool colMajor;
  bool pdl;
  index_t rows;
  std::string name;
};

constexpr index_t kHidden = 7168;
constexpr index_t kIntermediate = 2048;

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = [] {
    std::vector<Entry> e;
    const char* names[] = {"group_quant", "rmsnorm_quant", "silu_clamp_quant"};
    for (int p = 0; p < 3; ++p)
      for (bool col : {false, true})
        for (bool pdl : {false, true})
          for (index_t m : {1, 8, 64, 128, 512, 2048, 8192, 16384, 65536}) {
            std::string name = std::string(names[p]) + (col ? "/col_major" : "/row_major") + (pdl ? "/pdl/" : "/") +
                               std::to_string(m);
            e.push_back({static_cast<Producer>(p), col, pdl, m, name});
          }
    return e;
  }();
  return all;
}

template <class Layout>
Status run(const Entry& e, const Fp8scaleAbBuffers& b, cudaStream_t stream) {
  QuantOptions opt;
  opt.programmaticLaunch = e.pdl;
  auto* x = static_cast<BFloat16*>(b.x);
  auto* s = static_cast<float*>(b.s);
  const index_t M = e.rows;
  const index_t N = e.producer == Producer::kSilu ? kIntermediate : kHidden, G = N / 128;
  Result<ScaleView<float, Layout>> sv = [&] {
    if constexpr (Layout::kColumnMajor) return colMajorView(s, M, G, M);
    else return rowMajorView(s, M, G);
  }();
  if (!sv) return sv.status();
  const Fp8Matrix<E4M3FN> q{static_cast<std::uint8_t*>(b.q), M, N, N};
  switch (e.producer) {
    case Producer::kGroup:
      return groupQuant<E4M3FN>(GroupQuantInput<BFloat16>::matrix(x, M, N, N), q, sv.value(), opt, stream).status();
    case Producer::kRmsNorm: {
      const auto in = RmsNormQuantInput<BFloat16>::matrix(x, M, N, N, static_cast<const BFloat16*>(b.w))
                          .withResidual(static_cast<BFloat16*>(b.r), N);
      return rmsNormQuant<E4M3FN>(in, q, sv.value(), opt, stream).status();
    }
    case Producer::kSilu:
      return siluClampQuant<E4M3FN>(SiluClampInput<BFloat16>{x, M, N, 2 * N, 7.0f}, q, sv.value(), opt, stream)
          .status();
  }
  return Status::error(StatusCode::kInvalidValue, "ab_side", "entry", "unknown producer");
}

}  // namespace

extern "C" int fp8scale_ab_entries() { return static_cast<int>(entries().size()); }

extern "C" const char* fp8scale_ab_name(int entry) {
  return entry >= 0 && entry < fp8scale_ab_entries() ? entries()[static_cast<std::size_t>(entry)].name.c_str()
                                                      : nullptr;
}

extern "C" int fp8scale_ab_enqueue(int entry, const Fp8scaleAbBuffers* b, cudaStream_t stream, char* err,
                                   int errLen) {
  Status st;
  if (entry < 0 || entry >= fp8scale_ab_entries() || b == nullptr) {
    st = Status::error(StatusCode::kInvalidValue, "fp8scale_ab_enqueue", "entry", "out of range", entry);
  } else {
    const Entry& e = entries()[static_cast<std::size_t>(entry)];
    st = e.colMajor ? run<ColMajor>(e, *b, stream) : run<RowMajor>(e, *b, stream);
  }
  if (st) return 0;
  if (err != nullptr && errLen > 0) std::snprintf(err, static_cast<std::size_t>(errLen), "%s", st.message().c_str());
  return 1;
}
