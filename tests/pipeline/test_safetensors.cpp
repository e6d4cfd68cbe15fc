// The safetensors reader of fp8scale-pipeline: the sample file written by the
// safetensors package (tools/make_sample_safetensors.py) reads back exactly,
// and every broken header rule gives its own error naming file, tensor and
// rule. Broken inputs are built here, byte by byte, so no Python is needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/safetensors.hpp"

namespace fp8scale {
namespace pipeline {
namespace {

using Bytes = std::vector<std::uint8_t>;
using namespace std::string_literals;

const std::string kSample = std::string(FP8SCALE_TEST_DATA_DIR) + "/sample_activations.safetensors";

// --- building inputs ---------------------------------------------------------

// 8-byte little-endian length (the JSON's own unless `length` is given), the
// JSON, the data.
Bytes fileBytes(const std::string& json, const Bytes& data, std::uint64_t length = ~0ull) {
  const std::uint64_t n = length == ~0ull ? json.size() : length;
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), json.begin(), json.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string entry(const std::string& dtype, const std::string& shape, std::uint64_t begin,
                  std::uint64_t end) {
  return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(begin) +
         "," + std::to_string(end) + "]}";
}

// A BF16 [2, 3] tensor 'a' (bytes [0, 12)) then an F32 [2] tensor 'b' ([12, 20)).
const std::string kSmallJson =
    "{\"a\":" + entry("BF16", "[2,3]", 0, 12) + ",\"b\":" + entry("F32", "[2]", 12, 20) + "}";
const Bytes kSmallData(20, 0);

LoadResult<SafetensorsFile> parseFile(const std::string& json, const Bytes& data) {
  return SafetensorsFile::parse(fileBytes(json, data), "t.safetensors");
}

// Expects `r` to be an error of `kind` whose message contains `fragment`.
void expectError(const LoadResult<SafetensorsFile>& r, LoadErrorKind kind, const std::string& fragment) {
  ASSERT_FALSE(r.isOk()) << "accepted; expected " << loadErrorKindName(kind) << " '" << fragment << "'";
  EXPECT_EQ(loadErrorKindName(r.error().kind), std::string(loadErrorKindName(kind))) << r.error().what;
  EXPECT_NE(r.error().what.find(fragment), std::string::npos)
      << "message: " << r.error().what << "\nexpected to contain: " << fragment;
}

std::uint32_t bitsOf(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

// The pattern tools/make_sample_safetensors.py writes, computed independently.
float patternValue(std::uint64_t i, std::uint64_t lastDim, std::uint64_t salt) {
  const float v = static_cast<float>(static_cast<int>((37 * i + salt) % 251) - 125) / 16.0f;
  return i % lastDim % 97 == 3 ? v * 16.0f : v;
}

// --- the sample file ---------------------------------------------------------

struct ExpectedTensor {
  const char* name;
  Dtype dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t bytes;
};

TEST(SafetensorsSample, ListsEveryTensorInDataOrderWithDtypeShapeAndByteRange) {
  auto f = SafetensorsFile::open(kSample);
  ASSERT_TRUE(f.isOk()) << f.error().what;
  // The reference writer orders by dtype (widest first), then name.
  const std::vector<ExpectedTensor> want = {
      {"layers.0.token_ids", Dtype::kI64, {17}, 17 * 8},
      {"layers.0.empty", Dtype::kF32, {0, 128}, 0},
      {"layers.0.hidden", Dtype::kF32, {17, 7168}, 17 * 7168 * 4},
      {"layers.0.input_scale", Dtype::kF32, {}, 4},
      {"layers.0.attn_out", Dtype::kBF16, {17, 16, 128}, 17 * 16 * 128 * 2},
      {"specials.bf16", Dtype::kBF16, {10}, 20},
      {"layers.0.mlp_gate_up", Dtype::kF16, {17, 4096}, 17 * 4096 * 2},
      {"specials.f16", Dtype::kF16, {10}, 20},
  };
  const auto& got = f.value().tensors();
  ASSERT_EQ(got.size(), want.size());
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].dtype, want[i].dtype);
    EXPECT_EQ(got[i].shape, want[i].shape);
    EXPECT_EQ(got[i].begin, offset);
    EXPECT_EQ(got[i].byteCount(), want[i].bytes);
    EXPECT_EQ(f.value().find(want[i].name), &got[i]);
    offset += want[i].bytes;
  }
  EXPECT_EQ(f.value().dataBytes(), offset);
  EXPECT_EQ(f.value().headerBytes() % 8, 0u);  // the writer pads the JSON with spaces
  EXPECT_EQ(8 + f.value().headerBytes() + offset, 697212u);
  EXPECT_EQ(f.value().source(), kSample);
}

TEST(SafetensorsSample, LoadsBf16F16AndF32ActivationsExactly) {
  auto f = SafetensorsFile::open(kSample);
  ASSERT_TRUE(f.isOk()) << f.error().what;
  struct Case {
    const char* name;
    std::vector<std::uint64_t> shape;
    std::uint64_t salt;
  };
  for (const Case& c :
       {Case{"layers.0.attn_out", {17, 16, 128}, 0}, Case{"layers.0.mlp_gate_up", {17, 4096}, 1},
        Case{"layers.0.hidden", {17, 7168}, 2}}) {
    SCOPED_TRACE(c.name);
    auto t = f.value().loadAsFloat(c.name);
    ASSERT_TRUE(t.isOk()) << t.error().what;
    EXPECT_EQ(t.value().shape, c.shape);
    std::uint64_t n = 1;
    for (auto d : c.shape) n *= d;
    ASSERT_EQ(t.value().values.size(), n);
    std::uint64_t outliers = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const float want = patternValue(i, c.shape.back(), c.salt);
      ASSERT_EQ(bitsOf(t.value().values[i]), bitsOf(want)) << "element " << i;
      outliers += std::fabs(want) > 8.0f;
    }
    EXPECT_GT(outliers, 0u);
  }
  // A few elements spelled out: v(i) = ((37 i + salt) % 251 - 125) / 16.
  auto hidden = f.value().loadAsFloat("layers.0.hidden").value();
  EXPECT_EQ(hidden.values[0], -7.6875f);
  EXPECT_EQ(hidden.values[1], -5.375f);
  EXPECT_EQ(hidden.values[3], -0.75f * 16.0f);           // column 3: an outlier channel
  EXPECT_EQ(hidden.values[7168 + 3], -6.4375f * 16.0f);  // row 1, column 3
  auto attn = f.value().loadAsFloat("layers.0.attn_out").value();
  EXPECT_EQ(attn.values[2], -3.1875f);
}

