#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <vector>

#include "checkpoint_test_util.h"
#include "core/views.h"

namespace trident::checkpoint {
namespace {

using testing::fails_with;
using testing::hashed_tensor;
using testing::same_tensor;
using testing::ScratchDir;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

// A safetensors file with this header text and data section, header length as stated.
std::string raw_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

Status open_raw(const ScratchDir& dir, const std::string& contents) {
  testing::spit(dir / "x.safetensors", contents);
  return SafetensorsReader::open(default_env(), dir / "x.safetensors").status();
}

TEST(Safetensors, DTypeNames) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(dtype_from_safetensors(safetensors_dtype_name(d)), d);
    EXPECT_EQ(safetensors_element_size(safetensors_dtype_name(d)), element_size(d));
  }
  EXPECT_STREQ(safetensors_dtype_name(DType::kBF16), "BF16");
  EXPECT_EQ(dtype_from_safetensors("I8"), std::nullopt);
  EXPECT_EQ(safetensors_element_size("I8"), 1u);
  EXPECT_EQ(safetensors_element_size("F33"), std::nullopt);
}

// Every dtype, 0-d, empty and awkward shapes, values with every bit pattern.
TEST(Safetensors, RoundTripEveryDTypeAndShape) {
  ScratchDir dir;
  const std::vector<Shape> shapes = {Shape{},  Shape{0},    Shape{3, 0, 2}, Shape{1},
                                     Shape{7}, Shape{3, 5}, Shape{2, 3, 4}};
  std::vector<NamedTensor> tensors;
  uint64_t salt = 0;
  for (DType d : kAllDTypes)
    for (const Shape& s : shapes)
      tensors.push_back({std::string(dtype_name(d)) + "/" + s.str(), hashed_tensor(s, d, ++salt)});
  const StringMap metadata = {{"format", "pt"}, {"note", "ünïcödé ✓"}};
  ASSERT_TRUE(save_safetensors(default_env(), dir / "all.safetensors", tensors, metadata).is_ok());

  auto reader = SafetensorsReader::open(default_env(), dir / "all.safetensors").value();
  EXPECT_EQ(reader.metadata(), metadata);
  EXPECT_EQ(reader.entries().size(), tensors.size());
  EXPECT_EQ(reader.data_start() % 8, 0u);
  for (const NamedTensor& nt : tensors) {
    const SafetensorsEntry* e = reader.find(nt.name);
    ASSERT_NE(e, nullptr) << nt.name;
    EXPECT_EQ(e->dtype, nt.tensor.dtype());
    EXPECT_EQ(e->dtype_name, safetensors_dtype_name(nt.tensor.dtype()));
    EXPECT_EQ(e->shape, nt.tensor.shape());
    EXPECT_EQ(e->begin % element_size(nt.tensor.dtype()), 0u) << "misaligned " << nt.name;
    EXPECT_TRUE(same_tensor(reader.load(nt.name).value(), nt.tensor)) << nt.name;
  }
  auto all = load_safetensors(default_env(), dir / "all.safetensors").value();
  EXPECT_EQ(all.size(), tensors.size());
}

TEST(Safetensors, NonContiguousTensorsAreWrittenAsTheirValues) {
  ScratchDir dir;
  const Tensor base = hashed_tensor({4, 6}, DType::kF32, 1);
  const std::vector<NamedTensor> tensors = {
      {"transposed", views::transpose(base, 0, 1)},
      {"strided", views::as_strided(base, {2, 3}, {12, 2}, 1)},
      {"broadcast", views::expand(hashed_tensor({1, 3}, DType::kBF16, 2), {4, 3})},
  };
  ASSERT_TRUE(save_safetensors(default_env(), dir / "v.safetensors", tensors).is_ok());
  auto reader = SafetensorsReader::open(default_env(), dir / "v.safetensors").value();
  for (const NamedTensor& nt : tensors) {
    const Tensor loaded = reader.load(nt.name).value();
    EXPECT_TRUE(loaded.is_contiguous());
    EXPECT_TRUE(same_tensor(loaded, nt.tensor)) << nt.name;
  }
}

