// A deterministic mutation fuzzer for SafetensorsFile::parse, built with
// AddressSanitizer and UndefinedBehaviorSanitizer (no recovery): any
// out-of-bounds access, overflow UB or leak aborts the run.
//
// Seeds: the sample file (its first argument) and a few hand-made files. Each
// iteration takes a seed or an earlier accepted mutant, applies 1-4 seeded
// mutations (bit flips, byte sets, truncation, digits inserted into the JSON,
// a spliced header length, JSON numbers and strings replaced by edge values or
// by each other, header ranges deleted or duplicated, crossover with a seed)
// and parses the result from an exactly sized heap buffer. parse() must return
// a file or an error; an accepted file must satisfy every documented invariant
// (ranges inside and tiling the data buffer, byte counts matching shapes,
// loadAsFloat sizes), a rejected one must carry a message naming the input.
// New accepted mutants that hold a tensor join a bounded pool. Stops after
// --iterations inputs or --seconds, whichever comes first.
//
//   fuzz_safetensors SAMPLE [--iterations N] [--seconds S] [--seed X]
//   fuzz_safetensors --replay FILE...     (parse given files once, e.g. a crash)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "pipeline/safetensors.hpp"

namespace {

using fp8scale::pipeline::dtypeBits;
using fp8scale::pipeline::isLoadableAsFloat;
using fp8scale::pipeline::kDtypes;
using fp8scale::pipeline::LoadErrorKind;
using fp8scale::pipeline::loadErrorKindName;
using fp8scale::pipeline::SafetensorsFile;
using Bytes = std::vector<std::uint8_t>;

constexpr const char* kSource = "<fuzz>";

// --- inputs ---------------------------------------------------------------------

Bytes withLength(const std::string& json, const Bytes& data) {
  Bytes out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(json.size() >> (8 * i));
  out.insert(out.end(), json.begin(), json.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<Bytes> handMadeSeeds() {
  std::vector<Bytes> seeds;
  seeds.push_back(withLength("{}", {}));
  seeds.push_back(
      withLength("{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_"
                 "offsets\":[0,12]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]},"
                 "\"c\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[20,28]}}",
                 Bytes{0x80, 0x3F, 0x00, 0x40, 0x80, 0xFF, 0x01, 0x00, 0x7F, 0x7F, 0xC0, 0x7F, 0,    0,
                       0xC0, 0x3F, 0x00, 0x00, 0x80, 0x7F, 0x00, 0x3C, 0x00, 0xFC, 0x01, 0x00, 0xFF, 0x7B}));
  // One tensor of every dtype, 8 elements each (F4 and F6 fill whole bytes).
  std::string json = "{";
  std::uint64_t offset = 0;
  for (const auto& d : kDtypes) {
    if (offset) json += ",";
    json += std::string("\"") + d.name + "\":{\"dtype\":\"" + d.name +
            "\",\"shape\":[2,4],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + d.bits) + "]}";
    offset += d.bits;
  }
  seeds.push_back(withLength(json + "}", Bytes(offset, 0x3C)));
  seeds.push_back(
      withLength("{\"e\":{\"dtype\":\"F32\",\"shape\":[0,7],\"data_offsets\":[0,0]},"
                 "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}      ",
                 Bytes{0, 0, 0x80, 0x3F}));
  return seeds;
}

// --- mutations ------------------------------------------------------------------

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(unsigned percent) { return below(100) < percent; }

  // `donors` give the other half of a crossover.
  void mutate(Bytes& b, const std::vector<Bytes>& donors) {
    const int steps = 1 + static_cast<int>(below(4));
    for (int s = 0; s < steps; ++s) mutateOnce(b, donors);
  }

