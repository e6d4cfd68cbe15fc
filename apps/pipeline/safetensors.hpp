// fp8scale-pipeline input: a strict reader for safetensors files of real
// activations (`--input FILE.safetensors`).
//
// The format (huggingface/safetensors): an 8-byte little-endian unsigned
// header length N, N bytes of UTF-8 JSON, then the data buffer. The JSON is an
// object mapping each tensor name to
//   {"dtype": "BF16", "shape": [17, 7168], "data_offsets": [begin, end]}
// (byte offsets relative to the start of the data buffer, end exclusive,
// little-endian row-major elements), plus an optional "__metadata__" object of
// string -> string.
//
// What this reader accepts, and why (every rule below is a LoadError, never a
// crash, and every message names the file, the tensor and the rule):
//   - N <= 100,000,000 (the reference implementation's limit) and 8 + N <= file
//     size. The JSON must parse as one object (nlohmann-json, strict: no
//     comments, valid UTF-8, no NUL byte, nothing but whitespace after it),
//     with no key twice in one object and at most kMaxJsonDepth levels of
//     nesting. Unknown fields in a tensor entry are ignored.
//   - Every dtype string must be one the format defines (kDtypes). All of them
//     are listed by tensors(); only BF16, F16 and F32 can be loaded as float,
//     and the others are refused by loadAsFloat() only when asked for.
//   - shape: an array of non-negative integers ([] is a scalar, a 0 extent an
//     empty tensor); the element count and the byte count must fit in 64 bits;
//     sub-byte dtypes (F4, F6_*) must fill whole bytes.
//   - data_offsets: exactly two non-negative integers, begin <= end <= the data
//     buffer's size, and end - begin == element count * dtype size.
//   - Full coverage, as the reference implementation requires of every file it
//     writes and reads: sorted by (begin, end), each range starts exactly where
//     the previous one ends, from byte 0 to the buffer's last byte. Starting
//     earlier is an overlap (an empty tensor must sit on a boundary, not inside
//     another tensor); starting later, or ending before the buffer does, leaves
//     bytes that belong to no tensor. No safetensors writer leaves such bytes;
//     they usually mean a header edited by hand or a file cut and padded.
// Memory: open() reads the whole file; a header of N bytes costs O(N) memory to
// parse (twice: a checking pass, then the value).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8scale/numeric.hpp"