// Byte-for-byte what the reference implementation writes (its serializer tests
// test_serialization, test_serialization_forced_alignement and test_empty).
TEST(Safetensors, HeaderBytesMatchTheReferenceWriter) {
  const Tensor values = from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  const std::string data(static_cast<const char*>(values.raw_data()), 24);
  const std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  EXPECT_EQ(safetensors_header(std::vector<NamedTensor>{{"attn.0", values}}, {}),
            le64(64) + header);

  const Tensor v4 = from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 1, 2, 3});
  EXPECT_EQ(safetensors_header(std::vector<NamedTensor>{{"attn0", v4}}, {}),
            le64(72) + R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})" +
                std::string(7, ' '));

  EXPECT_EQ(safetensors_header({}, {}), le64(8) + "{}" + std::string(6, ' '));
  EXPECT_EQ(safetensors_header({}, {{"framework", "pt"}}),
            le64(40) + R"({"__metadata__":{"framework":"pt"}})" + std::string(5, ' '));

  ScratchDir dir;
  ASSERT_TRUE(save_safetensors(default_env(), dir / "a.safetensors",
                               std::vector<NamedTensor>{{"attn.0", values}})
                  .is_ok());
  EXPECT_EQ(testing::slurp(dir / "a.safetensors"), le64(64) + header + data);
}

// See Note [Tensor order in a safetensors file].
TEST(Safetensors, DataIsOrderedByElementSizeStably) {
  const std::vector<NamedTensor> tensors = {
      {"a_bf16", hashed_tensor({3}, DType::kBF16, 1)},
      {"b_f32", hashed_tensor({1}, DType::kF32, 2)},
      {"c_u16", hashed_tensor({1}, DType::kU16, 3)},
      {"d_f64", hashed_tensor({2}, DType::kF64, 4)},
      {"e_i32", hashed_tensor({3}, DType::kI32, 5)},
  };
  ScratchDir dir;
  ASSERT_TRUE(save_safetensors(default_env(), dir / "o.safetensors", tensors).is_ok());
  auto reader = SafetensorsReader::open(default_env(), dir / "o.safetensors").value();
  std::vector<std::string> order;
  for (const SafetensorsEntry& e : reader.entries()) order.push_back(e.name);
  EXPECT_EQ(order, (std::vector<std::string>{"d_f64", "b_f32", "e_i32", "a_bf16", "c_u16"}));
}

TEST(Safetensors, LoadElementsReadsAPartition) {
  ScratchDir dir;
  const Tensor t = hashed_tensor({5, 7}, DType::kBF16, 9);
  ASSERT_TRUE(
      save_safetensors(default_env(), dir / "p.safetensors", std::vector<NamedTensor>{{"w", t}})
          .is_ok());
  auto reader = SafetensorsReader::open(default_env(), dir / "p.safetensors").value();
  const Tensor flat = views::view(t, {35});
  for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 35}, {3, 11}, {34, 1}, {35, 0}}) {
    EXPECT_TRUE(same_tensor(reader.load_elements("w", first, count).value(),
                            views::narrow(flat, 0, first, count)));
  }
  EXPECT_THROW((void)reader.load_elements("w", 30, 6), Error);
  EXPECT_THROW((void)reader.load_elements("w", -1, 2), Error);
}

