#pragma once
// Adapting torch tensors (libtorch stable ABI) to the fp8scale launchers'
// arguments: dtypes to the library's types, strides to row strides and scale
// layouts, the current device and stream. No kernel code: every launch goes
// through the public launchers of include/fp8scale.
//
// A bad argument is a std::invalid_argument (torch's binding raises it in
// Python as ValueError) whose message starts with
// "fp8scale.<op>: argument '<name>'", so the argument is named whether the
// tensor-level check here or the launcher's own check refuses. What only
// the device decides (alignment of a pointer or stride, a capability, a
// launch) is a std::runtime_error (RuntimeError). The stable ABI has no way
// to raise TypeError: a wrong dtype reaching the op is a ValueError here,
// where the Python functions and the fake implementations raise TypeError.

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <fp8scale/fp8scale.hpp>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8scale::torch_binding {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

[[noreturn]] inline void fail(const char* op, const std::string& argument, const std::string& what) {
  throw std::invalid_argument(std::string("fp8scale.") + op + ": argument '" + argument + "' " + what);
}

/// A launcher's Status as the op's error: the library's message names the
/// launcher's own argument (x's row stride is 'ldx' or 'tokenStride', the
/// fp8 output is 'q', the scale view's ld is 'ld'). ValueError for a bad
/// argument, RuntimeError for misalignment and the device's own errors.
inline void check(const char* op, const Status& s) {
  if (s) return;
  // "fp8scale::groupQuant: argument 'eps' = 0: ..." as "fp8scale.group_quant:
  // argument 'eps' = 0: ...": the op's name in front, as every op error.
  std::string what = s.message();
  const std::string launcher = std::string("fp8scale::") + s.function() + ": ";
  if (what.compare(0, launcher.size(), launcher) == 0) what.erase(0, launcher.size());
  const std::string message = std::string("fp8scale.") + op + ": " + what;
  switch (s.code()) {
    case StatusCode::kMisaligned:
    case StatusCode::kUnsupportedDevice:
    case StatusCode::kDeviceError: throw std::runtime_error(message);
    default: throw std::invalid_argument(message);
  }
}

inline const char* dtypeName(ScalarType t) {
  switch (t) {
    case ScalarType::BFloat16: return "torch.bfloat16";
    case ScalarType::Half: return "torch.float16";
    case ScalarType::Float: return "torch.float32";
    case ScalarType::Int: return "torch.int32";
    case ScalarType::Byte: return "torch.uint8";
    case ScalarType::Char: return "torch.int8";
    case ScalarType::Float8_e8m0fnu: return "torch.float8_e8m0fnu";
    case ScalarType::Float8_e4m3fn: return "torch.float8_e4m3fn";
    case ScalarType::Float8_e4m3fnuz: return "torch.float8_e4m3fnuz";
    default: return "another dtype";
  }
}

/// "(a, b)" of a tensor's sizes or strides, Python's tuple spelling.
template <class Get>
std::string tupleString(const Tensor& t, Get get) {
  std::ostringstream s;
  s << '(';
  for (int64_t d = 0; d < t.dim(); ++d) s << (d ? ", " : "") << get(d);
  s << (t.dim() == 1 ? ",)" : ")");
  return s.str();
}
inline std::string shapeString(const Tensor& t) { return tupleString(t, [&](int64_t d) { return t.size(d); }); }
inline std::string strideString(const Tensor& t) { return tupleString(t, [&](int64_t d) { return t.stride(d); }); }

/// Every tensor of one call: a CUDA tensor on the first tensor's device, with
/// non-negative strides. Returns that device's index.
inline int32_t commonCudaDevice(const char* op, const std::vector<std::pair<const char*, const Tensor*>>& tensors) {
  int32_t device = -1;
  const char* first = nullptr;
  for (const auto& [name, t] : tensors) {
    if (!t->is_cuda())
      fail(op, name, "is not a CUDA tensor (fp8scale ops run on CUDA tensors; got device type " +
                         std::to_string(static_cast<int>(t->device().type())) + ")");
    if (device < 0) {
      device = t->get_device_index();
      first = name;
    } else if (t->get_device_index() != device) {
      fail(op, name, "is on cuda:" + std::to_string(t->get_device_index()) + ", '" + first + "' on cuda:" +
                         std::to_string(device) + " (all tensors of one call share a device)");
    }
    for (int64_t d = 0; d < t->dim(); ++d)
      if (t->stride(d) < 0) fail(op, name, "has a negative stride " + strideString(*t));
  }
  return device;
}

/// t's dtype. The stable ABI of torch 2.10, which the op library targets,
/// names no float8_e8m0fnu (torch throws reading it): that is an error
/// naming the argument and the dtype the ops take instead.
inline ScalarType dtypeOf(const char* op, const char* name, const Tensor& t) {
  try {
    return t.scalar_type();
  } catch (const std::exception&) {
    fail(op, name, "has a dtype the stable ABI of torch 2.10 cannot pass, such as torch.float8_e8m0fnu: the ops "
                   "take swizzled UE8M0 scales as their bytes, scale.view(torch.uint8)");
  }
}

inline void expectDtype(const char* op, const char* name, const Tensor& t, ScalarType want) {
  const ScalarType got = dtypeOf(op, name, t);
  if (got != want) fail(op, name, std::string("has dtype ") + dtypeName(got) + ", expected " + dtypeName(want));
}

inline void expectShape(const char* op, const char* name, const Tensor& t, const std::vector<int64_t>& want) {
  bool same = t.dim() == static_cast<int64_t>(want.size());
  for (int64_t d = 0; same && d < t.dim(); ++d) same = t.size(d) == want[static_cast<size_t>(d)];
  if (!same) {
    std::ostringstream s;
    s << "has shape " << shapeString(t) << ", expected (";
    for (size_t d = 0; d < want.size(); ++d) s << (d ? ", " : "") << want[d];
    s << (want.size() == 1 ? ",)" : ")");
    fail(op, name, s.str());
  }
}

/// The row stride of a 2-D tensor whose rows are contiguous (stride(1) == 1),
/// in elements. With one row or none it is unobservable and taken as the
/// row length, which the launchers' alignment checks then see.
inline index_t rowStride(const char* op, const char* name, const Tensor& t) {
  if (t.dim() != 2) fail(op, name, "must be 2-D, got shape " + shapeString(t));
  if (t.size(1) > 1 && t.stride(1) != 1)
    fail(op, name, "must have contiguous rows (stride(1) == 1), got strides " + strideString(t));
  return t.size(0) <= 1 ? t.size(1) : t.stride(0);
}

/// Byte interval [begin, end) of the elements a tensor addresses (empty when
/// it has none), for the overlap checks.
struct ByteSpan {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool empty() const { return begin == end; }
  bool overlaps(const ByteSpan& o) const { return !empty() && !o.empty() && begin < o.end && o.begin < end; }
};

inline ByteSpan byteSpan(const Tensor& t) {
  if (t.numel() == 0) return {};
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const auto begin = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  return {begin, begin + static_cast<std::uintptr_t>((last + 1) * static_cast<int64_t>(t.element_size()))};
}

/// Refuses an output that shares bytes with any other tensor of the call.
/// Each tensor's span is computed once (every accessor is a call into torch).
inline void expectDisjoint(const char* op, const std::vector<std::pair<const char*, const Tensor*>>& outputs,
                           const std::vector<std::pair<const char*, const Tensor*>>& all) {
  std::vector<ByteSpan> spans;
  spans.reserve(all.size());
  for (const auto& named : all) spans.push_back(byteSpan(*named.second));
  for (const auto& [outName, out] : outputs) {
    size_t o = 0;
    while (o < all.size() && all[o].second != out) ++o;
    const ByteSpan outSpan = o < all.size() ? spans[o] : byteSpan(*out);
    for (size_t i = 0; i < all.size(); ++i)
      if (i != o && outSpan.overlaps(spans[i]))
        fail(op, outName, std::string("overlaps '") + all[i].first + "' (outputs must not share memory with any argument)");
  }
}

/// Refuses a tensor whose storage ends before element `lastElement` (counted
/// from the tensor's first element) that the call writes or reads.
inline void expectStorageHolds(const char* op, const char* name, const Tensor& t, int64_t lastElement,
                               const char* why) {
  int64_t nbytes = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_storage_size(t.get(), &nbytes));
  const int64_t need = (t.storage_offset() + lastElement + 1) * static_cast<int64_t>(t.element_size());
  if (need > nbytes)
    fail(op, name, "storage holds " + std::to_string(nbytes) + " bytes, " + why + " needs " + std::to_string(need));
}

