// GGUF files: the container written and read back, bad files refused with the file and what is
// wrong, and models laid out as llama.cpp's converter lays them out (q/k permuted, Conv1D
// transposed, ggml's Q8_0 blocks). That llama.cpp itself runs them is
// tests/export/gguf_llama_cpp_test.py.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/copy.h"
#include "core/half.h"
#include "core/rng.h"
#include "data/byte_tokenizer.h"
#include "data/gpt2_tokenizer.h"
#include "data/test_data.h"
#include "export/gguf_file.h"
#include "export/gguf_model.h"
#include "export/gguf_vocab.h"
#include "kernels/cpu/ggml_blocks.h"
#include "models/registry.h"
#include "quantization/quantize_layers.h"
#include "quantization/scheme.h"
#include "support/tiny_model_configs.h"

namespace trident::exporting {
namespace {

namespace fs = std::filesystem;

class GgufTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }
  data::testing::TempDir dir_;
};

std::string bytes_of(const std::vector<float>& v) { return {reinterpret_cast<const char*>(v.data()), v.size() * 4}; }

TEST_F(GgufTest, MetadataAndTensorsReadBackAsWritten) {
  GgufMetadata m = {{"general.architecture", GgufValue::string("llama")},
                    {"a.u32", GgufValue::u32(4000000000u)},
                    {"a.i32", GgufValue::i32(-7)},
                    {"a.f32", GgufValue::f32(1e-5f)},
                    {"a.bool", GgufValue::boolean(true)},
                    {"a.strings", GgufValue::strings({"x", "", "\xc4\xa0the"})},
                    {"a.ints", GgufValue::i32s({1, -2, 3})},
                    {"a.floats", GgufValue::f32s({0.5f, -1000.0f})}};
  std::vector<GgufTensorInfo> t = {{"norm.weight", {5}, GgmlType::kF32},
                                   {"w.weight", {3, 2}, GgmlType::kF16},
                                   {"q.weight", {64, 2}, GgmlType::kQ8_0},
                                   {"q4.weight", {32, 1}, GgmlType::kQ4_0}};
  std::vector<std::string> data = {bytes_of({1, 2, 3, 4, 5}), std::string(12, 'h'), std::string(4 * 34, 'q'),
                                   std::string(18, 'r')};
  auto written = write_gguf(path("m.gguf"), m, t, [&](size_t i) -> StatusOr<std::string> { return data[i]; });
  ASSERT_TRUE(written.is_ok()) << written.status().to_string();
  EXPECT_EQ(written.value(), fs::file_size(path("m.gguf")));

  auto f = read_gguf(path("m.gguf"));
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f.value().version, 3u);
  ASSERT_EQ(f.value().metadata.size(), m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(f.value().metadata[i].first, m[i].first);
    const GgufValue &a = f.value().metadata[i].second, &b = m[i].second;
    EXPECT_EQ(a.type, b.type) << m[i].first;
    EXPECT_EQ(a.element, b.element) << m[i].first;
    EXPECT_EQ(a.str(), b.str()) << m[i].first;
    EXPECT_EQ(a.integer, b.integer) << m[i].first;
    EXPECT_EQ(static_cast<float>(a.real), static_cast<float>(b.real)) << m[i].first;
    EXPECT_EQ(a.texts, b.texts) << m[i].first;
    EXPECT_EQ(a.integers, b.integers) << m[i].first;
    EXPECT_EQ(a.reals, b.reals) << m[i].first;
  }
  EXPECT_EQ(f.value().data_start % 32, 0u);
  ASSERT_EQ(f.value().tensors.size(), t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    const GgufTensorInfo& r = f.value().tensors[i];
    EXPECT_EQ(r.name, t[i].name);
    EXPECT_EQ(r.ne, t[i].ne);
    EXPECT_EQ(r.type, t[i].type);
    EXPECT_EQ(r.offset % 32, 0u);
    EXPECT_EQ(r.bytes, data[i].size());
    auto bytes = read_gguf_tensor(f.value(), i);
    ASSERT_TRUE(bytes.is_ok());
    EXPECT_EQ(bytes.value(), data[i]) << t[i].name;
  }
}

TEST_F(GgufTest, AWrongTensorSizeOrAPartialBlockIsAnError) {
  std::vector<GgufTensorInfo> t = {{"q.weight", {48, 2}, GgmlType::kQ8_0}};
  auto bad = write_gguf(path("b.gguf"), {}, t, [](size_t) -> StatusOr<std::string> { return std::string(10, 'x'); });
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'q.weight'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("48"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(fs::exists(path("b.gguf")));  // nothing left under the name

  t = {{"w.weight", {3}, GgmlType::kF32}};
  bad = write_gguf(path("c.gguf"), {}, t, [](size_t) -> StatusOr<std::string> { return std::string(8, 'x'); });
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("came as 8 bytes"), std::string::npos) << bad.status().message();
}

