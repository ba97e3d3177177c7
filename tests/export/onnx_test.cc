// ONNX export: the decoder graphs written and read back with optimum's input and output names,
// the weight types, external data, and bad input refused naming what is wrong. That ONNX Runtime runs the
// files and agrees with trident is tests/export/onnx_runtime_test.py, which runs
// OnnxRuntimeCases below with TRIDENT_ONNX_CASES set: each case's model, its inputs, and
// trident's logits and greedy tokens for the Node script to check.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "data/test_data.h"
#include "export/onnx_model.h"
#include "models/generate.h"
#include "models/registry.h"
#include "support/tiny_model_configs.h"

namespace trident::exporting::onnx_testing {
namespace {

namespace fs = std::filesystem;

class OnnxExportTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }
  data::testing::TempDir dir_;
};

// A model with random weights: the init's, plus noise on every parameter, so norms and biases
// are not 1 and 0 and the logits are far from ties.
std::unique_ptr<models::CausalLM> random_model(const models::ModelConfig& cfg, uint64_t seed) {
  auto model = models::build_model(cfg);
  autograd::NoGradGuard no_grad;
  Generator gen(seed);
  for (const auto& [n, p] : model->named_parameters()) {
    const Tensor noise = core::contiguous(randn(p.shape(), gen));
    float* d = p.data_ptr<float>();
    const float* r = noise.data_ptr<float>();
    for (int64_t i = 0; i < p.numel(); ++i) d[i] += 0.3f * r[i];
  }
  return model;
}

StatusOr<OnnxExportResult> export_model(const models::CausalLM& model, const std::string& path, OnnxWeights w,
                                        uint64_t inline_bytes = kOnnxInlineBytes) {
  std::vector<checkpoint::TensorSpec> specs;
  std::vector<Tensor> values;
  for (const auto& [n, p] : model.named_parameters()) {
    specs.push_back({n, p.dtype(), p.shape()});
    values.push_back(p);
  }
  return write_onnx_model(path, model.model_config(), specs, [&](size_t i) -> StatusOr<Tensor> { return values[i]; }, w,
                          inline_bytes);
}

std::vector<std::string> optimum_inputs(int64_t layers) {
  std::vector<std::string> v = {"input_ids", "attention_mask", "position_ids"};
  for (int64_t i = 0; i < layers; ++i)
    for (const char* kv : {".key", ".value"}) v.push_back("past_key_values." + std::to_string(i) + kv);
  return v;
}

std::vector<std::string> optimum_outputs(int64_t layers) {
  std::vector<std::string> v = {"logits"};
  for (int64_t i = 0; i < layers; ++i)
    for (const char* kv : {".key", ".value"}) v.push_back("present." + std::to_string(i) + kv);
  return v;
}

TEST_F(OnnxExportTest, GraphsHaveOptimumNamesAndTheAskedWeightTypes) {
  const std::set<std::string> standard = {"Add", "And", "Cast", "Concat", "DequantizeLinear", "Gather",
                                          "LayerNormalization", "LessOrEqual", "MatMul", "Mul", "Neg", "Range",
                                          "Reciprocal", "ReduceMean", "Reshape", "Shape", "Sigmoid", "Softmax",
                                          "Split", "Sqrt", "Squeeze", "Tanh", "Transpose", "Unsqueeze", "Where"};
  for (const auto& [name, cfg] : {std::pair{"gpt2", models::testing::tiny_gpt2()},
                                  std::pair{"llama", models::testing::tiny_llama(/*tied=*/false)}}) {
    auto model = random_model(cfg, 1);
    uint64_t previous = 0;
    for (OnnxWeights w : {OnnxWeights::kF32, OnnxWeights::kF16, OnnxWeights::kInt8}) {
      SCOPED_TRACE(std::string(name) + " " + onnx_weights_name(w));
      auto r = export_model(*model, path(std::string(name) + ".onnx"), w);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      const OnnxFileSummary& f = r.value().file;
      EXPECT_EQ(r.value().architecture, name);
      EXPECT_EQ(f.opset, 17);
      EXPECT_EQ(f.inputs, optimum_inputs(cfg.n_layer));
      EXPECT_EQ(f.outputs, optimum_outputs(cfg.n_layer));
      EXPECT_EQ(r.value().bytes, fs::file_size(path(std::string(name) + ".onnx")));
      for (const std::string& op : f.op_types) EXPECT_TRUE(standard.count(op)) << op;
      EXPECT_EQ(f.op_types.count("DequantizeLinear"), w == OnnxWeights::kInt8 ? 1u : 0u);
      EXPECT_EQ(f.op_types.count("LayerNormalization"), std::string(name) == "gpt2" ? 1u : 0u);
      // f16 halves the matrices, int8 quarters the linear layers' (the embeddings stay f32).
      if (previous > 0) {
        EXPECT_LT(f.initializer_bytes, previous);
      }
      previous = f.initializer_bytes;
    }
  }
}