 private:
  // The header as the length prefix declares it, clipped to the input.
  static std::size_t headerEnd(const Bytes& b) {
    if (b.size() < 8) return b.size();
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    return n > b.size() - 8 ? b.size() : static_cast<std::size_t>(8 + n);
  }
  static void setLength(Bytes& b, std::uint64_t n) {
    for (int i = 0; i < 8 && i < static_cast<int>(b.size()); ++i)
      b[i] = static_cast<std::uint8_t>(n >> (8 * i));
  }
  // A position: mostly inside the header, where the rules are.
  std::size_t position(const Bytes& b) {
    if (b.empty()) return 0;
    const std::size_t end = headerEnd(b);
    if (end > 8 && chance(80)) return 8 + below(end - 8);
    return below(b.size());
  }
  // Replaces [at, at + len) with `text`; keeps the length prefix in step with
  // the header most of the time, so that the JSON rules are what gets tested.
  void replace(Bytes& b, std::size_t at, std::size_t len, const std::string& text) {
    const std::size_t end = headerEnd(b);
    const bool inHeader = b.size() >= 8 && at >= 8 && at + len <= end;
    b.erase(b.begin() + at, b.begin() + at + len);
    b.insert(b.begin() + at, text.begin(), text.end());
    if (inHeader && chance(85)) setLength(b, end - 8 + text.size() - len);
  }
  // The token of characters in `set` around a random header position whose
  // byte is in `startSet`, or false.
  bool findToken(const Bytes& b, const char* startSet, const char* set, std::size_t& at, std::size_t& len) {
    const std::size_t end = headerEnd(b);
    if (end <= 8) return false;
    const std::size_t start = 8 + below(end - 8);
    for (std::size_t k = 0; k < end - 8; ++k) {
      std::size_t p = 8 + (start - 8 + k) % (end - 8);
      if (b[p] == 0 || !std::strchr(startSet, b[p])) continue;
      while (p > 8 && b[p - 1] != 0 && std::strchr(set, b[p - 1])) --p;
      std::size_t q = p;
      while (q < end && b[q] != 0 && std::strchr(set, b[q])) ++q;
      at = p;
      len = q - p;
      return true;
    }
    return false;
  }

  // Moves the range of a random "data_offsets":[begin,end] by a small amount,
  // keeping its size. False when the header has none.
  bool shiftOffsets(Bytes& b) {
    static const std::string kKey = "\"data_offsets\":[";
    const std::size_t end = headerEnd(b);
    std::vector<std::size_t> found;
    for (auto it = b.begin() + std::min<std::size_t>(8, b.size()); it < b.begin() + end;) {
      it = std::search(it, b.begin() + end, kKey.begin(), kKey.end());
      if (it == b.begin() + end) break;
      found.push_back(static_cast<std::size_t>(it - b.begin()) + kKey.size());
      ++it;
    }
    if (found.empty()) return false;
    const std::size_t at = found[below(found.size())];
    const auto close = std::find(b.begin() + at, b.begin() + end, ']');
    const std::string text(b.begin() + at, close);
    unsigned long long first = 0, second = 0;
    if (std::sscanf(text.c_str(), "%llu,%llu", &first, &second) != 2) return false;
    static const long long kShifts[] = {-16, -8, -4, -2, -1, 1, 2, 4, 8, 16};
    const long long d = kShifts[below(sizeof(kShifts) / sizeof(kShifts[0]))];
    if (d < 0 && first < static_cast<unsigned long long>(-d)) return false;
    replace(b, at, text.size(), std::to_string(first + d) + "," + std::to_string(second + d));
    return true;
  }