TEST(Safetensors, WriterRejectsBadNames) {
  const Tensor t = zeros({2});
  EXPECT_THROW(safetensors_header(std::vector<NamedTensor>{{"a", t}, {"a", t}}, {}), Error);
  EXPECT_THROW(safetensors_header(std::vector<NamedTensor>{{"__metadata__", t}}, {}), Error);
  EXPECT_THROW(safetensors_header(std::vector<NamedTensor>{{"", t}}, {}), Error);
  EXPECT_THROW(safetensors_header(std::vector<NamedTensor>{{"bad \xff utf8", t}}, {}), Error);
  try {
    (void)safetensors_header(std::vector<NamedTensor>{{"w", t}, {"w", t}}, {});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'w' is given twice"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, ReaderNamesTheTensorAndWhatIsMissing) {
  ScratchDir dir;
  ASSERT_TRUE(
      save_safetensors(default_env(), dir / "n.safetensors",
                       std::vector<NamedTensor>{{"h.0.w", zeros({2})}, {"h.1.w", zeros({2})}})
          .is_ok());
  auto reader = SafetensorsReader::open(default_env(), dir / "n.safetensors").value();
  EXPECT_TRUE(fails_with(reader.load("h.2.w").status(), dir / "n.safetensors",
                         "has no tensor 'h.2.w'", "'h.0.w', 'h.1.w'"));
}

TEST(Safetensors, OtherDTypesAreListedButNotLoaded) {
  ScratchDir dir;
  const std::string header = R"({"mask":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]},)"
                             R"("q":{"dtype":"I8","shape":[2],"data_offsets":[4,6]},)"
                             R"("w":{"dtype":"F16","shape":[1],"data_offsets":[6,8]}})";
  ASSERT_TRUE(open_raw(dir, raw_file(header, std::string(8, '\1'))).is_ok());
  auto reader = SafetensorsReader::open(default_env(), dir / "x.safetensors").value();
  ASSERT_EQ(reader.entries().size(), 3u);
  EXPECT_EQ(reader.find("q")->dtype_name, "I8");
  EXPECT_EQ(reader.find("q")->dtype, std::nullopt);
  Status s = reader.load("q").status();
  EXPECT_EQ(s.kind(), ErrorKind::kNotImplemented);
  EXPECT_TRUE(fails_with(s, "tensor 'q' has dtype I8", "does not support"));
  EXPECT_TRUE(fails_with(reader.load("mask").status(), "BOOL"));
  EXPECT_EQ(reader.load("w").value().dtype(), DType::kF16);
}

// A parameter's values: an integer or boolean tensor is refused, not converted to weights (an
// I32 bias loaded as its integers).
TEST(Safetensors, LoadFloatingRefusesIntegerAndBooleanTensors) {
  ScratchDir dir;
  const std::string header = R"({"bias":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},)"
                             R"("mask":{"dtype":"BOOL","shape":[2],"data_offsets":[4,6]},)"
                             R"("w":{"dtype":"BF16","shape":[1],"data_offsets":[6,8]}})";
  ASSERT_TRUE(open_raw(dir, raw_file(header, std::string(8, '\1'))).is_ok());
  auto reader = SafetensorsReader::open(default_env(), dir / "x.safetensors").value();
  EXPECT_TRUE(reader.load("bias").is_ok());  // as what it is
  const Status s = reader.load_floating("bias").status();
  EXPECT_EQ(s.kind(), ErrorKind::kValue);
  EXPECT_TRUE(fails_with(s, dir / "x.safetensors", "tensor 'bias' has dtype I32, which is not floating-point: a "
                         "model's parameter loads from F32, F64, BF16 or F16"));
  EXPECT_TRUE(fails_with(reader.load_floating("mask").status(), "tensor 'mask' has dtype BOOL, which is not floating"));
  EXPECT_EQ(reader.load_floating("w").value().dtype(), DType::kBF16);
  EXPECT_TRUE(fails_with(reader.load_floating("nope").status(), "has no tensor 'nope'"));
}

TEST(Safetensors, UnpaddedHeadersAndExtraFieldsAreAccepted) {
  ScratchDir dir;
  // No padding, tensors listed out of offset order, an extra field (the reference ignores it).
  const std::string header = R"({"b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},)"
                             R"("a":{"dtype":"I32","shape":[1],"data_offsets":[0,4],"extra":1}})";
  const Tensor ab = from_vector<int32_t>({7, -9}, {2});
  ASSERT_TRUE(
      open_raw(dir, raw_file(header, std::string(static_cast<const char*>(ab.raw_data()), 8)))
          .is_ok());
  auto reader = SafetensorsReader::open(default_env(), dir / "x.safetensors").value();
  EXPECT_EQ(reader.entries()[0].name, "a");
  EXPECT_EQ(reader.load("a").value().item(), 7);
  EXPECT_EQ(reader.load("b").value().item(), -9);
}

struct BadFile {
  const char* what;
  std::string contents;
  std::vector<std::string> message;
};

