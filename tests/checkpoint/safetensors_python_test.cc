// Cross-checks trident's safetensors reader and writer against an independent implementation:
// safetensors_check.py (next to this file) parses with Python's struct and json and numpy only.
// trident writes a file that the script checks, and reads a file that the script writes; the
// two sides agree on tensor names and values by the conventions in the script's docstring.
// Skips (with the reason) when python3 or numpy is missing. The script is found next to this
// source file (__FILE__), so the test runs from the build tree of this checkout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "core/views.h"

namespace trident::checkpoint {
namespace {

using testing::hashed_tensor;
using testing::same_tensor;
using testing::ScratchDir;

const std::vector<double> kFloats = {0.0,     -0.0,    1.5,   -2.0,    0.25,     3.0,
                                     0x1p-14, 0x1p-24, 448.0, -1024.0, INFINITY, -INFINITY};
const std::vector<int64_t> kI32 = {0, 1, -1, 2147483647, -2147483648LL, 123456789};
const std::vector<int64_t> kI64 = {0, -1, INT64_MAX, INT64_MIN, (1LL << 53) + 1};
const std::vector<int64_t> kU16 = {0, 1, 65535, 32768, 12345};

int salt_of(DType d) {  // SALTS in the script
  switch (d) {
    case DType::kF32:
      return 1;
    case DType::kF64:
      return 2;
    case DType::kBF16:
      return 3;
    case DType::kF16:
      return 4;
    case DType::kI32:
      return 5;
    case DType::kI64:
      return 6;
    case DType::kU16:
      return 7;
  }
  return 0;
}

// KNOWN[d] in the script, as a tensor of dtype d (values converted by trident).
Tensor known(DType d) {
  if (is_floating(d)) return core::cast(from_vector<double>(kFloats, {12}), d);
  const std::vector<int64_t>& v = d == DType::kI32 ? kI32 : d == DType::kI64 ? kI64 : kU16;
  if (d == DType::kI64) return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
  Tensor t = empty({static_cast<int64_t>(v.size())}, d);
  for (size_t i = 0; i < v.size(); ++i) {
    if (d == DType::kI32) t.data_ptr<int32_t>()[i] = static_cast<int32_t>(v[i]);
    if (d == DType::kU16) t.data_ptr<uint16_t>()[i] = static_cast<uint16_t>(v[i]);
  }
  return t;
}

// Runs the script; returns its exit status, with its output in `output`.
int run_script(const ScratchDir& dir, const std::string& args, std::string* output) {
  const std::string source = __FILE__;
  const std::string script = source.substr(0, source.rfind('/')) + "/safetensors_check.py";
  const std::string python =
      exists(default_env(), "/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string log = dir / "script.log";
  const int rc =
      std::system((python + " '" + script + "' " + args + " > '" + log + "' 2>&1").c_str());
  *output = exists(default_env(), log) ? testing::slurp(log) : "";
  const int status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (status == 127) *output = "no python3 interpreter: " + *output;
  return status;
}

TEST(SafetensorsPython, PythonReadsWhatTridentWrites) {
  ScratchDir dir;
  std::vector<NamedTensor> tensors;
  for (DType d : kAllDTypes) {
    const std::string name = safetensors_dtype_name(d);
    tensors.push_back({"known." + name, known(d)});
    tensors.push_back({"hash." + name, hashed_tensor({3, 5}, d, salt_of(d))});
  }
  tensors.push_back({"scalar.F64", scalar_tensor(2.5, DType::kF64)});
  tensors.push_back({"empty.BF16", empty({2, 0}, DType::kBF16)});
  tensors.push_back(
      {"transposed.F32", views::transpose(from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}), 0, 1)});
  const std::string path = dir / "trident.safetensors";
  ASSERT_TRUE(
      save_safetensors(default_env(), path, tensors, {{"writer", "trident"}, {"unicode", "ünï ✓"}})
          .is_ok());
  std::string output;
  const int rc = run_script(dir, "check '" + path + "'", &output);
  if (rc == 77 || rc == 127) GTEST_SKIP() << output;
  EXPECT_EQ(rc, 0) << output;
}

TEST(SafetensorsPython, TridentReadsWhatPythonWrites) {
  ScratchDir dir;
  const std::string path = dir / "python.safetensors";
  std::string output;
  const int rc = run_script(dir, "write '" + path + "'", &output);
  if (rc == 77 || rc == 127) GTEST_SKIP() << output;
  ASSERT_EQ(rc, 0) << output;

  auto reader = SafetensorsReader::open(default_env(), path).value();
  EXPECT_EQ(reader.metadata(), (StringMap{{"writer", "python"}}));
  EXPECT_EQ(reader.entries().size(), 2 * std::size(kAllDTypes) + 2);
  for (DType d : kAllDTypes) {
    const std::string name = safetensors_dtype_name(d);
    SCOPED_TRACE(name);
    const Tensor k = reader.load("known." + name).value();
    EXPECT_TRUE(same_tensor(k, known(d)));
    if (is_floating(d)) {  // and read back as values: signed zeros and infinities included
      const std::vector<double> got = to_vector<double>(k);
      for (size_t i = 0; i < kFloats.size(); ++i) {
        EXPECT_EQ(got[i], kFloats[i]);
        EXPECT_EQ(std::signbit(got[i]), std::signbit(kFloats[i]));
      }
    }
    EXPECT_TRUE(same_tensor(reader.load("hash." + name).value(),
                            hashed_tensor({3, 5}, d, salt_of(d) + 100)));
  }
  EXPECT_EQ(reader.load("scalar.F64").value().item(), 2.5);
  EXPECT_EQ(reader.load("scalar.F64").value().dim(), 0);
  EXPECT_EQ(reader.load("empty.BF16").value().shape(), (Shape{2, 0}));
}

}  // namespace
}  // namespace trident::checkpoint
