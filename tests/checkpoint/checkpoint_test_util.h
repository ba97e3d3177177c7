// Helpers shared by the checkpoint tests: a scratch directory, tensors with known values in
// every dtype, bitwise comparison, raw file surgery (truncate, flip a byte), and a sample
// training checkpoint to save and check.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/env.h"
#include "checkpoint/safetensors.h"
#include "core/copy.h"
#include "core/factory.h"

namespace trident::checkpoint::testing {

// A fresh directory under the system's temporary directory, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "trident_checkpoint_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return join_path(path_, name); }

 private:
  std::string path_;
};

// A contiguous tensor of `shape` and `dtype` whose element i has bits derived from (i, salt)
// by a multiplicative hash: every bit pattern is possible, NaN payloads and subnormals
// included, so a round trip that converts values instead of copying bytes is caught.
inline Tensor hashed_tensor(const Shape& shape, DType dtype, uint64_t salt) {
  Tensor t = empty(shape, dtype);
  auto* bytes = static_cast<unsigned char*>(t.raw_data());
  const size_t esize = element_size(dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint64_t h =
        (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull ^ (salt * 0xBF58476D1CE4E5B9ull);
    const uint64_t bits = h ^ (h >> 29);
    std::memcpy(bytes + i * esize, &bits, esize);  // the low bytes, little-endian
  }
  return t;
}

// Equal dtype, shape and bytes of the contiguous values.
inline ::testing::AssertionResult same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << a.dtype() << " vs " << b.dtype();
  }
  if (!(a.shape() == b.shape())) {
    return ::testing::AssertionFailure() << "shape " << a.shape() << " vs " << b.shape();
  }
  const Tensor ca = core::contiguous(a), cb = core::contiguous(b);
  if (ca.nbytes() > 0 && std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) != 0) {
    return ::testing::AssertionFailure()
           << "values differ: " << ca.to_string(16) << " vs " << cb.to_string(16);
  }
  return ::testing::AssertionSuccess();
}

inline std::string slurp(const std::string& path) {
  return read_file(default_env(), path).value();
}

inline void spit(const std::string& path, const std::string& data) {
  auto file = default_env()->new_writable_file(path).value();
  file->append(data).throw_if_error();
  file->close().throw_if_error();
}

inline void flip_byte(const std::string& path, size_t offset) {
  std::string data = slurp(path);
  data.at(offset) ^= 0x20;
  spit(path, data);
}

inline void truncate_file(const std::string& path, size_t size) {
  spit(path, slurp(path).substr(0, size));
}

// Expects a failed status whose message contains every one of `parts`.
template <class... Parts>
::testing::AssertionResult fails_with(const Status& s, const Parts&... parts) {
  if (s.is_ok()) return ::testing::AssertionFailure() << "succeeded, expected an error";
  for (std::string part : {std::string(parts)...}) {
    if (s.message().find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks \"" << part << "\": " << s.message();
    }
  }
  return ::testing::AssertionSuccess() << s.message();
}

// A small training checkpoint: model and optimizer tensors (several dtypes, a 0-d tensor) and
// a JSON state file, all derived from `salt`.
struct Contents {
  std::vector<NamedTensor> model;
  std::vector<NamedTensor> optim;
  std::string state;
};

inline Contents sample_contents(uint64_t salt) {
  return {{{"wte.weight", hashed_tensor({11, 4}, DType::kF32, salt)},
           {"h.0.ln_1.weight", hashed_tensor({4}, DType::kBF16, salt + 1)},
           {"scalar", hashed_tensor({}, DType::kF64, salt + 2)}},
          {{"exp_avg.wte.weight", hashed_tensor({11, 4}, DType::kF32, salt + 3)},
           {"step", hashed_tensor({}, DType::kI64, salt + 4)}},
          R"({"step": )" + std::to_string(salt) + "}"};
}

// Saves `c` as checkpoint `name` in `root`; returns the checkpoint's directory.
inline StatusOr<std::string> save(Env* env, const std::string& root, const std::string& name,
                                  const Contents& c) {
  auto begun = CheckpointWriter::begin(env, root, name);
  if (!begun.is_ok()) return begun.status();
  CheckpointWriter& w = begun.value();
  Status s = w.write_safetensors("model.safetensors", c.model, {{"format", "pt"}});
  if (s.is_ok()) s = w.write_safetensors("optim.safetensors", c.optim);
  if (s.is_ok()) s = w.write_file("state.json", c.state);
  if (!s.is_ok()) return s;
  w.set_metadata("name", name);
  return w.commit();
}

inline void expect_contents(const CheckpointReader& r, const Contents& c) {
  for (const auto* group : {&c.model, &c.optim})
    for (const NamedTensor& nt : *group)
      EXPECT_TRUE(same_tensor(r.load_tensor(nt.name).value(), nt.tensor)) << nt.name;
  EXPECT_EQ(r.read_file("state.json").value(), c.state);
}

}  // namespace trident::checkpoint::testing