TEST(SafetensorsSample, WidensSpecialBf16AndF16PatternsExactly) {
  auto f = SafetensorsFile::open(kSample);
  ASSERT_TRUE(f.isOk()) << f.error().what;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> bf16 = {0.0f,
                                   -0.0f,
                                   inf,
                                   -inf,
                                   NAN,
                                   std::ldexp(1.0f, -133),
                                   std::ldexp(255.0f, 120),
                                   1.0f + std::ldexp(1.0f, -7),
                                   std::ldexp(1.0f, -126),
                                   -123.0f};
  const std::vector<float> f16 = {0.0f,
                                  -0.0f,
                                  inf,
                                  -inf,
                                  NAN,
                                  std::ldexp(1.0f, -24),
                                  65504.0f,
                                  1.0f + std::ldexp(1.0f, -10),
                                  std::ldexp(1.0f, -14),
                                  -std::ldexp(1023.0f, -24)};
  for (const auto& [name, want] : {std::pair{"specials.bf16", bf16}, std::pair{"specials.f16", f16}}) {
    SCOPED_TRACE(name);
    auto t = f.value().loadAsFloat(name);
    ASSERT_TRUE(t.isOk()) << t.error().what;
    ASSERT_EQ(t.value().values.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(t.value().values[i])) << i;
      } else {
        EXPECT_EQ(bitsOf(t.value().values[i]), bitsOf(want[i])) << i;  // -0 stays -0
      }
    }
  }
}

TEST(SafetensorsSample, KeepsTheMetadata) {
  auto f = SafetensorsFile::open(kSample);
  ASSERT_TRUE(f.isOk()) << f.error().what;
  const std::map<std::string, std::string> want = {{"producer", "tools/make_sample_safetensors.py"}};
  EXPECT_EQ(f.value().metadata(), want);
}