/// A float32 scale tensor (M, G): its layout read from its strides.
///   (ld, 1), ld >= G : row-major, s(m, g) at m * ld + g
///   (1, ld), ld >= M : column-major [G][ld], padding slots [M, ld) written 0
/// Where both readings hold (stride (1, 1): M <= 1 and G <= 1) the bytes are
/// the same and the tensor is taken as row-major. A column-major tensor's
/// storage must hold the whole [G][ld] block, padding included.
/// The (G, ld) row-major tensor over a column-major scale tensor's [G][ld]
/// block (same storage, same first element).
inline Tensor blockOf(const Tensor& s, int64_t G, int64_t ld) {
  const int64_t sizes[2] = {G, ld};
  const int64_t strides[2] = {ld, 1};
  AtenTensorHandle block = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch__reinterpret_tensor(s.get(), 2, sizes, strides, s.storage_offset(), &block));
  return Tensor(block);
}

struct ScaleArg {
  float* data = nullptr;
  index_t rows = 0;
  index_t groups = 0;
  index_t ld = 0;
  bool columnMajor = false;
};

/// `preferColumnMajor` (a destination that must be column-major) reads the
/// ambiguous strides as column-major instead.
inline ScaleArg scaleArg(const char* op, const char* name, const Tensor& s, index_t M, index_t G,
                         bool preferColumnMajor = false) {
  expectDtype(op, name, s, ScalarType::Float);
  expectShape(op, name, s, {M, G});
  const int64_t s0 = s.stride(0), s1 = s.stride(1);
  const bool rowMajor = s1 == 1 && (s0 >= G || M <= 1);
  const bool columnMajor = s0 == 1 && s1 >= M;
  ScaleArg a;
  a.data = static_cast<float*>(s.data_ptr());
  a.rows = M;
  a.groups = G;
  if (rowMajor && !(preferColumnMajor && columnMajor)) {
    a.ld = M <= 1 ? G : s0;
  } else if (columnMajor) {
    a.columnMajor = true;
    a.ld = s1;
    if (G > 0 && a.ld > 0) {
      expectStorageHolds(op, name, s, G * a.ld - 1, "its [G][ld] block with padding");
      // M == 0: torch gives an empty tensor a null data pointer, but its
      // padding slots are written; address them through the [G][ld] block.
      if (M == 0) a.data = static_cast<float*>(blockOf(s, G, a.ld).data_ptr());
    }
  } else {
    fail(op, name,
         "has strides " + strideString(s) + " for shape " + shapeString(s) +
             ": neither row-major (ld, 1) with ld >= G nor column-major (1, ld) with ld >= M");
  }
  return a;
}

