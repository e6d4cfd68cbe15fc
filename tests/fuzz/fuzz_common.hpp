// Shared helpers of the fuzz targets (libFuzzer, built with AddressSanitizer
// and UndefinedBehaviorSanitizer): picking extents and strides from the
// input with their edge values, pointers of every kind a caller can pass,
// and the invariant check that ends a run.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fp8scale/status.hpp"

namespace fp8scale {
namespace fuzz {

/// Ends the run with the broken invariant (libFuzzer saves the input as a
/// crash-* file, which becomes a regression input under regressions/).
[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken at %s:%d: %s\n", file, line, what.c_str());
  std::abort();
}
#define FUZZ_CHECK(cond, what)                                                                 \
  do {                                                                                         \
    if (!(cond)) ::fp8scale::fuzz::fail(__FILE__, __LINE__, std::string(#cond ": ") + (what)); \
  } while (0)

/// An extent or stride: mostly small (the shapes whose memory a target can
/// allocate and check), sometimes negative, a power of two up to 2^62 (+-2),
/// or any 64-bit value.
inline index_t pickExtent(FuzzedDataProvider& in, index_t smallMax = 9) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return in.ConsumeIntegralInRange<index_t>(-2, -1);
    case 1: return (index_t{1} << in.ConsumeIntegralInRange<int>(0, 62)) + in.ConsumeIntegralInRange<int>(-2, 2);
    case 2: return in.ConsumeIntegral<index_t>();
    default: return in.ConsumeIntegralInRange<index_t>(0, smallMax);
  }
}

/// `base` plus a small or wild excess (a leading dimension above its minimum),
/// or sometimes below it.
inline index_t pickStride(FuzzedDataProvider& in, index_t base) {
  const auto plus = [base](index_t d) {  // base + d, saturated to int64
    index_t r = 0;
    return __builtin_add_overflow(base, d, &r) ? (d < 0 ? INT64_MIN : INT64_MAX) : r;
  };
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return plus(-in.ConsumeIntegralInRange<index_t>(1, 3));
    case 1: return pickExtent(in);
    default: return plus(in.ConsumeIntegralInRange<index_t>(0, 3));
  }
}

/// The pointer kinds a caller passes: the real buffer, null, the buffer
/// one byte in (misaligned), an address near the top of the address space
/// (a span past its end), or a low address that is never dereferenced.
enum class PointerKind { kReal, kNull, kMisaligned, kNearTop, kFake };

inline PointerKind pickPointerKind(FuzzedDataProvider& in, int realWeight = 5) {
  const int k = in.ConsumeIntegralInRange<int>(0, realWeight + 3);
  if (k < realWeight) return PointerKind::kReal;
  return static_cast<PointerKind>(k - realWeight + 1);
}

/// The pointer of `kind` for a real buffer `real` (never dereferenced
/// unless kind is kReal).
template <class T>
T* pointerOf(PointerKind kind, T* real) {
  switch (kind) {
    case PointerKind::kReal: return real;
    case PointerKind::kNull: return nullptr;
    case PointerKind::kMisaligned: return reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(real) + 1);
    case PointerKind::kNearTop: return reinterpret_cast<T*>(UINTPTR_MAX - 4095);
    case PointerKind::kFake: return reinterpret_cast<T*>(std::uintptr_t{1} << 20);
  }
  return real;
}

/// A refusal names the function and the argument in its message.
inline void checkRefusal(const Status& s, const char* fn) {
  FUZZ_CHECK(!s.isOk(), "expected a refusal");
  FUZZ_CHECK(s.argument() != nullptr && s.argument()[0] != '\0', s.message());
  FUZZ_CHECK(std::strcmp(s.function(), fn) == 0, s.message());
  const std::string m = s.message();
  FUZZ_CHECK(m.find(fn) != std::string::npos && m.find(s.argument()) != std::string::npos, m);
}

/// Two statuses agree: both ok, or the same code and argument.
inline bool sameStatus(const Status& a, const Status& b) {
  if (a.isOk() || b.isOk()) return a.isOk() == b.isOk();
  return a.code() == b.code() && std::strcmp(a.argument(), b.argument()) == 0;
}

inline std::string describe(const Status& s) { return s.isOk() ? std::string("ok") : s.message(); }

}  // namespace fuzz
}  // namespace fp8scale