TEST(SafetensorsSample, ListsTheI64TensorButRefusesToLoadItAsFloat) {
  auto f = SafetensorsFile::open(kSample);
  ASSERT_TRUE(f.isOk()) << f.error().what;
  const TensorInfo* ids = f.value().find("layers.0.token_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, Dtype::kI64);
  const std::uint8_t* p = f.value().tensorData(*ids);
  for (std::uint64_t i = 0; i < 17; ++i) {
    std::int64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    EXPECT_EQ(v, static_cast<std::int64_t>(1000 * i + 7));
  }
  auto t = f.value().loadAsFloat("layers.0.token_ids");
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.error().kind, LoadErrorKind::kUnsupportedDtype);
  EXPECT_EQ(t.error().what, kSample +
                                ": tensor 'layers.0.token_ids': dtype I64 cannot be loaded as float "
                                "(BF16, F16 and F32 can)");
}

TEST(SafetensorsSample, LoadsAnEmptyTensorAndAScalar) {
  auto f = SafetensorsFile::open(kSample);
  ASSERT_TRUE(f.isOk()) << f.error().what;
  auto empty = f.value().loadAsFloat("layers.0.empty");
  ASSERT_TRUE(empty.isOk()) << empty.error().what;
  EXPECT_EQ(empty.value().shape, (std::vector<std::uint64_t>{0, 128}));
  EXPECT_TRUE(empty.value().values.empty());
  auto scalar = f.value().loadAsFloat("layers.0.input_scale");
  ASSERT_TRUE(scalar.isOk()) << scalar.error().what;
  EXPECT_TRUE(scalar.value().shape.empty());
  EXPECT_EQ(scalar.value().values, std::vector<float>{0.0078125f});
}

TEST(SafetensorsSample, UnknownTensorNameIsNotFoundAndTheErrorListsNames) {
  auto f = SafetensorsFile::open(kSample);
  ASSERT_TRUE(f.isOk()) << f.error().what;
  auto t = f.value().loadAsFloat("layers.1.hidden");
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.error().kind, LoadErrorKind::kNotFound);
  EXPECT_EQ(t.error().what.rfind(kSample + ": no tensor named 'layers.1.hidden' (the file has 8 tensors: "
                                           "'layers.0.token_ids', ",
                                 0),
            0u)
      << t.error().what;
}

TEST(SafetensorsSample, ParsingTheBytesInMemoryMatchesOpen) {
  std::ifstream in(kSample, std::ios::binary);
  const Bytes raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto fromMemory = SafetensorsFile::parse(raw.data(), raw.size());
  auto fromFile = SafetensorsFile::open(kSample);
  ASSERT_TRUE(fromMemory.isOk()) << fromMemory.error().what;
  ASSERT_TRUE(fromFile.isOk());
  EXPECT_EQ(fromMemory.value().source(), "<memory>");
  ASSERT_EQ(fromMemory.value().tensors().size(), fromFile.value().tensors().size());
  for (const TensorInfo& t : fromFile.value().tensors()) {
    const TensorInfo* m = fromMemory.value().find(t.name);
    ASSERT_NE(m, nullptr) << t.name;
    EXPECT_EQ(std::memcmp(fromMemory.value().tensorData(*m), fromFile.value().tensorData(t), t.byteCount()),
              0);
  }
}

// --- accepted headers ----------------------------------------------------------

TEST(SafetensorsAccepts, LittleEndianValuesOfEachLoadableDtype) {
  // F32 1.5 = 0x3FC00000, BF16 -2 = 0xC000, F16 0.5 = 0x3800, stored little-endian.
  const std::string json = "{\"f\":" + entry("F32", "[1]", 0, 4) + ",\"b\":" + entry("BF16", "[1]", 4, 6) +
                           ",\"h\":" + entry("F16", "[1]", 6, 8) + "}";
  auto f = parseFile(json, {0x00, 0x00, 0xC0, 0x3F, 0x00, 0xC0, 0x00, 0x38});
  ASSERT_TRUE(f.isOk()) << f.error().what;
  EXPECT_EQ(f.value().loadAsFloat("f").value().values, std::vector<float>{1.5f});
  EXPECT_EQ(f.value().loadAsFloat("b").value().values, std::vector<float>{-2.0f});
  EXPECT_EQ(f.value().loadAsFloat("h").value().values, std::vector<float>{0.5f});
}