// Every cut of a small file: an error naming the file (and, in the data, the tensor), never a
// crash; the whole file reads.
TEST_F(GgufTest, EveryTruncationIsAnErrorNamingTheFile) {
  std::vector<GgufTensorInfo> t = {{"a.weight", {4}, GgmlType::kF32}, {"b.weight", {32, 1}, GgmlType::kQ8_0}};
  GgufMetadata m = {{"general.name", GgufValue::string("tiny")}, {"k.list", GgufValue::strings({"ab", "c"})}};
  std::vector<std::string> data = {bytes_of({1, 2, 3, 4}), std::string(34, 'q')};
  ASSERT_TRUE(write_gguf(path("t.gguf"), m, t, [&](size_t i) -> StatusOr<std::string> { return data[i]; }).is_ok());
  std::ifstream in(path("t.gguf"), std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(read_gguf(path("t.gguf")).is_ok());
  auto full = read_gguf(path("t.gguf"));
  const uint64_t b_end = full.value().data_start + full.value().tensors[1].offset + 34;
  for (size_t cut = 0; cut < b_end; ++cut) {
    std::ofstream(path("cut.gguf"), std::ios::binary) << whole.substr(0, cut);
    auto r = read_gguf(path("cut.gguf"));
    ASSERT_FALSE(r.is_ok()) << "cut at " << cut;
    const std::string msg = r.status().message();
    EXPECT_NE(msg.find(path("cut.gguf")), std::string::npos) << msg;
    if (cut >= full.value().data_start + full.value().tensors[1].offset) {
      EXPECT_NE(msg.find("truncated: tensor 'b.weight'"), std::string::npos) << msg;
    }
  }
}

// Lengths and counts that claim more than the file holds are refused before anything is
// allocated for them; other corruptions name what is wrong.
TEST_F(GgufTest, CorruptHeadersAreRefusedWithWhatIsWrong) {
  ASSERT_TRUE(write_gguf(path("h.gguf"), {{"k", GgufValue::strings({"x"})}}, {},
                         [](size_t) -> StatusOr<std::string> { return std::string(); })
                  .is_ok());
  std::ifstream in(path("h.gguf"), std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto patched = [&](size_t at, const void* v, size_t n) {
    std::string s = whole;
    std::memcpy(&s[at], v, n);
    std::ofstream(path("p.gguf"), std::ios::binary) << s;
    auto r = read_gguf(path("p.gguf"));
    return r.is_ok() ? std::string("ok") : r.status().message();
  };
  const uint64_t huge = uint64_t{1} << 60;
  const uint32_t seven = 7, forty = 40;
  // header: magic 0, version 4, n_tensors 8, n_kv 16; key length 24, "k" 32, type 33,
  // element type 37, count 41.
  EXPECT_NE(patched(0, "GGUX", 4).find("not a GGUF file"), std::string::npos);
  EXPECT_NE(patched(4, &seven, 4).find("version 7"), std::string::npos);
  EXPECT_NE(patched(16, &huge, 8).find("more than a file"), std::string::npos);
  EXPECT_NE(patched(24, &huge, 8).find("past the end of the file"), std::string::npos);
  EXPECT_NE(patched(33, &forty, 4).find("value type 40"), std::string::npos);
  EXPECT_NE(patched(41, &huge, 8).find("more than the rest of the file can hold"), std::string::npos);
}

// The tensors of `cfg`'s model with random weights and the byte tokenizer's 256 ids, written as
// GGUF of `weights`.
struct Exported {
  std::unique_ptr<models::CausalLM> model;
  std::map<std::string, Tensor, std::less<>> params;
  GgufFile file;
};
Exported export_model(models::ModelConfig cfg, GgufWeights weights, const std::string& path) {
  cfg.vocab_size = 256;
  Exported e;
  e.model = models::build_model(cfg);
  std::vector<checkpoint::TensorSpec> specs;
  std::vector<Tensor> values;
  for (const auto& [n, p] : e.model->named_parameters()) {
    specs.push_back({n, p.dtype(), p.shape()});
    values.push_back(p);
    e.params.emplace(n, p);
  }
  const data::ByteTokenizer bytes;
  auto r = write_gguf_model(path, cfg, specs, [&](size_t i) -> StatusOr<Tensor> { return values[i]; }, weights, bytes,
                            "test");
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  auto f = read_gguf(path);
  EXPECT_TRUE(f.is_ok()) << f.status().to_string();
  if (f.is_ok()) e.file = f.value();
  return e;
}

std::vector<float> floats_of(const GgufFile& f, const std::string& name) {
  for (size_t i = 0; i < f.tensors.size(); ++i)
    if (f.tensors[i].name == name) {
      const std::string b = read_gguf_tensor(f, i).value();
      std::vector<float> v(b.size() / 4);
      std::memcpy(v.data(), b.data(), b.size());
      return v;
    }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}
std::vector<float> values_of(const Tensor& t) {
  const Tensor c = core::contiguous(t);
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

TEST_F(GgufTest, LlamaQAndKRowsArePermutedAsLlamaCppsConverterDoes) {
  models::ModelConfig cfg = models::testing::tiny_llama(/*tied=*/false);  // 4 heads, 2 kv heads, n_embd 16
  const Exported e = export_model(cfg, GgufWeights::kF32, path("llama.gguf"));
  const GgufFile& f = e.file;
  EXPECT_EQ(f.find("general.architecture")->text, "llama");
  EXPECT_EQ(f.find("llama.attention.head_count")->integer, 4);
  EXPECT_EQ(f.find("llama.attention.head_count_kv")->integer, 2);
  EXPECT_EQ(f.find("llama.rope.dimension_count")->integer, 4);
  EXPECT_EQ(f.find("llama.context_length")->integer, cfg.block_size);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->texts.size(), 256u);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight")->ne, (std::vector<int64_t>{16, 16}));  // {in, out}
  EXPECT_EQ(f.tensor("blk.0.attn_k.weight")->ne, (std::vector<int64_t>{16, 8}));
  EXPECT_NE(f.tensor("output.weight"), nullptr);
  // permute(w, heads): reshape(heads, 2, d/2, in).swapaxes(1, 2): row h*d + 2i + j <- h*d + j*d/2 + i.
  for (const auto& [param, gguf, heads] : {std::tuple{"layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight", 4},
                                           std::tuple{"layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight", 2}}) {
    const std::vector<float> w = values_of(e.params.at(param)), g = floats_of(f, gguf);
    ASSERT_EQ(w.size(), g.size());
    const int64_t in = 16, rows = static_cast<int64_t>(w.size()) / in, d = rows / heads;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < d / 2; ++i)
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t c = 0; c < in; ++c)
            ASSERT_EQ(g[(h * d + 2 * i + j) * in + c], w[(h * d + j * d / 2 + i) * in + c]) << gguf;
  }
  EXPECT_EQ(floats_of(f, "blk.1.attn_v.weight"), values_of(e.params.at("layers.1.self_attn.v_proj.weight")));
}