  void mutateOnce(Bytes& b, const std::vector<Bytes>& donors) {
    static const char* const kNumbers[] = {"0",
                                           "1",
                                           "-1",
                                           "2",
                                           "3",
                                           "4",
                                           "7",
                                           "8",
                                           "12",
                                           "16",
                                           "20",
                                           "255",
                                           "256",
                                           "65535",
                                           "4294967295",
                                           "4294967296",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "18446744073709551615",
                                           "18446744073709551616",
                                           "-9223372036854775808",
                                           "1.5",
                                           "2.0",
                                           "1e3",
                                           "1e400",
                                           "-0",
                                           "0.0",
                                           "1E-7",
                                           "99999999999999999999999999",
                                           "null",
                                           "true",
                                           "\"\"",
                                           "[]",
                                           "{}",
                                           "[0,0]",
                                           "[1,2,3]"};
    static const char* const kStrings[] = {
        "BF16",         "F16",  "F32",     "I64",     "F4",           "F6_E2M3",  "C64",
        "BOOL",         "BF17", "bf16",    "",        "__metadata__", "dtype",    "shape",
        "data_offsets", "a",    "\\u0000", "\\ud800", "\\\"",         "\xc3\xa9", "\xff"};
    static const std::uint8_t kBytes[] = {0,   0xFF, '"', '[', ']', '{', '}',  ',',  ':',
                                          '-', '.',  'e', '0', '9', ' ', '\\', 0x80, 0x7F};
    switch (below(13)) {
      case 0: {  // flip a bit
        if (b.empty()) break;
        b[position(b)] ^= static_cast<std::uint8_t>(1u << below(8));
        break;
      }
      case 1: {  // set a byte
        if (b.empty()) break;
        b[position(b)] = chance(70) ? kBytes[below(sizeof(kBytes))] : static_cast<std::uint8_t>(below(256));
        break;
      }
      case 2: {  // truncate
        b.resize(chance(50) ? below(b.size() + 1) : headerEnd(b) + below(b.size() - headerEnd(b) + 1));
        break;
      }
      case 3: {  // insert digits into the JSON
        std::string digits = chance(20) ? "-" : "";
        for (std::uint64_t k = 0, n = 1 + below(20); k < n; ++k) digits += static_cast<char>('0' + below(10));
        if (b.size() >= 8) replace(b, std::max<std::size_t>(8, position(b)), 0, digits);
        break;
      }
      case 4: {  // splice the header length
        if (b.size() < 8) b.resize(8, 0);
        const std::uint64_t n = headerEnd(b) - 8;
        const std::uint64_t choices[] = {0,         n + 1,     n - 1,        n + 8,
                                         n - 8,     b.size(),  b.size() - 8, 1ull << 63,
                                         100000000, 100000001, ~0ull,        below(1ull << 20),
                                         rng_()};
        setLength(b, choices[below(sizeof(choices) / sizeof(choices[0]))]);
        break;
      }
      case 5: {  // replace a JSON number (or any value) by an edge value
        std::size_t at, len;
        if (findToken(b, "0123456789", "-+.eE0123456789", at, len))
          replace(b, at, len, kNumbers[below(sizeof(kNumbers) / sizeof(kNumbers[0]))]);
        break;
      }
      case 6: {  // replace a JSON string's text
        std::size_t at, len;
        static const char* const kWord = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_.0123456789";
        if (findToken(b, kWord, kWord, at, len)) {
          replace(b, at, len, kStrings[below(sizeof(kStrings) / sizeof(kStrings[0]))]);
        }
        break;
      }
      case 7: {  // delete a header range
        const std::size_t end = headerEnd(b);
        if (end <= 9) break;
        const std::size_t at = 8 + below(end - 8);
        replace(b, at, std::min<std::size_t>(1 + below(24), end - at), "");
        break;
      }
      case 8: {  // duplicate a header range elsewhere (duplicate keys, nesting)
        const std::size_t end = headerEnd(b);
        if (end <= 9) break;
        const std::size_t from = 8 + below(end - 8);
        const std::size_t len = std::min<std::size_t>(1 + below(80), end - from);
        const std::string chunk(b.begin() + from, b.begin() + from + len);
        replace(b, 8 + below(end - 8), 0, chunk);
        break;
      }
      case 9: {  // crossover: this input's header with another's data, or the reverse
        const Bytes& other = donors[below(donors.size())];
        const std::size_t cut = headerEnd(b), otherCut = headerEnd(other);
        if (chance(50)) {
          b.resize(cut);
          b.insert(b.end(), other.begin() + otherCut, other.end());
        } else {
          Bytes head(other.begin(), other.begin() + otherCut);
          head.insert(head.end(), b.begin() + cut, b.end());
          b.swap(head);
        }
        break;
      }
      case 10: {  // grow or shrink the data buffer
        if (chance(50)) {
          b.insert(b.end(), 1 + below(16), static_cast<std::uint8_t>(below(256)));
        } else if (b.size() > headerEnd(b)) {
          b.resize(b.size() - std::min<std::size_t>(1 + below(16), b.size() - headerEnd(b)));
        }
        break;
      }
      case 11: {  // shift one tensor's data_offsets (overlaps, holes), or copy a number over another
        if (chance(50) && shiftOffsets(b)) break;
        std::size_t at, len, to, toLen;
        if (findToken(b, "0123456789", "-+.eE0123456789", at, len) &&
            findToken(b, "0123456789", "-+.eE0123456789", to, toLen)) {
          replace(b, to, toLen, std::string(b.begin() + at, b.begin() + at + len));
        }
        break;
      }
      default: {  // nest: open brackets inside the header
        const std::size_t end = headerEnd(b);
        if (end <= 9) break;
        const std::size_t at = 8 + below(end - 8);
        const std::string open(1 + below(80), chance(50) ? '[' : '{');
        replace(b, at, 0, open);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
};

// --- the oracle -------------------------------------------------------------------

struct Stats {
  std::uint64_t inputs = 0, accepted = 0, rejected = 0, tensorsLoaded = 0;
  std::map<std::string, std::uint64_t> byKind;
};

[[noreturn]] void violation(const Bytes& input, const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors: invariant broken: %s\n", what.c_str());
  std::ofstream out("fuzz_safetensors_failure.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
  std::fprintf(stderr, "input (%zu bytes) written to fuzz_safetensors_failure.safetensors\n", input.size());
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
bool runOne(const Bytes& input, Stats& stats, std::size_t* tensorCount = nullptr) {
  std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[std::max<std::size_t>(input.size(), 1)]);
  if (!input.empty()) std::memcpy(exact.get(), input.data(), input.size());
  const auto r = SafetensorsFile::parse(exact.get(), input.size(), kSource);
  ++stats.inputs;
  if (!r) {
    ++stats.rejected;
    ++stats.byKind[loadErrorKindName(r.error().kind)];
    if (r.error().what.rfind(std::string(kSource) + ": ", 0) != 0 || r.error().what.size() <= 8) {
      violation(input, "error message does not name the input: '" + r.error().what + "'");
    }
    return false;
  }
  ++stats.accepted;
  const SafetensorsFile& f = r.value();
  if (tensorCount) *tensorCount = f.tensors().size();
  if (8 + f.headerBytes() + f.dataBytes() != input.size()) violation(input, "sizes do not add up");
  std::uint64_t covered = 0;
  for (const auto& t : f.tensors()) {
    if (t.begin != covered || t.end < t.begin || t.end > f.dataBytes()) {
      violation(input, "tensor '" + t.name + "' does not tile the data buffer");
    }
    covered = t.end;
    if (t.elementCount() * dtypeBits(t.dtype) / 8 != t.byteCount()) {
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
    stats.tensorsLoaded += loaded.isOk();
  }
  if (covered != f.dataBytes()) violation(input, "tensors do not cover the data buffer");
  if (f.loadAsFloat("\x01 not a tensor").error().kind != LoadErrorKind::kNotFound) {
    violation(input, "an absent name is not kNotFound");
  }
  return true;
}

bool readFile(const char* path, Bytes& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t iterations = 20000, seed = 1;
  double seconds = 20.0;
  std::vector<const char*> files;
  bool replay = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc) {
      iterations = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::strtod(argv[++i], nullptr);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--replay") {
      replay = true;
    } else {
      files.push_back(argv[i]);
    }
  }
  Stats stats;
  std::vector<Bytes> seeds;
  for (const char* path : files) {
    Bytes b;
    if (!readFile(path, b)) {
      std::fprintf(stderr, "fuzz_safetensors: cannot read %s\n", path);
      return 2;
    }
    seeds.push_back(std::move(b));
  }
  if (replay) {
    for (std::size_t i = 0; i < seeds.size(); ++i) {
      std::printf("%s: %s\n", files[i], runOne(seeds[i], stats) ? "accepted" : "rejected");
    }
    return 0;
  }
  // Seeds: the files given (the sample) and the hand-made ones; every seed must
  // be accepted as it is.
  const std::size_t fileSeeds = seeds.size();
  for (Bytes& s : handMadeSeeds()) seeds.push_back(std::move(s));
  for (const Bytes& s : seeds) {
    if (!runOne(s, stats)) {
      std::fprintf(stderr, "fuzz_safetensors: a seed is rejected; the seeds must be valid files\n");
      return 1;
    }
  }

  // Mutants that were accepted, hold a tensor and are new join a bounded pool
  // that later iterations mutate further (40% seeds, 60% pool).
  Mutator m(seed);
  const std::size_t kMaxPool = 512;
  std::vector<Bytes> pool;
  std::unordered_set<std::string> seen;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0.0;
  while (stats.inputs < iterations) {
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed >= seconds) break;
    const Bytes* parent;
    if (pool.empty() || m.chance(40)) {
      // The sample is large and slow to copy: one seed pick in ten.
      const bool file = fileSeeds > 0 && (fileSeeds == seeds.size() || m.chance(10));
      parent = file ? &seeds[m.below(fileSeeds)] : &seeds[fileSeeds + m.below(seeds.size() - fileSeeds)];
    } else {
      parent = &pool[m.below(pool.size())];
    }
    Bytes input = *parent;
    m.mutate(input, seeds);
    std::size_t tensors = 0;
    if (runOne(input, stats, &tensors) && tensors > 0 && input.size() <= 64 * 1024 &&
        seen.insert(std::string(input.begin(), input.end())).second) {
      if (pool.size() < kMaxPool) {
        pool.push_back(std::move(input));
      } else {
        pool[m.below(pool.size())] = std::move(input);
      }
    }
  }
  elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf(
      "fuzz_safetensors: seed %llu, %llu inputs in %.1f s (limits: %llu inputs, %.0f s): %llu accepted, "
      "%llu rejected; %llu tensors loaded as float; pool of accepted mutants %zu\n",
      static_cast<unsigned long long>(seed), static_cast<unsigned long long>(stats.inputs), elapsed,
      static_cast<unsigned long long>(iterations), seconds, static_cast<unsigned long long>(stats.accepted),
      static_cast<unsigned long long>(stats.rejected), static_cast<unsigned long long>(stats.tensorsLoaded),
      pool.size());
  for (const auto& [kind, count] : stats.byKind) {
    std::printf("  rejected %-18s %llu\n", kind.c_str(), static_cast<unsigned long long>(count));
  }
  if (stats.inputs == 0) {
    std::fprintf(stderr, "fuzz_safetensors: no input ran\n");
    return 1;
  }
  return 0;
}