TEST(SafetensorsAccepts, AnEmptyHeaderPaddedWithSpaces) {
  auto f = parseFile("{}      ", {});
  ASSERT_TRUE(f.isOk()) << f.error().what;
  EXPECT_TRUE(f.value().tensors().empty());
  EXPECT_TRUE(f.value().metadata().empty());
}

TEST(SafetensorsAccepts, EveryDtypeTheFormatDefinesWithItsWidth) {
  // One tensor per dtype, 8 elements each (whole bytes even for F4 and F6).
  std::string json = "{";
  std::uint64_t offset = 0;
  for (const DtypeInfo& d : kDtypes) {
    const std::uint64_t bytes = 8 * d.bits / 8;
    if (offset) json += ",";
    json += std::string("\"t_") + d.name + "\":" + entry(d.name, "[2,4]", offset, offset + bytes);
    offset += bytes;
  }
  json += "}";
  auto f = parseFile(json, Bytes(offset, 0));
  ASSERT_TRUE(f.isOk()) << f.error().what;
  EXPECT_EQ(f.value().tensors().size(), 22u);
  for (const DtypeInfo& d : kDtypes) {
    const TensorInfo* t = f.value().find(std::string("t_") + d.name);
    ASSERT_NE(t, nullptr) << d.name;
    EXPECT_EQ(t->dtype, d.dtype);
    EXPECT_EQ(t->byteCount(), d.bits);
    EXPECT_EQ(f.value().loadAsFloat(t->name).isOk(), isLoadableAsFloat(d.dtype)) << d.name;
  }
}

TEST(SafetensorsAccepts, EntriesInAnyOrderWithExtraFields) {
  const std::string json =
      "{\"b\":{\"data_offsets\":[12,20],\"note\":{\"x\":[1]},\"shape\":[2],\"dtype\":\"F32\"},"
      "\"__metadata__\":{\"format\":\"pt\"},\"a\":" +
      entry("BF16", "[2,3]", 0, 12) + "}";
  auto f = parseFile(json, kSmallData);
  ASSERT_TRUE(f.isOk()) << f.error().what;
  EXPECT_EQ(f.value().tensors()[0].name, "a");
  EXPECT_EQ(f.value().tensors()[1].name, "b");
  EXPECT_EQ(f.value().metadata().at("format"), "pt");
}

TEST(SafetensorsAccepts, EmptyTensorsAtBoundariesEvenWithHugeOtherExtents) {
  const std::string json = "{\"a\":" + entry("F32", "[0,18446744073709551615]", 0, 0) +
                           ",\"b\":" + entry("F32", "[1]", 0, 4) +
                           ",\"c\":" + entry("I64", "[4294967296,0]", 4, 4) + "}";
  auto f = parseFile(json, Bytes(4, 0));
  ASSERT_TRUE(f.isOk()) << f.error().what;
  EXPECT_EQ(f.value().find("a")->elementCount(), 0u);
  EXPECT_EQ(f.value().find("c")->elementCount(), 0u);
  EXPECT_TRUE(f.value().loadAsFloat("a").value().values.empty());
}

TEST(SafetensorsAccepts, AHeaderWithTwentyThousandTensors) {
  std::string json = "{";
  for (std::uint64_t i = 0; i < 20000; ++i) {
    json += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":" + entry("F32", "[1]", 4 * i, 4 * i + 4);
  }
  json += "}";
  auto f = parseFile(json, Bytes(4 * 20000, 0));
  ASSERT_TRUE(f.isOk()) << f.error().what;
  EXPECT_EQ(f.value().tensors().size(), 20000u);
  EXPECT_EQ(f.value().find("t19999")->begin, 4u * 19999);
}

// --- rejected headers: the file's framing ---------------------------------------

TEST(SafetensorsRejects, AFileShorterThanTheLengthPrefix) {
  expectError(SafetensorsFile::parse(Bytes{1, 0, 0}, "t.safetensors"), LoadErrorKind::kTooShort,
              "t.safetensors: file has 3 bytes, fewer than the 8-byte header length");
}