/// DeepGEMM's packed UE8M0 scales of (M, G) exponents as the library's
/// byte view: an int32 (M, ceil(G / 4)) tensor with strides (1, ld), ld >=
/// align(M, 4) and a multiple of 4, whose storage holds its ceil(G / 4) x ld
/// words (byte g % 4 of word (g / 4) * ld + m is the exponent of s(m, g);
/// every other byte of the block is padding, written 0).
inline ScaleView<std::uint8_t, PackedUe8m0> packedUe8m0Arg(const char* op, const char* name, const Tensor& t,
                                                           index_t M, index_t G) {
  expectDtype(op, name, t, ScalarType::Int);
  const index_t words = (G + 3) / 4;
  expectShape(op, name, t, {M, words});
  // With no row, torch's strides of an empty tensor need not be a packed ld:
  // one that is not a multiple of 4 reads as ld 0 (no padding rows to write).
  const index_t ld = M == 0 && t.stride(1) % 4 != 0 ? 0 : t.stride(1);
  if ((M > 1 && t.stride(0) != 1) || ld < alignUp(M, 4) || ld % 4 != 0)
    fail(op, name,
         "has strides " + strideString(t) + ": expected (1, ld) with ld >= align(M, 4) and a multiple of 4");
  if (words > 0 && ld > 0) expectStorageHolds(op, name, t, words * ld - 1, "its ceil(G / 4) x ld words");
  // M == 0: torch gives an empty tensor a null data pointer, but its padding
  // rows are written; address them through the word block.
  auto* bytes =
      static_cast<std::uint8_t*>(words > 0 && ld > 0 && M == 0 ? blockOf(t, words, ld).data_ptr() : t.data_ptr());
  auto view = packedUe8m0View(bytes, M, G, ld);
  check(op, view.status());
  return view.value();
}