namespace fp8scale {
namespace pipeline {

// ---------------------------------------------------------------------------
// Dtypes
// ---------------------------------------------------------------------------

// clang-format off
/// Every element type the safetensors format defines, in its order.
enum class Dtype : std::uint8_t {
  kBool, kF4, kF6E2M3, kF6E3M2, kU8, kI8, kF8E5M2, kF8E4M3, kF8E8M0, kF8E4M3Fnuz,
  kF8E5M2Fnuz, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kC64, kF64, kI64, kU64,
};
// clang-format on

/// A dtype, its spelling in the header and its width in bits (BOOL is a byte).
struct DtypeInfo {
  Dtype dtype;
  const char* name;
  unsigned bits;
};

/// Every dtype with its spelling and width, indexed by Dtype.
inline constexpr DtypeInfo kDtypes[] = {
    {Dtype::kBool, "BOOL", 8},
    {Dtype::kF4, "F4", 4},
    {Dtype::kF6E2M3, "F6_E2M3", 6},
    {Dtype::kF6E3M2, "F6_E3M2", 6},
    {Dtype::kU8, "U8", 8},
    {Dtype::kI8, "I8", 8},
    {Dtype::kF8E5M2, "F8_E5M2", 8},
    {Dtype::kF8E4M3, "F8_E4M3", 8},
    {Dtype::kF8E8M0, "F8_E8M0", 8},
    {Dtype::kF8E4M3Fnuz, "F8_E4M3FNUZ", 8},
    {Dtype::kF8E5M2Fnuz, "F8_E5M2FNUZ", 8},
    {Dtype::kI16, "I16", 16},
    {Dtype::kU16, "U16", 16},
    {Dtype::kF16, "F16", 16},
    {Dtype::kBF16, "BF16", 16},
    {Dtype::kI32, "I32", 32},
    {Dtype::kU32, "U32", 32},
    {Dtype::kF32, "F32", 32},
    {Dtype::kC64, "C64", 64},
    {Dtype::kF64, "F64", 64},
    {Dtype::kI64, "I64", 64},
    {Dtype::kU64, "U64", 64},
};

namespace detail {
constexpr bool dtypeTableInEnumOrder() {
  for (std::size_t i = 0; i < sizeof(kDtypes) / sizeof(kDtypes[0]); ++i) {
    if (static_cast<std::size_t>(kDtypes[i].dtype) != i) return false;
  }
  return sizeof(kDtypes) / sizeof(kDtypes[0]) == static_cast<std::size_t>(Dtype::kU64) + 1;
}
static_assert(dtypeTableInEnumOrder(), "kDtypes must list every Dtype in enum order");
}  // namespace detail

/// The header's spelling of `d`, e.g. "BF16".
inline const char* dtypeName(Dtype d) { return kDtypes[static_cast<std::size_t>(d)].name; }

/// Width of one element in bits.
inline unsigned dtypeBits(Dtype d) { return kDtypes[static_cast<std::size_t>(d)].bits; }

/// The dtype spelled `name` in a header, or nothing if the format has none.
inline std::optional<Dtype> dtypeFromName(const std::string& name) {
  for (const DtypeInfo& info : kDtypes) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

/// True for the dtypes loadAsFloat() converts: BF16, F16, F32.
inline bool isLoadableAsFloat(Dtype d) { return d == Dtype::kBF16 || d == Dtype::kF16 || d == Dtype::kF32; }

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Which rule an input broke; LoadError::what says it in words.
enum class LoadErrorKind : std::uint8_t {
  kIo,                ///< the file cannot be opened or read
  kTooShort,          ///< fewer than 8 bytes: no header length
  kHeaderTooLarge,    ///< header length over SafetensorsFile::kMaxHeaderBytes
  kHeaderLength,      ///< header length runs past the end of the file
  kInvalidJson,       ///< the header bytes are not one JSON value
  kNotAnObject,       ///< the header is JSON but not an object
  kDuplicateKey,      ///< a JSON object has the same key twice
  kTooDeep,           ///< JSON nesting deeper than kMaxJsonDepth
  kBadMetadata,       ///< "__metadata__" is not an object of strings
  kBadEntry,          ///< a tensor entry is not an object or lacks a field
  kUnknownDtype,      ///< a dtype string that is not a safetensors dtype
  kBadShape,          ///< shape is not an array of non-negative integers
  kOverflow,          ///< element or byte count does not fit in 64 bits
  kPartialByte,       ///< a sub-byte tensor that does not fill whole bytes
  kBadOffsets,        ///< data_offsets not [begin, end] with 0 <= begin <= end
  kOutOfRange,        ///< data_offsets past the end of the data buffer
  kByteCount,         ///< end - begin != element count * dtype size
  kOverlap,           ///< two tensors share bytes
  kUncoveredBytes,    ///< bytes of the data buffer that belong to no tensor
  kNotFound,          ///< loadAsFloat(): no tensor of that name
  kUnsupportedDtype,  ///< loadAsFloat(): a dtype other than BF16 / F16 / F32
};

/// Name of a LoadErrorKind, e.g. "kOverlap".
inline const char* loadErrorKindName(LoadErrorKind k) {
  // clang-format off
  static constexpr const char* kNames[] = {
      "kIo", "kTooShort", "kHeaderTooLarge", "kHeaderLength", "kInvalidJson", "kNotAnObject",
      "kDuplicateKey", "kTooDeep", "kBadMetadata", "kBadEntry", "kUnknownDtype", "kBadShape",
      "kOverflow", "kPartialByte", "kBadOffsets", "kOutOfRange", "kByteCount", "kOverlap",
      "kUncoveredBytes", "kNotFound", "kUnsupportedDtype"};
  // clang-format on
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<std::size_t>(LoadErrorKind::kUnsupportedDtype) + 1,
                "one name per LoadErrorKind");
  return kNames[static_cast<std::size_t>(k)];
}

/// Why a file or tensor could not be read. `what` is one line that starts with
/// the file name, e.g. "model.safetensors: tensor 'x': data_offsets [0, 100)
/// holds 100 bytes but shape [7, 8] of BF16 needs 112".
struct LoadError {
  LoadErrorKind kind;
  std::string what;
};

/// A value or the LoadError that prevented it.
template <class T>
class LoadResult {
 public:
  LoadResult(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  LoadResult(LoadError error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }
  /// Precondition: isOk() (throws std::bad_variant_access otherwise).
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  /// Precondition: !isOk() (throws std::bad_variant_access otherwise).
  const LoadError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, LoadError> v_;
};

// ---------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------

/// One tensor of the header: its bytes are [begin, end) of the data buffer.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<std::uint64_t> shape;  ///< outermost first; [] is a scalar
  std::uint64_t begin = 0;
  std::uint64_t end = 0;