TEST(SafetensorsRejects, AHeaderLengthPastTheEndOfTheFile) {
  const Bytes raw = fileBytes(kSmallJson, kSmallData, kSmallJson.size() + kSmallData.size() + 1);
  expectError(SafetensorsFile::parse(raw, "t.safetensors"), LoadErrorKind::kHeaderLength,
              "t.safetensors: header length 134 runs past the end of the file (8 + 134 > 141 bytes)");
}

TEST(SafetensorsRejects, AHeaderLengthOverTheLimitBeforeLookingFurther) {
  expectError(SafetensorsFile::parse(fileBytes("{}", {}, 100000001), "t.safetensors"),
              LoadErrorKind::kHeaderTooLarge, "header length 100000001 exceeds the 100000000-byte limit");
  expectError(SafetensorsFile::parse(fileBytes("{}", {}, ~0ull - 1), "t.safetensors"),
              LoadErrorKind::kHeaderTooLarge, "header length 18446744073709551614 exceeds");
}

TEST(SafetensorsRejects, AHeaderLengthShorterThanTheJson) {
  expectError(
      SafetensorsFile::parse(fileBytes(kSmallJson, kSmallData, kSmallJson.size() - 3), "t.safetensors"),
      LoadErrorKind::kInvalidJson, "t.safetensors: header is not valid JSON: ");
}

TEST(SafetensorsRejects, AHeaderLengthThatSwallowsData) {
  const Bytes data = {'x', 0, 0, 0};
  expectError(SafetensorsFile::parse(fileBytes("{}", data, 3), "t.safetensors"), LoadErrorKind::kInvalidJson,
              "header is not valid JSON");
}

TEST(SafetensorsRejects, TruncatedJson) {
  const std::string cut = kSmallJson.substr(0, kSmallJson.size() / 2);
  expectError(parseFile(cut, {}), LoadErrorKind::kInvalidJson, "header is not valid JSON");
  expectError(parseFile("", {}), LoadErrorKind::kInvalidJson, "header is not valid JSON");
}

TEST(SafetensorsRejects, JsonWithInvalidUtf8OrComments) {
  expectError(parseFile("{\"a\xff\":{}}", {}), LoadErrorKind::kInvalidJson, "header is not valid JSON");
  expectError(parseFile("{} // c", {}), LoadErrorKind::kInvalidJson, "header is not valid JSON");
  // nlohmann-json alone would stop at the NUL and accept "{}".
  expectError(parseFile("{}\0junk"s, {}), LoadErrorKind::kInvalidJson,
              "t.safetensors: header is not valid JSON: NUL byte at header offset 2");
}

TEST(SafetensorsRejects, JsonThatIsNotAnObject) {
  expectError(parseFile("[1, 2]", {}), LoadErrorKind::kNotAnObject,
              "t.safetensors: header is a JSON array, not an object");
  expectError(parseFile("7", {}), LoadErrorKind::kNotAnObject, "header is a JSON number, not an object");
}

TEST(SafetensorsRejects, ATensorNameTwice) {
  const std::string json =
      "{\"a\":" + entry("BF16", "[2,3]", 0, 12) + ",\"a\":" + entry("F32", "[2]", 12, 20) + "}";
  expectError(parseFile(json, kSmallData), LoadErrorKind::kDuplicateKey,
              "t.safetensors: header JSON has the key 'a' twice in one object");
}

TEST(SafetensorsRejects, AFieldTwiceInOneEntry) {
  const std::string json =
      "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"dtype\":\"F32\",\"data_offsets\":[0,12]}}";
  expectError(parseFile(json, Bytes(12, 0)), LoadErrorKind::kDuplicateKey, "the key 'dtype' twice");
}

TEST(SafetensorsRejects, JsonNestedDeeperThanTheLimit) {
  const std::string deep = "{\"a\":{\"x\":" + std::string(100, '[') + std::string(100, ']') + "}}";
  expectError(parseFile(deep, {}), LoadErrorKind::kTooDeep, "header JSON nests deeper than 64 levels");
}

TEST(SafetensorsRejects, MetadataThatIsNotAnObjectOfStrings) {
  expectError(parseFile("{\"__metadata__\":{\"epoch\":3}}", {}), LoadErrorKind::kBadMetadata,
              "t.safetensors: '__metadata__' key 'epoch' holds a JSON number, not a string");
  expectError(parseFile("{\"__metadata__\":[]}", {}), LoadErrorKind::kBadMetadata,
              "'__metadata__' is a JSON array, not an object of strings");
}

