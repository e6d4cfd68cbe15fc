// Fuzz target: the safetensors reader of fp8scale-pipeline
// (apps/pipeline/safetensors.hpp), SafetensorsFile::parse on the input
// bytes, from an exactly sized heap buffer so that AddressSanitizer sees any
// read past its end.
//
// parse() must return a file or an error. An error must name the input; an
// accepted file must hold every documented invariant: the header and data
// sizes add up to the input, the tensors' ranges tile the data buffer in
// order, each byte count matches its shape and dtype, find() returns the
// listed tensor, loadAsFloat() succeeds exactly for the float dtypes with
// one value per element (the first and last checked against a decoder
// written here), and an absent name is kNotFound.
//
// Seeds: corpus/fuzz_safetensors (the sample file's header with a small
// data buffer, one tensor of every dtype, empty and scalar tensors);
// safetensors.dict gives libFuzzer the JSON keys, dtypes and edge numbers.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/safetensors.hpp"

namespace {

using fp8scale::pipeline::dtypeBits;
using fp8scale::pipeline::isLoadableAsFloat;
using fp8scale::pipeline::LoadErrorKind;
using fp8scale::pipeline::SafetensorsFile;
using Bytes = std::vector<std::uint8_t>;

constexpr const char* kSource = "<fuzz>";

[[noreturn]] void violation(const Bytes& input, const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors: invariant broken on %zu input bytes: %s\n", input.size(), what.c_str());
  std::abort();
}

// Element i of a BF16 / F16 / F32 tensor, decoded without the reader's code
// (the compiler's _Float16 for F16).
float independentDecode(fp8scale::pipeline::Dtype dtype, const std::uint8_t* data, std::size_t i) {
  using fp8scale::pipeline::Dtype;
  if (dtype == Dtype::kF32) {
    std::uint32_t bits = 0;
    for (int k = 3; k >= 0; --k) bits = (bits << 8) | data[4 * i + k];
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  const auto half = static_cast<std::uint16_t>(data[2 * i] | (data[2 * i + 1] << 8));
  if (dtype == Dtype::kBF16) {
    const std::uint32_t bits = static_cast<std::uint32_t>(half) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  _Float16 h;
  std::memcpy(&h, &half, 2);
  return static_cast<float>(h);
}

bool sameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

// Parses `input` from an exactly sized heap buffer (so the sanitizer sees any
// read past its end) and checks what came back. True when accepted.
bool runOne(const Bytes& input) {
  std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[std::max<std::size_t>(input.size(), 1)]);
  if (!input.empty()) std::memcpy(exact.get(), input.data(), input.size());
  const auto r = SafetensorsFile::parse(exact.get(), input.size(), kSource);
  if (!r) {
    if (r.error().what.rfind(std::string(kSource) + ": ", 0) != 0 || r.error().what.size() <= 8) {
      violation(input, "error message does not name the input: '" + r.error().what + "'");
    }
    return false;
  }
  const SafetensorsFile& f = r.value();
  if (8 + f.headerBytes() + f.dataBytes() != input.size()) violation(input, "sizes do not add up");
  std::uint64_t covered = 0;
  for (const auto& t : f.tensors()) {
    if (t.begin != covered || t.end < t.begin || t.end > f.dataBytes()) {
      violation(input, "tensor '" + t.name + "' does not tile the data buffer");
    }
    covered = t.end;
    if (static_cast<unsigned __int128>(t.elementCount()) * dtypeBits(t.dtype) / 8 != t.byteCount()) {
      violation(input, "tensor '" + t.name + "' byte count does not match its shape");
    }
    if (f.find(t.name) != &t) violation(input, "find('" + t.name + "') is not the listed tensor");
    const auto loaded = f.loadAsFloat(t.name);
    if (loaded.isOk() != isLoadableAsFloat(t.dtype)) {
      violation(input, "loadAsFloat('" + t.name + "') disagrees with the dtype");
    }
    if (loaded && loaded.value().values.size() != t.elementCount()) {
      violation(input, "loadAsFloat('" + t.name + "') returned the wrong number of values");
    }
    if (loaded && !loaded.value().values.empty()) {
      const std::size_t n = loaded.value().values.size();
      for (std::size_t i : {std::size_t{0}, n - 1}) {
        if (!sameFloat(loaded.value().values[i], independentDecode(t.dtype, f.tensorData(t), i))) {
          violation(input, "loadAsFloat('" + t.name + "') element " + std::to_string(i) + " is wrong");
        }
      }
    }
  }
  if (covered != f.dataBytes()) violation(input, "tensors do not cover the data buffer");
  if (f.find("\x01 not a tensor") == nullptr &&  // a header may name a tensor so
      f.loadAsFloat("\x01 not a tensor").error().kind != LoadErrorKind::kNotFound) {
    violation(input, "an absent name is not kNotFound");
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  runOne(Bytes(data, data + size));
  return 0;
}