  /// Product of the shape (1 for a scalar). Fits in 64 bits: checked at parse.
  std::uint64_t elementCount() const {
    if (std::find(shape.begin(), shape.end(), std::uint64_t{0}) != shape.end()) return 0;
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
  }
  std::uint64_t byteCount() const { return end - begin; }
};

/// A tensor widened to fp32: `values` holds elementCount() values, row-major.
struct FloatTensor {
  std::vector<std::uint64_t> shape;
  std::vector<float> values;
};

namespace detail {

using Json = nlohmann::json;

// A name as it appears in messages: quoted, control characters escaped, at
// most 64 bytes (cut at a UTF-8 character boundary).
inline std::string quoteName(const std::string& s) {
  constexpr std::size_t kMaxBytes = 64;
  std::size_t n = s.size();
  if (n > kMaxBytes) {
    n = kMaxBytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0u) == 0x80u) --n;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20u || c == 0x7Fu || c == '\'' || c == '\\') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xFu];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += n < s.size() ? "'..." : "'";
  return out;
}

// A JSON value as it appears in messages, at most 40 characters.
inline std::string describe(const Json& v) {
  std::string s = v.dump(-1, ' ', true, Json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

inline std::string shapeString(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i == 8) {
      s += ", ...";
      break;
    }
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

inline std::string rangeString(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// A non-negative JSON integer as uint64. Floats (1.5, 2.0, 1e3), negatives,
// integers past 2^64 - 1 (parsed as floats) and non-numbers give nothing.
inline std::optional<std::uint64_t> asUint64(const Json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (x >= 0) return static_cast<std::uint64_t>(x);
  }
  return std::nullopt;
}

// SAX pass over the header: records the first syntax error, duplicate key or
// nesting deeper than maxDepth, and stops there (a handler returning false
// ends nlohmann-json's sax_parse). Builds nothing.
class HeaderChecker : public nlohmann::json_sax<Json> {
 public:
  explicit HeaderChecker(int maxDepth) : maxDepth_(maxDepth) {}

  LoadErrorKind kind = LoadErrorKind::kInvalidJson;
  std::string what;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keysOfOpenObjects_.emplace_back();
    return enter();
  }
  bool key(string_t& k) override {
    if (keysOfOpenObjects_.back().insert(k).second) return true;
    kind = LoadErrorKind::kDuplicateKey;
    what = "header JSON has the key " + quoteName(k) + " twice in one object";
    return false;
  }
  bool end_object() override {
    keysOfOpenObjects_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const Json::exception& e) override {
    kind = LoadErrorKind::kInvalidJson;
    what = std::string("header is not valid JSON: ") + e.what();
    return false;
  }

 private:
  bool enter() {
    if (++depth_ <= maxDepth_) return true;
    kind = LoadErrorKind::kTooDeep;
    what = "header JSON nests deeper than " + std::to_string(maxDepth_) + " levels";
    return false;
  }

  int maxDepth_;
  int depth_ = 0;
  std::vector<std::set<std::string>> keysOfOpenObjects_;
};

inline std::uint16_t loadLe16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t loadLe32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
inline std::uint64_t loadLe64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(loadLe32(p)) | (static_cast<std::uint64_t>(loadLe32(p + 4)) << 32);
}

}  // namespace detail