TEST(SafetensorsRejects, AMissingFileOrADirectoryWithItsPath) {
  const std::string path = ::testing::TempDir() + "/no_such_dir/absent.safetensors";
  auto f = SafetensorsFile::open(path);
  ASSERT_FALSE(f.isOk());
  EXPECT_EQ(f.error().kind, LoadErrorKind::kIo);
  EXPECT_EQ(f.error().what, path + ": no such file");
  // A directory opens as a stream whose size reads as 2^63 - 1.
  auto d = SafetensorsFile::open(FP8SCALE_TEST_DATA_DIR);
  ASSERT_FALSE(d.isOk());
  EXPECT_EQ(d.error().what, std::string(FP8SCALE_TEST_DATA_DIR) + ": not a regular file");
}

// --- rejected headers: one tensor's entry -----------------------------------------

TEST(SafetensorsRejects, AnUnknownDtypeAtParseTime) {
  const std::string json =
      "{\"a\":" + entry("Q4_K", "[2,3]", 0, 12) + ",\"b\":" + entry("F32", "[2]", 12, 20) + "}";
  expectError(parseFile(json, kSmallData), LoadErrorKind::kUnknownDtype,
              "t.safetensors: tensor 'a': dtype 'Q4_K' is not a safetensors dtype");
  // Spelling matters: the format's names are upper case.
  expectError(parseFile("{\"a\":" + entry("bf16", "[1]", 0, 2) + "}", Bytes(2, 0)),
              LoadErrorKind::kUnknownDtype, "dtype 'bf16' is not a safetensors dtype");
}

TEST(SafetensorsRejects, AnEntryThatIsNotAnObjectOrLacksAField) {
  expectError(parseFile("{\"a\":\"F32\"}", {}), LoadErrorKind::kBadEntry,
              "t.safetensors: tensor 'a': entry is a JSON string, not an object");
  expectError(parseFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", Bytes(4, 0)), LoadErrorKind::kBadEntry,
              "tensor 'a': entry has no 'data_offsets'");
  expectError(parseFile("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", Bytes(4, 0)),
              LoadErrorKind::kBadEntry, "tensor 'a': 'dtype' is a JSON number, not a string");
}

TEST(SafetensorsRejects, NegativeOrNonIntegerExtents) {
  expectError(parseFile("{\"a\":" + entry("F32", "[2,-3]", 0, 24) + "}", Bytes(24, 0)),
              LoadErrorKind::kBadShape,
              "t.safetensors: tensor 'a': shape[1] is -3; extents must be non-negative integers");
  expectError(parseFile("{\"a\":" + entry("F32", "[1.5]", 0, 4) + "}", Bytes(4, 0)), LoadErrorKind::kBadShape,
              "shape[0] is 1.5;");
  expectError(parseFile("{\"a\":" + entry("F32", "[2.0]", 0, 8) + "}", Bytes(8, 0)), LoadErrorKind::kBadShape,
              "shape[0] is 2.0;");
  expectError(parseFile("{\"a\":" + entry("F32", "[\"2\"]", 0, 8) + "}", Bytes(8, 0)),
              LoadErrorKind::kBadShape, "shape[0] is \"2\";");
  expectError(parseFile("{\"a\":" + entry("F32", "[18446744073709551616]", 0, 8) + "}", Bytes(8, 0)),
              LoadErrorKind::kBadShape, "shape[0] is 1.8446744073709552e+19;");
  expectError(parseFile("{\"a\":" + entry("F32", "{}", 0, 8) + "}", Bytes(8, 0)), LoadErrorKind::kBadShape,
              "tensor 'a': 'shape' is a JSON object, not an array");
}

TEST(SafetensorsRejects, AnElementCountOver64Bits) {
  // 2^32 * 2^32 wraps to exactly 0 in 64-bit arithmetic: still an overflow.
  expectError(parseFile("{\"a\":" + entry("U8", "[4294967296,4294967296]", 0, 0) + "}", {}),
              LoadErrorKind::kOverflow,
              "t.safetensors: tensor 'a': shape [4294967296, 4294967296] has more than 2^64 - 1 elements");
}