TEST_F(OnnxExportTest, BadInputIsRefusedNamingWhatIsWrong) {
  auto bad = parse_onnx_weights("q8_0", "export --format onnx: --type");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("\"q8_0\" is not an ONNX weight type trident writes; allowed: f32, f16, int8"),
            std::string::npos)
      << bad.status().message();
  EXPECT_TRUE(parse_onnx_weights("INT8", "--type").is_ok());

  // A truncated file does not parse, and the error names it.
  auto model = random_model(models::testing::tiny_gpt2(), 2);
  ASSERT_TRUE(export_model(*model, path("m.onnx"), OnnxWeights::kF32).is_ok());
  std::string bytes;
  {
    std::ifstream in(path("m.onnx"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(path("cut.onnx"), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 1000));
  }
  auto cut = read_onnx_file(path("cut.onnx"));
  ASSERT_FALSE(cut.is_ok());
  EXPECT_NE(cut.status().message().find(path("cut.onnx")), std::string::npos) << cut.status().message();
  EXPECT_NE(cut.status().message().find("does not parse"), std::string::npos) << cut.status().message();

  // A sliding window (Mistral) is refused, naming it.
  const models::ModelConfig windowed = models::testing::with_context(models::testing::tiny_llama(true), 16, 4);
  auto m = random_model(windowed, 3);
  auto r = export_model(*m, path("w.onnx"), OnnxWeights::kF32);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("sliding window"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(path("w.onnx")));

  // A parameter of the wrong shape is named.
  std::vector<checkpoint::TensorSpec> specs;
  std::vector<Tensor> values;
  for (const auto& [n, p] : model->named_parameters()) {
    specs.push_back({n, p.dtype(), p.shape()});
    values.push_back(n == "h.1.mlp.c_fc.weight" ? zeros({3, 5}) : p);
  }
  auto wrong = write_onnx_model(path("s.onnx"), model->model_config(), specs,
                                [&](size_t i) -> StatusOr<Tensor> { return values[i]; }, OnnxWeights::kF32);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("'h.1.mlp.c_fc.weight' has shape (3, 5)"), std::string::npos)
      << wrong.status().message();
}

// Weights over the inline limit (1 GB; protobuf holds at most 2) go to external data beside
// the model, and the read-back checks each tensor's extent against that file.
TEST_F(OnnxExportTest, LargeWeightsGoToExternalDataThatIsCheckedOnReadBack) {
  models::ModelConfig cfg = models::testing::tiny_llama(/*tied=*/false);
  cfg.n_embd = 64;  // matrices of 16 KB: over the 1 KB below which a tensor stays inline
  auto model = random_model(cfg, 4);
  auto inline_only = export_model(*model, path("inline.onnx"), OnnxWeights::kF32);
  ASSERT_TRUE(inline_only.is_ok()) << inline_only.status().to_string();
  EXPECT_EQ(inline_only.value().file.external_tensors, 0);
  EXPECT_FALSE(fs::exists(path("inline.onnx.data")));
  auto r = export_model(*model, path("m.onnx"), OnnxWeights::kF32, /*inline_bytes=*/4096);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const OnnxFileSummary& f = r.value().file;
  EXPECT_EQ(f.external_data, "m.onnx.data");
  EXPECT_GT(f.external_tensors, 0);
  EXPECT_EQ(f.initializer_bytes, inline_only.value().file.initializer_bytes);
  EXPECT_EQ(r.value().external_bytes, fs::file_size(path("m.onnx.data")));
  EXPECT_LT(r.value().bytes, inline_only.value().bytes / 4);
  fs::resize_file(path("m.onnx.data"), r.value().external_bytes - 10);
  auto cut = read_onnx_file(path("m.onnx"));
  ASSERT_FALSE(cut.is_ok());
  EXPECT_NE(cut.status().message().find(path("m.onnx.data") + ", which holds"), std::string::npos)
      << cut.status().message();
  fs::remove(path("m.onnx.data"));
  auto gone = read_onnx_file(path("m.onnx"));
  ASSERT_FALSE(gone.is_ok());
  EXPECT_NE(gone.status().message().find("external data file " + path("m.onnx.data")), std::string::npos)
      << gone.status().message();
}