// ---------------------------------------------------------------------------
// The file
// ---------------------------------------------------------------------------

/// A validated safetensors file held in memory. Construct with open() or
/// parse(); every tensor it lists lies inside its data buffer.
class SafetensorsFile {
 public:
  /// Largest accepted header, in bytes (the reference implementation's limit).
  static constexpr std::uint64_t kMaxHeaderBytes = 100000000;
  /// Deepest accepted JSON nesting; a valid header needs 3 levels.
  static constexpr int kMaxJsonDepth = 64;

  /// Reads and validates the file at `path`. Errors name `path`.
  static LoadResult<SafetensorsFile> open(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return LoadError{LoadErrorKind::kIo, path + ": no such file"};
    }
    // A directory opens as a stream whose size reads as 2^63 - 1: refuse early.
    if (!std::filesystem::is_regular_file(path, ec)) {
      return LoadError{LoadErrorKind::kIo, path + ": not a regular file"};
    }
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return LoadError{LoadErrorKind::kIo, path + ": cannot open the file for reading"};
    const std::streamoff size = in.tellg();
    if (size < 0) return LoadError{LoadErrorKind::kIo, path + ": cannot determine the file's size"};
    in.seekg(0);
    std::vector<std::uint8_t> bytes;
    try {
      bytes.resize(static_cast<std::size_t>(size));
    } catch (const std::exception&) {  // std::bad_alloc, std::length_error
      return LoadError{LoadErrorKind::kIo,
                       path + ": " + std::to_string(size) + " bytes do not fit in memory"};
    }
    if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
      return LoadError{LoadErrorKind::kIo, path + ": read " + std::to_string(in.gcount()) + " of " +
                                               std::to_string(size) + " bytes"};
    }
    return parse(std::move(bytes), path);
  }

  /// Validates a whole file's bytes held in memory. `source` names the input in
  /// error messages.
  static LoadResult<SafetensorsFile> parse(std::vector<std::uint8_t> bytes, std::string source = "<memory>") {
    SafetensorsFile f;
    f.bytes_ = std::move(bytes);
    f.source_ = std::move(source);
    if (auto err = f.validate()) return std::move(*err);
    return f;
  }

  /// As above, from `size` bytes at `data` (copied).
  static LoadResult<SafetensorsFile> parse(const void* data, std::size_t size,
                                           std::string source = "<memory>") {
    const auto* p = static_cast<const std::uint8_t*>(data);
    return parse(std::vector<std::uint8_t>(p, p + size), std::move(source));
  }

  /// The path or name the file was read from.
  const std::string& source() const { return source_; }
  /// Every tensor, in data-buffer order (by begin, then end, then name).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  /// The tensor named `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
  }
  /// The "__metadata__" entries (empty when the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The header length N (JSON and its padding).
  std::uint64_t headerBytes() const { return headerBytes_; }
  /// Size of the data buffer, in bytes.
  std::uint64_t dataBytes() const { return bytes_.size() - 8 - headerBytes_; }
  /// First byte of `t`'s data (t must come from tensors() or find()).
  const std::uint8_t* tensorData(const TensorInfo& t) const {
    return bytes_.data() + 8 + headerBytes_ + t.begin;
  }

  /// The tensor named `name` widened to fp32, exactly (bf16 and fp16 values are
  /// all representable in fp32; NaN stays NaN, -0 stays -0). Errors: kNotFound,
  /// kUnsupportedDtype for dtypes other than BF16, F16, F32.
  LoadResult<FloatTensor> loadAsFloat(const std::string& name) const {
    const TensorInfo* t = find(name);
    if (t == nullptr) {
      std::string what = source_ + ": no tensor named " + detail::quoteName(name) + " (the file has " +
                         std::to_string(tensors_.size()) + (tensors_.size() == 1 ? " tensor" : " tensors");
      for (std::size_t i = 0; i < tensors_.size() && i < 8; ++i) {
        what += (i ? ", " : ": ") + detail::quoteName(tensors_[i].name);
      }
      what += tensors_.size() > 8 ? ", ...)" : ")";
      return LoadError{LoadErrorKind::kNotFound, what};
    }
    if (!isLoadableAsFloat(t->dtype)) {
      return LoadError{LoadErrorKind::kUnsupportedDtype,
                       source_ + ": tensor " + detail::quoteName(name) + ": dtype " + dtypeName(t->dtype) +
                           " cannot be loaded as float (BF16, F16 and F32 can)"};
    }
    FloatTensor out;
    out.shape = t->shape;
    const std::size_t n = static_cast<std::size_t>(t->elementCount());
    out.values.resize(n);
    const std::uint8_t* p = tensorData(*t);
    switch (t->dtype) {
      case Dtype::kBF16:
        for (std::size_t i = 0; i < n; ++i) out.values[i] = toFloat(BFloat16{detail::loadLe16(p + 2 * i)});
        break;
      case Dtype::kF16:
        for (std::size_t i = 0; i < n; ++i) out.values[i] = toFloat(Float16{detail::loadLe16(p + 2 * i)});
        break;
      default:  // kF32
        for (std::size_t i = 0; i < n; ++i) out.values[i] = bitCast<float>(detail::loadLe32(p + 4 * i));
        break;
    }
    return out;
  }

 private:
  using Json = detail::Json;

  SafetensorsFile() = default;

  LoadError fail(LoadErrorKind kind, const std::string& what) const {
    return LoadError{kind, source_ + ": " + what};
  }
  LoadError failTensor(LoadErrorKind kind, const std::string& name, const std::string& what) const {
    return LoadError{kind, source_ + ": tensor " + detail::quoteName(name) + ": " + what};
  }

  // Fills headerBytes_, tensors_, index_, metadata_; the first broken rule.
  std::optional<LoadError> validate() {
    // --- Header length -------------------------------------------------------
    const std::uint64_t fileBytes = bytes_.size();
    if (fileBytes < 8) {
      return fail(LoadErrorKind::kTooShort,
                  "file has " + std::to_string(fileBytes) + " bytes, fewer than the 8-byte header length");
    }
    const std::uint64_t n = detail::loadLe64(bytes_.data());
    if (n > kMaxHeaderBytes) {
      return fail(LoadErrorKind::kHeaderTooLarge, "header length " + std::to_string(n) + " exceeds the " +
                                                      std::to_string(kMaxHeaderBytes) + "-byte limit");
    }
    if (n > fileBytes - 8) {
      return fail(LoadErrorKind::kHeaderLength,
                  "header length " + std::to_string(n) + " runs past the end of the file (8 + " +
                      std::to_string(n) + " > " + std::to_string(fileBytes) + " bytes)");
    }
    headerBytes_ = n;
    const std::uint64_t dataSize = fileBytes - 8 - n;

    // --- JSON ----------------------------------------------------------------
    Json header;
    if (auto err = parseJson(bytes_.data() + 8, bytes_.data() + 8 + n, header)) return err;
    if (!header.is_object()) {
      return fail(LoadErrorKind::kNotAnObject,
                  std::string("header is a JSON ") + header.type_name() + ", not an object");
    }

    // --- Entries -------------------------------------------------------------
    for (const auto& item : header.items()) {
      const std::string& name = item.key();
      const Json& entry = item.value();
      if (name == "__metadata__") {
        if (auto err = readMetadata(entry)) return err;
        continue;
      }
      TensorInfo t;
      t.name = name;
      if (auto err = readEntry(entry, dataSize, t)) return err;
      tensors_.push_back(std::move(t));
    }

    // --- Tiling: sorted by offset, the ranges cover [0, dataSize) once ---------
    std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.end != b.end) return a.end < b.end;
      return a.name < b.name;
    });
    std::uint64_t covered = 0;  // end of the bytes claimed so far
    const TensorInfo* last = nullptr;
    for (const TensorInfo& t : tensors_) {
      if (t.begin < covered) {
        return failTensor(LoadErrorKind::kOverlap, t.name,
                          "data_offsets " + detail::rangeString(t.begin, t.end) + " overlap tensor " +
                              detail::quoteName(last->name) + " at " +
                              detail::rangeString(last->begin, last->end));
      }
      if (t.begin > covered) {
        return fail(LoadErrorKind::kUncoveredBytes,
                    "bytes " + detail::rangeString(covered, t.begin) +
                        " of the data buffer belong to no tensor (the next is " + detail::quoteName(t.name) +
                        " at " + detail::rangeString(t.begin, t.end) + ")");
      }
      covered = t.end;
      last = &t;
    }
    if (covered != dataSize) {
      return fail(LoadErrorKind::kUncoveredBytes, "bytes " + detail::rangeString(covered, dataSize) +
                                                      " at the end of the " + std::to_string(dataSize) +
                                                      "-byte data buffer belong to no tensor");
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
    return std::nullopt;
  }

  // Parses [first, last) as one JSON value. A first, DOM-free pass checks the
  // syntax and refuses duplicate keys and deep nesting at the point where they
  // occur; the second builds the value. (nlohmann-json's parse callback could
  // do both in one pass, but it rescans the parent object at every member's
  // end: quadratic in the number of tensors.)
  std::optional<LoadError> parseJson(const std::uint8_t* first, const std::uint8_t* last, Json& out) const {
    // nlohmann-json stops at a NUL byte as if the input ended there; in JSON a
    // NUL is never valid (strings escape it), so "{}\0junk" must not pass.
    if (const void* nul = std::memchr(first, 0, static_cast<std::size_t>(last - first))) {
      return fail(LoadErrorKind::kInvalidJson,
                  "header is not valid JSON: NUL byte at header offset " +
                      std::to_string(static_cast<const std::uint8_t*>(nul) - first));
    }
    try {
      detail::HeaderChecker checker(kMaxJsonDepth);
      if (!Json::sax_parse(first, last, &checker)) {
        return fail(checker.kind, checker.what.empty() ? "header is not valid JSON" : checker.what);
      }
      out = Json::parse(first, last, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    } catch (const Json::exception& e) {
      return fail(LoadErrorKind::kInvalidJson, std::string("header is not valid JSON: ") + e.what());
    } catch (const std::bad_alloc&) {
      return fail(LoadErrorKind::kInvalidJson, "header JSON needs more memory than is available");
    }
    return std::nullopt;
  }

  std::optional<LoadError> readMetadata(const Json& entry) {
    if (!entry.is_object()) {
      return fail(LoadErrorKind::kBadMetadata, std::string("'__metadata__' is a JSON ") + entry.type_name() +
                                                   ", not an object of strings");
    }
    for (const auto& kv : entry.items()) {
      if (!kv.value().is_string()) {
        return fail(LoadErrorKind::kBadMetadata, "'__metadata__' key " + detail::quoteName(kv.key()) +
                                                     " holds a JSON " + kv.value().type_name() +
                                                     ", not a string");
      }
      metadata_.emplace(kv.key(), kv.value().get<std::string>());
    }
    return std::nullopt;
  }

  std::optional<LoadError> readEntry(const Json& entry, std::uint64_t dataSize, TensorInfo& t) const {
    const std::string& name = t.name;
    if (!entry.is_object()) {
      return failTensor(LoadErrorKind::kBadEntry, name,
                        std::string("entry is a JSON ") + entry.type_name() + ", not an object");
    }
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(field)) {
        return failTensor(LoadErrorKind::kBadEntry, name, std::string("entry has no '") + field + "'");
      }
    }

    // dtype
    const Json& dtype = entry["dtype"];
    if (!dtype.is_string()) {
      return failTensor(LoadErrorKind::kBadEntry, name,
                        std::string("'dtype' is a JSON ") + dtype.type_name() + ", not a string");
    }
    const std::optional<Dtype> d = dtypeFromName(dtype.get_ref<const std::string&>());
    if (!d) {
      return failTensor(
          LoadErrorKind::kUnknownDtype, name,
          "dtype " + detail::quoteName(dtype.get_ref<const std::string&>()) + " is not a safetensors dtype");
    }
    t.dtype = *d;

    // shape
    const Json& shape = entry["shape"];
    if (!shape.is_array()) {
      return failTensor(LoadErrorKind::kBadShape, name,
                        std::string("'shape' is a JSON ") + shape.type_name() + ", not an array");
    }
    std::uint64_t elements = 1;  // product of the extents before the first 0, if any
    bool overflow = false;
    bool empty = false;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const std::optional<std::uint64_t> dim = detail::asUint64(shape[i]);
      if (!dim) {
        return failTensor(LoadErrorKind::kBadShape, name,
                          "shape[" + std::to_string(i) + "] is " + detail::describe(shape[i]) +
                              "; extents must be non-negative integers");
      }
      t.shape.push_back(*dim);
      if (*dim == 0) empty = true;
      if (empty || overflow) continue;
      if (elements > std::numeric_limits<std::uint64_t>::max() / *dim) {
        overflow = true;
      } else {
        elements *= *dim;
      }
    }
    if (empty) {
      elements = 0;  // a 0 extent makes an empty tensor, however large the others
    } else if (overflow) {
      return failTensor(LoadErrorKind::kOverflow, name,
                        "shape " + detail::shapeString(t.shape) + " has more than 2^64 - 1 elements");
    }
    const std::uint64_t bits = dtypeBits(t.dtype);
    if (elements > std::numeric_limits<std::uint64_t>::max() / bits) {
      return failTensor(LoadErrorKind::kOverflow, name,
                        "shape " + detail::shapeString(t.shape) + " of " + dtypeName(t.dtype) +
                            " needs more than 2^64 - 1 bytes");
    }
    if ((elements * bits) % 8 != 0) {
      return failTensor(LoadErrorKind::kPartialByte, name,
                        "shape " + detail::shapeString(t.shape) + " of " + dtypeName(t.dtype) + " is " +
                            std::to_string(elements * bits) + " bits, not a whole number of bytes");
    }
    const std::uint64_t needed = elements * bits / 8;

    // data_offsets
    const Json& offsets = entry["data_offsets"];
    std::optional<std::uint64_t> begin, end;
    if (offsets.is_array() && offsets.size() == 2) {
      begin = detail::asUint64(offsets[0]);
      end = detail::asUint64(offsets[1]);
    }
    if (!begin || !end) {
      return failTensor(LoadErrorKind::kBadOffsets, name,
                        "'data_offsets' is " + detail::describe(offsets) +
                            "; it must be two non-negative integers [begin, end]");
    }
    t.begin = *begin;
    t.end = *end;
    if (t.end < t.begin) {
      return failTensor(LoadErrorKind::kBadOffsets, name,
                        "data_offsets " + detail::rangeString(t.begin, t.end) + " end before they begin");
    }
    if (t.end > dataSize) {
      return failTensor(LoadErrorKind::kOutOfRange, name,
                        "data_offsets " + detail::rangeString(t.begin, t.end) + " run past the end of the " +
                            std::to_string(dataSize) + "-byte data buffer");
    }
    if (t.byteCount() != needed) {
      return failTensor(LoadErrorKind::kByteCount, name,
                        "data_offsets " + detail::rangeString(t.begin, t.end) + " holds " +
                            std::to_string(t.byteCount()) + " bytes but shape " +
                            detail::shapeString(t.shape) + " of " + dtypeName(t.dtype) + " needs " +
                            std::to_string(needed));
    }
    return std::nullopt;
  }

  std::string source_;
  std::vector<std::uint8_t> bytes_;  // the whole file
  std::uint64_t headerBytes_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace pipeline
}  // namespace fp8scale