TEST(SafetensorsRejects, AByteCountOver64Bits) {
  expectError(parseFile("{\"a\":" + entry("F64", "[4611686018427387904]", 0, 0) + "}", {}),
              LoadErrorKind::kOverflow,
              "tensor 'a': shape [4611686018427387904] of F64 needs more than 2^64 - 1 bytes");
}

TEST(SafetensorsRejects, ASubByteTensorThatEndsMidByte) {
  expectError(parseFile("{\"a\":" + entry("F4", "[3]", 0, 2) + "}", Bytes(2, 0)), LoadErrorKind::kPartialByte,
              "tensor 'a': shape [3] of F4 is 12 bits, not a whole number of bytes");
}

TEST(SafetensorsRejects, DataOffsetsThatAreNotTwoNonNegativeIntegers) {
  for (const char* offsets : {"[0]", "[0,4,8]", "[-4,0]", "[0,4.0]", "\"0,4\"", "[0,null]"}) {
    const std::string json =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":" + std::string(offsets) + "}}";
    expectError(parseFile(json, Bytes(4, 0)), LoadErrorKind::kBadOffsets,
                "tensor 'a': 'data_offsets' is " + std::string(offsets) +
                    "; it must be two non-negative integers [begin, end]");
  }
}

TEST(SafetensorsRejects, DataOffsetsThatEndBeforeTheyBegin) {
  expectError(parseFile("{\"a\":" + entry("F32", "[1]", 8, 4) + "}", Bytes(8, 0)), LoadErrorKind::kBadOffsets,
              "t.safetensors: tensor 'a': data_offsets [8, 4) end before they begin");
}

TEST(SafetensorsRejects, DataOffsetsPastTheEndOfTheData) {
  // The file was cut 4 bytes short: b's bytes are not all there.
  expectError(parseFile(kSmallJson, Bytes(16, 0)), LoadErrorKind::kOutOfRange,
              "t.safetensors: tensor 'b': data_offsets [12, 20) run past the end of the 16-byte data buffer");
  expectError(
      parseFile("{\"a\":" + entry("F32", "[1]", 18446744073709551611ull, 18446744073709551615ull) + "}",
                Bytes(4, 0)),
      LoadErrorKind::kOutOfRange, "run past the end of the 4-byte data buffer");
}

TEST(SafetensorsRejects, OverlappingTensors) {
  const std::string json =
      "{\"a\":" + entry("BF16", "[2,3]", 0, 12) + ",\"b\":" + entry("F32", "[2]", 8, 16) + "}";
  expectError(parseFile(json, Bytes(16, 0)), LoadErrorKind::kOverlap,
              "t.safetensors: tensor 'b': data_offsets [8, 16) overlap tensor 'a' at [0, 12)");
  // Two tensors on the very same bytes.
  const std::string same =
      "{\"a\":" + entry("F32", "[2]", 0, 8) + ",\"b\":" + entry("F32", "[2]", 0, 8) + "}";
  expectError(parseFile(same, Bytes(8, 0)), LoadErrorKind::kOverlap,
              "tensor 'b': data_offsets [0, 8) overlap tensor 'a'");
}

TEST(SafetensorsRejects, AByteCountThatDoesNotMatchTheShape) {
  const std::string json = "{\"x\":" + entry("BF16", "[7,8]", 0, 100) + "}";
  auto r = SafetensorsFile::parse(fileBytes(json, Bytes(100, 0)), "model.safetensors");
  expectError(r, LoadErrorKind::kByteCount,
              "model.safetensors: tensor 'x': data_offsets [0, 100) holds 100 bytes but shape [7, 8] of BF16 "
              "needs 112");
  EXPECT_EQ(r.error().what,
            "model.safetensors: tensor 'x': data_offsets [0, 100) holds 100 bytes but shape [7, 8] of BF16 "
            "needs 112");
}

TEST(SafetensorsRejects, BytesThatBelongToNoTensor) {
  const std::string gap =
      "{\"a\":" + entry("F32", "[1]", 0, 4) + ",\"b\":" + entry("F32", "[1]", 8, 12) + "}";
  expectError(
      parseFile(gap, Bytes(12, 0)), LoadErrorKind::kUncoveredBytes,
      "t.safetensors: bytes [4, 8) of the data buffer belong to no tensor (the next is 'b' at [8, 12))");
  expectError(parseFile(kSmallJson, Bytes(24, 0)), LoadErrorKind::kUncoveredBytes,
              "t.safetensors: bytes [20, 24) at the end of the 24-byte data buffer belong to no tensor");
  expectError(parseFile("{}", Bytes(1, 0)), LoadErrorKind::kUncoveredBytes, "bytes [0, 1) at the end");
}