TEST_F(GgufTest, Gpt2Conv1DWeightsAreTransposedAndTheHeadIsTied) {
  models::ModelConfig cfg = models::testing::tiny_gpt2();  // n_embd 16
  const Exported e = export_model(cfg, GgufWeights::kF32, path("gpt2.gguf"));
  const GgufFile& f = e.file;
  EXPECT_EQ(f.find("general.architecture")->text, "gpt2");
  EXPECT_EQ(f.find("gpt2.feed_forward_length")->integer, 64);
  EXPECT_EQ(f.tensor("output.weight"), nullptr);  // llama.cpp reuses token_embd
  EXPECT_EQ(f.tensor("position_embd.weight")->ne, (std::vector<int64_t>{16, cfg.block_size}));
  const GgufTensorInfo* qkv = f.tensor("blk.2.attn_qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->ne, (std::vector<int64_t>{16, 48}));
  const std::vector<float> w = values_of(e.params.at("h.2.attn.c_attn.weight")), g = floats_of(f, "blk.2.attn_qkv.weight");
  for (int64_t in = 0; in < 16; ++in)
    for (int64_t out = 0; out < 48; ++out) ASSERT_EQ(g[out * 16 + in], w[in * 48 + out]);
  EXPECT_EQ(floats_of(f, "blk.2.attn_qkv.bias"), values_of(e.params.at("h.2.attn.c_attn.bias")));
}

// Q8_0 and Q4_0 weights are ggml's blocks {fp16 d, codes} of each row, as ggml_quantize_blocks
// gives them; norms, biases and the position table stay F32; rows of 16 (not whole blocks)
// fall back to F16.
TEST_F(GgufTest, QuantizedWeightsAreGgmlsBlocksAndSmallTensorsStayF32) {
  for (GgufWeights w : {GgufWeights::kQ8_0, GgufWeights::kQ4_0}) {
    models::ModelConfig cfg = models::testing::tiny_gpt2();
    cfg.n_embd = 64;
    const Exported e = export_model(cfg, w, path("q.gguf"));
    const GgufFile& f = e.file;
    const GgmlType q = w == GgufWeights::kQ8_0 ? GgmlType::kQ8_0 : GgmlType::kQ4_0;
    EXPECT_EQ(f.tensor("blk.0.ffn_up.weight")->type, q);
    EXPECT_EQ(f.tensor("token_embd.weight")->type, q);
    EXPECT_EQ(f.tensor("position_embd.weight")->type, GgmlType::kF32);
    EXPECT_EQ(f.tensor("blk.0.ffn_up.bias")->type, GgmlType::kF32);
    EXPECT_EQ(f.tensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
    EXPECT_EQ(f.find("general.file_type")->integer, w == GgufWeights::kQ8_0 ? 7 : 2);
    // token_embd (V, C) = (256, 64): each row's two blocks.
    const std::vector<float> x = values_of(e.params.at("wte.weight"));
    namespace k = kernels::cpu;
    const auto t = w == GgufWeights::kQ8_0 ? k::GgmlBlockType::kQ8_0 : k::GgmlBlockType::kQ4_0;
    const int64_t code = k::ggml_code_bytes(t), blocks = static_cast<int64_t>(x.size()) / 32;
    std::vector<uint8_t> codes(static_cast<size_t>(blocks * code));
    std::vector<uint16_t> scales(static_cast<size_t>(blocks));
    k::ggml_quantize_blocks(t, x.data(), static_cast<int64_t>(x.size()), codes.data(), scales.data());
    size_t i = 0;
    while (f.tensors[i].name != "token_embd.weight") ++i;
    const std::string got = read_gguf_tensor(f, i).value();
    ASSERT_EQ(got.size(), static_cast<size_t>(blocks * (2 + code)));
    for (int64_t b = 0; b < blocks; ++b) {
      ASSERT_EQ(std::memcmp(&got[b * (2 + code)], &scales[b], 2), 0) << b;
      ASSERT_EQ(std::memcmp(&got[b * (2 + code) + 2], &codes[b * code], code), 0) << b;
    }
  }
  models::ModelConfig small = models::testing::tiny_llama(true);  // n_embd 16: no whole blocks
  const Exported e = export_model(small, GgufWeights::kQ8_0, path("small.gguf"));
  EXPECT_EQ(e.file.tensor("blk.0.attn_q.weight")->type, GgmlType::kF16);
  EXPECT_EQ(e.file.tensor("blk.0.attn_q.weight")->bytes, 16u * 16u * 2u);
}

// A quantized model's own blocks, copied (q/k rows permuted block by block, the tied head as
// output.weight), are the bytes that quantizing its full-precision weights in the export gives:
// both are ggml's reference quantizer.
TEST_F(GgufTest, CopiedBlocksAreTheBlocksTheExportWouldQuantize) {
  for (const char* arch : {"llama", "gpt2"}) {
    models::ModelConfig cfg = std::string(arch) == "llama" ? models::testing::tiny_llama(false) : models::testing::tiny_gpt2();
    cfg.n_embd = 64;
    cfg.vocab_size = 256;
    if (cfg.arch == "llama") cfg.family_values["intermediate_size"] = int64_t{96};  // whole blocks of 32
    const Exported plain = export_model(cfg, GgufWeights::kQ8_0, path("plain.gguf"));
    // The same weights, quantized as `trident quantize --scheme int8` does (the head too).
    auto model = models::build_model(cfg);
    std::vector<Tensor> values;
    for (const auto& [n, p] : model->named_parameters()) core::copy_(p, plain.params.at(n));
    const auto layers = quantization::quantize_layers(*model, *quantization::find_quant_scheme("int8"), "");
    std::map<std::string, std::shared_ptr<const quantization::GgmlWeight>, std::less<>> blocks;
    std::vector<GgufParameter> params, tied;
    for (const auto& q : layers) {
      auto g = std::dynamic_pointer_cast<const quantization::GgmlWeight>(q.weight);
      ASSERT_NE(g, nullptr);
      if (q.tied_to.empty()) blocks[q.param] = g;
      else tied.push_back({{q.param, DType::kF32, q.weight->shape()}, g});
    }
    for (const auto& [n, p] : model->named_parameters()) {
      params.push_back({{n, p.dtype(), p.shape()}, blocks.contains(n) ? blocks.at(n) : nullptr});
      values.push_back(p);
    }
    params.insert(params.end(), tied.begin(), tied.end());
    const data::ByteTokenizer bytes;
    auto r = write_gguf_model(path("copied.gguf"), cfg, params, [&](size_t i) -> StatusOr<Tensor> { return values[i]; },
                              GgufWeights::kF32, bytes, "copied");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    auto copied = read_gguf(path("copied.gguf"));
    ASSERT_TRUE(copied.is_ok()) << copied.status().to_string();
    EXPECT_EQ(copied.value().find("general.file_type")->integer, 7);
    size_t compared = 0;
    for (size_t i = 0; i < copied.value().tensors.size(); ++i) {
      const GgufTensorInfo& t = copied.value().tensors[i];
      if (t.type != GgmlType::kQ8_0) continue;
      // GPT-2's tied head is output.weight here; the plain export quantized token_embd instead.
      const std::string twin = t.name == "output.weight" && plain.file.tensor("output.weight") == nullptr
                                   ? "token_embd.weight" : t.name;
      size_t j = 0;
      while (plain.file.tensors[j].name != twin) ++j;
      ASSERT_EQ(plain.file.tensors[j].ne, t.ne) << arch << " " << t.name;
      EXPECT_EQ(read_gguf_tensor(copied.value(), i).value(), read_gguf_tensor(plain.file, j).value()) << arch << " " << t.name;
      ++compared;
    }
    EXPECT_EQ(compared, layers.size()) << arch;
    EXPECT_EQ(copied.value().tensor("token_embd.weight")->type, GgmlType::kF32);  // the lookups' table stays
  }
}

TEST_F(GgufTest, ModelsLlamaCppCannotRunAreRefusedNamingWhy) {
  models::ModelConfig qwen = models::testing::tiny_llama(false, /*qkv_bias=*/true);
  auto model = models::build_model(qwen);
  std::vector<checkpoint::TensorSpec> specs;
  for (const auto& [n, p] : model->named_parameters()) specs.push_back({n, p.dtype(), p.shape()});
  const data::ByteTokenizer bytes;
  auto r = write_gguf_model(path("qwen.gguf"), qwen, specs, [](size_t) -> StatusOr<Tensor> { return Status::invalid("not read"); },
                            GgufWeights::kF32, bytes, "q");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("qwen2"), std::string::npos) << r.status().message();

  models::ModelConfig tiny = models::testing::tiny_gpt2();
  tiny.vocab_size = 100;  // fewer rows than the byte tokenizer's 256 ids
  model = models::build_model(tiny);
  specs.clear();
  for (const auto& [n, p] : model->named_parameters()) specs.push_back({n, p.dtype(), p.shape()});
  r = write_gguf_model(path("v.gguf"), tiny, specs, [](size_t) -> StatusOr<Tensor> { return Status::invalid("not read"); },
                       GgufWeights::kF32, bytes, "v");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("256 ids, more than the model's vocab_size 100"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(parse_gguf_weights("Q8_0", "--type").is_ok());
  auto bad = parse_gguf_weights("q5_k", "export: --type");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("allowed: f32, f16, q8_0, q4_0"), std::string::npos);
}

// GPT-2's merges, rebuilt from the vocabulary's merge order by BPE over lower ranks, are
// merges.txt's lines: what llama.cpp's tokenizer.ggml.merges must hold.
TEST(GgufVocab, Gpt2MergesAreMergesTxt) {
  const auto dir = data::testing::find_gpt2_dir();
  if (!dir) GTEST_SKIP() << "GPT-2's vocab.json and merges.txt not found: run scripts/fetch-gpt2-vocab.sh";
  auto tok = data::Gpt2Tokenizer::load(*dir);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  auto m = gguf_tokenizer_metadata(*tok.value(), 50304);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  std::map<std::string, GgufValue> keys(m.value().begin(), m.value().end());
  EXPECT_EQ(keys.at("tokenizer.ggml.model").text, "gpt2");
  EXPECT_EQ(keys.at("tokenizer.ggml.pre").text, "gpt-2");
  const std::vector<std::string>& tokens = keys.at("tokenizer.ggml.tokens").texts;
  ASSERT_EQ(tokens.size(), 50304u);
  EXPECT_EQ(tokens[50256], "<|endoftext|>");
  EXPECT_EQ(tokens[50257], "[PAD50257]");
  EXPECT_EQ(keys.at("tokenizer.ggml.token_type").integers[50256], 3);
  EXPECT_EQ(keys.at("tokenizer.ggml.eos_token_id").integer, 50256);
  std::ifstream in(fs::exists(*dir / "merges.txt") ? *dir / "merges.txt" : *dir / "vocab.bpe");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && !line.starts_with("#version")) lines.push_back(line);
  EXPECT_EQ(keys.at("tokenizer.ggml.merges").texts, lines);
}

}  // namespace
}  // namespace trident::exporting