/// The 128 x 4 swizzled UE8M0 scales of (M, G) exponents (cuBLASLt
/// VEC32_UE8M0, torch's F.scaled_mm with SwizzleType.SWIZZLE_32_4_4) as the
/// library's byte view: a contiguous 1-D torch.uint8 tensor of
/// align(M, 128) * align(G, 4) bytes, tiles of 128 rows x 4 groups in
/// row-major tile order (Swizzled128x4; padding bytes written 0). uint8, not
/// float8_e8m0fnu: the Python API's float8_e8m0fnu tensor viewed as bytes
/// (dtypeOf says why).
inline ScaleView<std::uint8_t, Swizzled128x4> swizzled128x4Arg(const char* op, const char* name, const Tensor& t,
                                                              index_t M, index_t G) {
  expectDtype(op, name, t, ScalarType::Byte);
  const index_t bytes = Swizzled128x4::forCols(G).requiredSpan(M, G);
  expectShape(op, name, t, {bytes});
  if (bytes > 1 && t.stride(0) != 1) fail(op, name, "must be contiguous, got strides " + strideString(t));
  auto view = swizzled128x4View(static_cast<std::uint8_t*>(t.data_ptr()), M, G);
  check(op, view.status());
  return view.value();
}

/// A producer op's scale in an exponent layout: the packed UE8M0 int32
/// words (packedUe8m0Arg) or the swizzled uint8 bytes (swizzled128x4Arg),
/// with what the library's instantiations for them take: bfloat16 x into
/// float8_e4m3fn q, scale_ue8m0, groups of 32 or 128. Runs
/// f(view) and returns true for such a scale; false (nothing run) for a
/// float32 one.
template <class F>
bool withExponentScale(const char* op, const Tensor& x, const Tensor& q, const Tensor& scale, index_t M, index_t G,
                       bool scaleUe8m0, int64_t groupSize, F&& f) {
  const ScalarType dtype = dtypeOf(op, "scale", scale);
  if (dtype != ScalarType::Int && dtype != ScalarType::Byte) return false;
  const bool packed = dtype == ScalarType::Int;
  const char* name = packed ? "packed UE8M0 scales (int32)" : "swizzled UE8M0 scales";
  const auto packedView = packed ? packedUe8m0Arg(op, "scale", scale, M, G) : ScaleView<std::uint8_t, PackedUe8m0>{};
  const auto swizzledView =
      packed ? ScaleView<std::uint8_t, Swizzled128x4>{} : swizzled128x4Arg(op, "scale", scale, M, G);
  expectDtype(op, "x", x, ScalarType::BFloat16);
  expectDtype(op, "q", q, ScalarType::Float8_e4m3fn);
  if (!scaleUe8m0) fail(op, "scale_ue8m0", std::string("must be True: ") + name + " hold UE8M0 exponents");
  if (!isExponentLayoutGroupSize(static_cast<int>(groupSize)))
    fail(op, "group_size", "= " + std::to_string(groupSize) + ": " + name + " take groups of 32 or 128");
  if (packed) f(packedView);
  else f(swizzledView);
  return true;
}