TEST(SafetensorsRejects, NamesWithControlCharactersEscapedAndLongNamesCut) {
  const std::string name = "a\nb";
  expectError(parseFile("{\"a\\nb\":" + entry("Q", "[1]", 0, 1) + "}", Bytes(1, 0)),
              LoadErrorKind::kUnknownDtype, "tensor 'a\\x0ab': dtype 'Q'");
  const std::string longName(200, 'n');
  expectError(parseFile("{\"" + longName + "\":" + entry("Q", "[1]", 0, 1) + "}", Bytes(1, 0)),
              LoadErrorKind::kUnknownDtype, "tensor '" + std::string(64, 'n') + "'...: dtype 'Q'");
}

// --- broken files on disk, one per kind: open() names the file -------------------

struct BrokenFile {
  const char* name;
  Bytes bytes;
  LoadErrorKind kind;
  const char* message;  // after "<path>: "
};

std::vector<BrokenFile> brokenFiles() {
  const Bytes valid = fileBytes(kSmallJson, kSmallData);
  Bytes wrongLength = valid;
  wrongLength[0] = 200;
  const std::string cut = kSmallJson.substr(0, 40);
  return {
      {"HeaderLengthPastTheEnd", wrongLength, LoadErrorKind::kHeaderLength,
       "header length 200 runs past the end of the file (8 + 200 > 141 bytes)"},
      {"OffsetsPastTheEnd", Bytes(valid.begin(), valid.end() - 2), LoadErrorKind::kOutOfRange,
       "tensor 'b': data_offsets [12, 20) run past the end of the 18-byte data buffer"},
      {"OverlappingOffsets",
       fileBytes("{\"a\":" + entry("BF16", "[2,3]", 0, 12) + ",\"b\":" + entry("F32", "[2]", 10, 18) + "}",
                 Bytes(18, 0)),
       LoadErrorKind::kOverlap, "tensor 'b': data_offsets [10, 18) overlap tensor 'a' at [0, 12)"},
      {"UnknownDtype",
       fileBytes("{\"a\":" + entry("BF17", "[2,3]", 0, 12) + ",\"b\":" + entry("F32", "[2]", 12, 20) + "}",
                 kSmallData),
       LoadErrorKind::kUnknownDtype, "tensor 'a': dtype 'BF17' is not a safetensors dtype"},
      {"ShapeByteCountMismatch",
       fileBytes("{\"a\":" + entry("BF16", "[2,4]", 0, 12) + ",\"b\":" + entry("F32", "[2]", 12, 20) + "}",
                 kSmallData),
       LoadErrorKind::kByteCount,
       "tensor 'a': data_offsets [0, 12) holds 12 bytes but shape [2, 4] of BF16 needs 16"},
      {"TruncatedJson", fileBytes(cut, {}), LoadErrorKind::kInvalidJson,
       "header is not valid JSON: [json.exception.parse_error.101] parse error at line 1, column 41"},
  };
}

void PrintTo(const BrokenFile& c, std::ostream* os) { *os << c.name; }

class BrokenFileOnDisk : public ::testing::TestWithParam<BrokenFile> {};

TEST_P(BrokenFileOnDisk, GivesItsErrorNamingTheFile) {
  const BrokenFile& c = GetParam();
  const std::string path = ::testing::TempDir() + "/broken_" + c.name + ".safetensors";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(c.bytes.data()), static_cast<std::streamsize>(c.bytes.size()));
    ASSERT_TRUE(out.good());
  }
  auto f = SafetensorsFile::open(path);
  std::remove(path.c_str());
  expectError(f, c.kind, path + ": " + c.message);
}

INSTANTIATE_TEST_SUITE_P(EachKind, BrokenFileOnDisk, ::testing::ValuesIn(brokenFiles()),
                         [](const ::testing::TestParamInfo<BrokenFile>& info) { return info.param.name; });

}  // namespace
}  // namespace pipeline
}  // namespace fp8scale