// The models ONNX Runtime checks (onnx_runtime_test.py): each written to $TRIDENT_ONNX_CASES
// (a temporary directory without it, where only the writing is checked) with case.json: the
// cache's shape, token ids, trident's logits for them (model->forward) and trident's greedy
// continuation of a prompt (models::generate at temperature 0).
TEST_F(OnnxExportTest, OnnxRuntimeCases) {
  const char* env = std::getenv("TRIDENT_ONNX_CASES");
  const fs::path out = env != nullptr && *env != '\0' ? fs::path(env) : dir_.path() / "cases";
  fs::create_directories(out);
  models::ModelConfig scaled = models::testing::tiny_llama(/*tied=*/true);
  scaled.family_values["rope_theta"] = 500000.0;
  scaled.family_values["rope_scaling_factor"] = 8.0;
  scaled.family_values["rope_original_max_position"] = int64_t{16};
  const std::vector<std::pair<std::string, models::ModelConfig>> cases = {
      {"gpt2", models::testing::tiny_gpt2()},
      {"llama_untied", models::testing::tiny_llama(/*tied=*/false)},
      {"llama3_scaled_tied", scaled},
      {"qwen2_bias", models::testing::tiny_llama(/*tied=*/false, /*qkv_bias=*/true)},
      {"gpt2_external_data", models::testing::tiny_gpt2()}};
  nlohmann::json all = nlohmann::json::array();
  for (const auto& [name, base] : cases) {
    SCOPED_TRACE(name);
    models::ModelConfig cfg = models::testing::with_context(base, 32);
    auto model = random_model(cfg, 7);
    const std::string file = (out / (name + ".onnx")).string();
    const bool external = name.ends_with("external_data");
    auto r = export_model(*model, file, OnnxWeights::kF32, external ? 0 : kOnnxInlineBytes);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r.value().file.external_tensors > 0, external);
    // Two rows of 12 ids, trident's logits for them: (2, 12, vocab).
    std::vector<int64_t> ids(24);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + 3) % static_cast<size_t>(cfg.vocab_size));
    const Tensor logits = core::contiguous(model->forward(from_vector(ids, {2, 12})));
    const float* l = logits.data_ptr<float>();
    const std::vector<int64_t> prompt = {1, 5, 9, 2};
    models::SampleOptions greedy;
    greedy.max_new_tokens = 20;
    greedy.temperature = 0.0;
    const auto [kv_heads, head_dim] = model->kv_cache_heads();
    nlohmann::json c = {{"name", name},
                        {"model", file},
                        {"layers", cfg.n_layer},
                        {"kv_heads", kv_heads},
                        {"head_dim", head_dim},
                        {"position_ids", true},
                        {"ids", {std::vector<int64_t>(ids.begin(), ids.begin() + 12), std::vector<int64_t>(ids.begin() + 12, ids.end())}},
                        {"logits", std::vector<float>(l, l + logits.numel())},
                        {"prompt", prompt},
                        {"greedy", models::generate(*model, prompt, greedy)}};
    all.push_back(c);
  }
  std::ofstream f(out / "cases.json");
  f << all.dump();
  ASSERT_TRUE(f.good());
}

}  // namespace
}  // namespace trident::exporting::onnx_testing