/// Runs f(view) with the scale tensor as a ScaleView<float, RowMajor> or
/// <float, ColMajor>; a view the library refuses is the op's error.
template <class F>
void withScaleView(const char* op, const ScaleArg& a, F&& f) {
  if (a.columnMajor) {
    auto v = colMajorView(a.data, a.rows, a.groups, a.ld);
    check(op, v.status());
    f(v.value());
  } else {
    auto v = rowMajorView(a.data, a.rows, a.groups, a.ld);
    check(op, v.status());
    f(v.value());
  }
}

/// f(In{}) for the input dtypes the producers read.
template <class F>
void withInputType(const char* op, const char* name, const Tensor& t, F&& f) {
  const ScalarType dtype = dtypeOf(op, name, t);
  switch (dtype) {
    case ScalarType::BFloat16: return f(BFloat16{});
    case ScalarType::Half: return f(Float16{});
    case ScalarType::Float: return f(float{});
    default:
      fail(op, name, std::string("has dtype ") + dtypeName(dtype) +
                         ", expected torch.bfloat16, torch.float16 or torch.float32");
  }
}

/// f(Format{}) for the fp8 output's dtype.
template <class F>
void withFp8Format(const char* op, const char* name, const Tensor& t, F&& f) {
  const ScalarType dtype = dtypeOf(op, name, t);
  switch (dtype) {
    case ScalarType::Float8_e4m3fn: return f(E4M3FN{});
    case ScalarType::Float8_e4m3fnuz: return f(E4M3FNUZ{});
    default:
      fail(op, name, std::string("has dtype ") + dtypeName(dtype) +
                         ", expected torch.float8_e4m3fn or torch.float8_e4m3fnuz");
  }
}

/// f(out, view): q as Fp8Matrix<Format> of its dtype (rows x cols, row
/// stride ldq) and the scale as its ScaleView; the producer launchers deduce
/// Format and Layout from them.
template <class F>
void withOutputs(const char* op, const Tensor& q, index_t rows, index_t cols, index_t ldq, const ScaleArg& scale,
                 F&& f) {
  withFp8Format(op, "q", q, [&](auto format) {
    using Format = decltype(format);
    const Fp8Matrix<Format> out{static_cast<std::uint8_t*>(q.data_ptr()), rows, cols, ldq};
    withScaleView(op, scale, [&](auto view) { f(out, view); });
  });
}

/// The options every producer op takes, as QuantOptions.
inline QuantOptions quantOptions(int64_t groupSize, bool scaleUe8m0, double fmax, double eps, bool enablePdl) {
  QuantOptions o;
  o.groupSize = static_cast<int>(groupSize);  // groupsOf() has refused any other size
  o.rule = scaleUe8m0 ? ScaleRule::kUE8M0 : ScaleRule::kFp32;
  o.fmax = static_cast<float>(fmax);
  o.eps = static_cast<float>(eps);
  o.programmaticLaunch = enablePdl;
  return o;
}

/// The groups of a row of `cols` columns; K % group_size is the launcher's
/// check, so a remainder only truncates here.
inline index_t groupsOf(const char* op, index_t cols, int64_t groupSize) {
  if (!isSupportedGroupSize(static_cast<int>(groupSize)) || static_cast<int64_t>(static_cast<int>(groupSize)) != groupSize)
    fail(op, "group_size", "= " + std::to_string(groupSize) + ": supported group sizes are 32, 64, 128");
  if (cols % groupSize != 0)
    fail(op, "x", "has " + std::to_string(cols) + " columns, not a multiple of group_size = " +
                      std::to_string(groupSize));
  return cols / groupSize;
}

/// The current CUDA stream of `device` (torch.cuda.current_stream), with
/// `device` made current for the launch.
struct CurrentStream {
  torch::stable::accelerator::DeviceGuard guard;
  Stream stream = nullptr;
  explicit CurrentStream(int32_t device) : guard(device) {
    void* s = nullptr;
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &s));
    stream = static_cast<Stream>(s);
  }
};

}  // namespace fp8scale::torch_binding