TEST(Safetensors, InvalidFilesAreRefusedWithTheReason) {
  const std::string f32x2 = R"("dtype":"F32","shape":[2])";
  const std::vector<BadFile> cases = {
      {"shorter than the length field", "abc", {"3 bytes long", "too short"}},
      {"length past the end",
       le64(100) + "{}",
       {"header length 100", "runs past the end of the 10-byte file"}},
      {"invalid JSON", raw_file(R"({"a":)", ""), {"not valid JSON"}},
      {"invalid UTF-8", raw_file("{\"\xff\":1}", ""), {"not valid JSON"}},
      {"not an object", raw_file("[1, 2]  ", ""), {"does not start with '{'"}},
      {"duplicate name",
       raw_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]},"a":{)" + f32x2 +
                    R"(,"data_offsets":[8,16]}})",
                std::string(16, '\0')),
       {"the key 'a' twice"}},
      {"unknown dtype",
       raw_file(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "abcd"),
       {"tensor 'a'", "unknown dtype 'F33'", "BF16"}},
      {"shape/offset mismatch",
       raw_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,7]}})", std::string(7, 'x')),
       {"tensor 'a'", "need 8 bytes", "[0, 7] hold 7"}},
      {"offsets reversed",
       raw_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[8,0]}})", std::string(8, 'x')),
       {"end before they begin"}},
      {"overlap",
       raw_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 +
                    R"(,"data_offsets":[4,12]}})",
                std::string(12, 'x')),
       {"'a' [0, 8] and 'b' [4, 12] overlap"}},
      {"gap",
       raw_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 +
                    R"(,"data_offsets":[12,20]}})",
                std::string(20, 'x')),
       {"4 unused bytes before tensor 'b'"}},
      {"not starting at 0",
       raw_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[4,12]}})", std::string(12, 'x')),
       {"4 unused bytes before tensor 'a'"}},
      {"data truncated",
       raw_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]}})", std::string(5, 'x')),
       {"truncated", "need 8 data bytes", "has 5"}},
      {"trailing bytes",
       raw_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]}})", std::string(9, 'x')),
       {"1 bytes after the last tensor"}},
      {"missing field",
       raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", ""),
       {"tensor 'a'", "data_offsets"}},
      {"negative dim",
       raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 'x')),
       {"\"shape\" is not a list of non-negative integers"}},
      {"fractional dim",
       raw_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", std::string(8, 'x')),
       {"non-negative integers"}},
      {"offsets not a pair",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", ""),
       {"not a pair"}},
      {"too many dims",
       raw_file(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})",
                "abcd"),
       {"9 dims", "at most 8"}},
      {"element count overflows",
       raw_file(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})",
                "abcd"),
       {"too many elements"}},
      {"byte count overflows",
       raw_file(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}})",
                "abcd"),
       {"too many bytes"}},
      {"metadata not strings",
       raw_file(R"({"__metadata__":{"step":100}})", ""),
       {"'__metadata__' value of 'step' is not a string"}},
      {"description not an object",
       raw_file(R"({"a":[1]})", ""),
       {"tensor 'a'", "not a JSON object"}},
  };
  ScratchDir dir;
  for (const BadFile& c : cases) {
    SCOPED_TRACE(c.what);
    Status s = open_raw(dir, c.contents);
    EXPECT_TRUE(fails_with(s, dir / "x.safetensors"));
    for (const std::string& part : c.message) EXPECT_TRUE(fails_with(s, part));
  }
}

// Cutting a valid file anywhere (inside the length field, the header, or the data, including
// exactly at each boundary) makes it invalid, and the message says which part is cut.
TEST(Safetensors, TruncationAtEveryByteIsRefused) {
  ScratchDir dir;
  const std::vector<NamedTensor> tensors = {{"a", hashed_tensor({3}, DType::kF32, 1)},
                                            {"b", hashed_tensor({2, 2}, DType::kBF16, 2)},
                                            {"c", hashed_tensor({0}, DType::kF64, 3)}};
  ASSERT_TRUE(save_safetensors(default_env(), dir / "full.safetensors", tensors).is_ok());
  const std::string full = testing::slurp(dir / "full.safetensors");
  const size_t data_start =
      SafetensorsReader::open(default_env(), dir / "full.safetensors").value().data_start();
  for (size_t cut = 0; cut < full.size(); ++cut) {
    SCOPED_TRACE("cut at byte " + std::to_string(cut) + " of " + std::to_string(full.size()));
    Status s = open_raw(dir, full.substr(0, cut));
    const char* expected = cut < 8            ? "too short"
                           : cut < data_start ? "runs past the end"
                                              : "truncated";
    EXPECT_TRUE(fails_with(s, expected));
  }
  EXPECT_TRUE(open_raw(dir, full).is_ok());
}

}  // namespace
}  // namespace trident::checkpoint
