// Hugging Face model directories in and out (train/hf_model_dir.h, issue #22 item 5). The
// directories come from the independent PyTorch side (tests/parity/llama_torch.py
// --write-hf-dir, as save_pretrained writes them: config.json, bf16 shards with an index, or
// one f32 model.safetensors): trident reads the architecture from config.json, imports every
// tensor bit for bit, trains from the directory, and exports directories that import back to
// the same tensors bit for bit; an export of an untrained import holds the input's values.
// Skips, saying why, without python3's torch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/env.h"
#include "checkpoint/safetensors.h"
#include "config/config_tree.h"
#include "core/copy.h"
#include "core/factory.h"
#include "data/token_file.h"
#include "models/registry.h"
#include "support/phrase_corpus.h"
#include "support/tiny_run.h"
#include "export/hf_writer.h"  // the round trip: written, then read back
#include "train/hf_model_dir.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

std::string script() {
  const std::string here = __FILE__;
  return here.substr(0, here.rfind("/train/")) + "/parity/llama_torch.py";
}

// Every tensor of a directory's weight files, under the file's names, as f32.
std::map<std::string, std::vector<float>> file_tensors(const std::string& dir) {
  std::map<std::string, std::vector<float>> out;
  auto files = hf_weight_files(dir);
  EXPECT_TRUE(files.is_ok()) << files.status().to_string();
  for (const std::string& f : files.value()) {
    auto r = checkpoint::SafetensorsReader::open(checkpoint::default_env(), f);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    for (const auto& e : r.value().entries()) out[e.name] = to_vector<float>(core::cast(r.value().load(e.name).value(), DType::kF32));
  }
  return out;
}

std::map<std::string, std::vector<float>> model_tensors(const models::CausalLM& model) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters()) out[name] = to_vector<float>(p);
  return out;
}

class HfModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string python = std::getenv("TRIDENT_PARITY_PYTHON") ? std::getenv("TRIDENT_PARITY_PYTHON")
                               : fs::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                                 : "python3";
    python_ = python;
    if (std::system((python + " -c 'import torch, numpy' > /dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << "needs PyTorch to write the Hugging Face directories: '" << python
                   << " -c \"import torch, numpy\"' failed";
    dir_ = fs::temp_directory_path() / ("trident_hf_dir_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }
  // The reference writes a tiny LLaMA (GQA 4/2; a Mistral with a window) or a Qwen2 (biases,
  // tied head) directory.
  std::string write_reference(const std::string& name, const std::string& dtype, int shards, bool qwen2,
                              int window = 0, const std::string& extra = "") {
    const std::string out = (dir_ / name).string();
    const std::string cmd = "OMP_WAIT_POLICY=PASSIVE " + python_ + " '" + script() +
                            "' --n-layer 2 --n-head 4 --n-embd 32 --block-size 16 --vocab-size 64 --n-kv-heads " +
                            (qwen2 ? "4" : "2") + " --intermediate-size 48 --hf-dtype " + dtype + " --hf-shards " +
                            std::to_string(shards) + (qwen2 ? " --qkv-bias --tie-word-embeddings" : "") +
                            " --sliding-window " + std::to_string(window) + extra +
                            " --write-hf-dir '" + out + "' > '" + out + ".log' 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return out;
  }
  std::string python_;
  fs::path dir_;
};

// `model`'s parameters as a Hugging Face directory `out` of `cfg`, in shards of `shard_bytes`.
StatusOr<std::vector<std::string>> export_model(const models::CausalLM& model, const models::ModelConfig& cfg,
                                                const std::string& out, int64_t shard_bytes) {
  std::vector<checkpoint::TensorSpec> specs;
  std::vector<Tensor> values;
  for (const auto& [n, p] : model.named_parameters()) {
    specs.push_back({n, p.dtype(), p.shape()});
    values.push_back(p);
  }
  return exporting::write_hf_model_dir(out, cfg, specs, [&](size_t i) -> StatusOr<Tensor> { return values[i]; },
                                       shard_bytes);
}

TEST_F(HfModelDirTest, ReferenceDirectoriesImportBitForBitAndExportBack) {
  using Case = std::tuple<std::string, std::string, int, bool, int>;
  for (const auto& [name, dtype, shards, qwen2, window] :
       {Case{"llama_bf16_sharded", "bf16", 3, false, 0}, Case{"qwen2_f32", "f32", 1, true, 0},
        Case{"mistral_window_f32", "f32", 2, false, 8}}) {
    SCOPED_TRACE(name);
    const std::string in = write_reference(name, dtype, shards, qwen2, window);
    auto cfg = hf_model_config(in, models::ModelConfig{});
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    EXPECT_EQ(cfg.value().arch, "llama");
    EXPECT_EQ(cfg.value().n_embd, 32);
    EXPECT_EQ(cfg.value().family_int("n_kv_heads"), qwen2 ? 4 : 2);
    EXPECT_EQ(cfg.value().family_bool("qkv_bias"), qwen2);
    EXPECT_EQ(cfg.value().family_int("sliding_window"), window);
    const std::unique_ptr<models::CausalLM> model = models::build_model(cfg.value());
    ASSERT_TRUE(load_hf_weights(*model, in).is_ok());
    // Every tensor of the files, under its HF name, is the parameter's value exactly.
    const auto files = file_tensors(in);
    const auto imported = model_tensors(*model);
    const models::ModelFamily& family = models::model_family("llama");
    size_t compared = 0;
    for (const auto& [param, values] : imported) {
      const auto it = files.find(family.hf_name(cfg.value(), param));
      ASSERT_NE(it, files.end()) << param;
      EXPECT_EQ(values, it->second) << param;
      ++compared;
    }
    EXPECT_EQ(compared, files.size());  // no file tensor left over (a tied head writes none)

    // Export (sharded at 8 kB), re-import: the same tensors; the export holds the input's values.
    const std::string out = (dir_ / (name + "_export")).string();
    auto written = export_model(*model, cfg.value(), out, 8000);
    ASSERT_TRUE(written.is_ok()) << written.status().to_string();
    EXPECT_GT(written.value().size(), 3u);  // shards, the index and config.json
    EXPECT_TRUE(fs::exists(out + "/model.safetensors.index.json"));
    EXPECT_EQ(file_tensors(out), files);
    auto again_cfg = hf_model_config(out, models::ModelConfig{});
    ASSERT_TRUE(again_cfg.is_ok()) << again_cfg.status().to_string();
    EXPECT_EQ(again_cfg.value().family_int("sliding_window"), window);  // exported as mistral's sliding_window
    const std::unique_ptr<models::CausalLM> again = models::build_model(again_cfg.value());
    ASSERT_TRUE(load_hf_weights(*again, out).is_ok());
    EXPECT_EQ(model_tensors(*again), imported);
  }
}

// Mixtral and Qwen2-MoE directories (issue #51): experts under their Hugging Face names, the
// config's expert keys, and back.
TEST_F(HfModelDirTest, MixtureOfExpertsDirectoriesImportBitForBitAndExportBack) {
  using Case = std::tuple<std::string, bool, std::string>;
  for (const auto& [name, qwen2, extra] :
       {Case{"mixtral_f32", false,
             " --num-experts 4 --top-k 2 --moe-intermediate-size 48 --router-aux-loss-coef 0.02"},
        Case{"qwen2_moe_f32", true,
             " --num-experts 6 --top-k 3 --moe-intermediate-size 16 --shared-expert-intermediate-size 40"
             " --no-norm-topk-prob --decoder-sparse-step 2"}}) {
    SCOPED_TRACE(name);
    const std::string in = write_reference(name, "f32", 2, qwen2, 0, extra);
    auto cfg = hf_model_config(in, models::ModelConfig{});
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    const models::ModelConfig& c = cfg.value();
    EXPECT_EQ(c.family_int("num_local_experts"), qwen2 ? 6 : 4);
    EXPECT_EQ(c.family_int("num_experts_per_tok"), qwen2 ? 3 : 2);
    EXPECT_EQ(c.family_int("moe_intermediate_size"), qwen2 ? 16 : 48);
    EXPECT_EQ(c.family_int("shared_expert_intermediate_size"), qwen2 ? 40 : 0);
    EXPECT_EQ(c.family_bool("norm_topk_prob"), !qwen2);
    EXPECT_EQ(c.family_int("decoder_sparse_step"), qwen2 ? 2 : 1);
    EXPECT_EQ(c.family_float("router_aux_loss_coef"), qwen2 ? 0.0 : 0.02);  // only with output_router_logits
    const std::unique_ptr<models::CausalLM> model = models::build_model(c);
    ASSERT_TRUE(load_hf_weights(*model, in).is_ok());
    const auto files = file_tensors(in);
    const auto imported = model_tensors(*model);
    const models::ModelFamily& family = models::model_family("llama");
    size_t compared = 0, experts = 0;
    for (const auto& [param, values] : imported) {
      const auto it = files.find(family.hf_name(c, param));
      ASSERT_NE(it, files.end()) << param;
      EXPECT_EQ(values, it->second) << param;
      ++compared;
      experts += param.find(".experts.") != std::string::npos ? 1 : 0;
    }
    EXPECT_EQ(compared, files.size());
    EXPECT_EQ(experts, qwen2 ? 6u * 3u : 2u * 4u * 3u);  // Qwen2-MoE: layer 1 only
    const std::string out = (dir_ / (name + "_export")).string();
    auto written = export_model(*model, c, out, int64_t{1} << 30);
    ASSERT_TRUE(written.is_ok()) << written.status().to_string();
    EXPECT_EQ(file_tensors(out), files);
    const nlohmann::json config = nlohmann::json::parse(std::ifstream(out + "/config.json"));
    EXPECT_EQ(config.at("model_type"), qwen2 ? "qwen2_moe" : "mixtral");
    auto again_cfg = hf_model_config(out, models::ModelConfig{});
    ASSERT_TRUE(again_cfg.is_ok()) << again_cfg.status().to_string();
    for (const char* key : {"num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
                            "shared_expert_intermediate_size", "decoder_sparse_step"})
      EXPECT_EQ(again_cfg.value().family_int(key), c.family_int(key)) << key;
    EXPECT_EQ(again_cfg.value().family_bool("norm_topk_prob"), c.family_bool("norm_topk_prob"));
    EXPECT_EQ(again_cfg.value().family_float("router_aux_loss_coef"), c.family_float("router_aux_loss_coef"));
  }
}

TEST_F(HfModelDirTest, TrainingStartsFromADirectoryWithItsArchitecture) {
  const std::string in = write_reference("llama_train", "bf16", 2, false);
  ASSERT_TRUE(testing::write_tiny_run_data(dir_).is_ok());
  TrainConfig cfg = testing::tiny_run_config(dir_);  // GPT-2's [model]: the directory replaces it
  cfg.train.init_from = in;
  cfg.train.steps = 3;
  cfg.train.eval_interval = 0;
  cfg.train.out_dir = (dir_ / "run").string();
  cfg.model.activation_checkpointing = "full";  // the run's own setting stays
  ASSERT_TRUE(resolve_init_from(cfg).is_ok());
  EXPECT_EQ(cfg.model.arch, "llama");
  EXPECT_EQ(cfg.model.activation_checkpointing, "full");
  auto t = Trainer::create(cfg);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  // Its first loss is the imported model's (vocabulary 64, random weights: about ln 64).
  std::vector<double> losses;
  t.value()->show_progress = false;
  t.value()->on_step = [&](const StepMetrics& m) { losses.push_back(m.loss); };
  ASSERT_TRUE(t.value()->run().is_ok());
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_NEAR(losses[0], std::log(64.0), 0.5);
}

TEST_F(HfModelDirTest, DirectoriesTridentCannotTrainAreClearErrors) {
  const fs::path d = dir_ / "bad";
  fs::create_directories(d);
  auto write = [&](const std::string& json) {
    std::FILE* f = std::fopen((d / "config.json").c_str(), "w");
    std::fputs(json.c_str(), f);
    std::fclose(f);
    const auto c = hf_model_config(d.string(), models::ModelConfig{});
    return c.is_ok() ? std::string() : c.status().to_string();
  };
  EXPECT_NE(write(R"({"model_type": "t5"})").find("model_type \"t5\" is not a family trident trains; it reads: gpt2, "
                                                  "llama, mistral, qwen2"),
            std::string::npos);
  const std::string llama = R"({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
      "hidden_size": 32, "intermediate_size": 48, "max_position_embeddings": 16, "vocab_size": 64)";
  EXPECT_NE(write(llama + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})")
                .find("is of type \"yarn\"; trident implements \"llama3\""),
            std::string::npos);
  EXPECT_EQ(write(llama + R"(, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})"),
            "");
  const auto scaled = hf_model_config(d.string(), models::ModelConfig{});
  ASSERT_TRUE(scaled.is_ok());
  EXPECT_EQ(scaled.value().family_float("rope_scaling_factor"), 8.0);
  EXPECT_EQ(scaled.value().family_int("rope_original_max_position"), 8192);
  // And back: the exported config.json carries it.
  EXPECT_NE(models::model_family("llama").to_hf_config(scaled.value()).find("\"rope_type\": \"llama3\", \"factor\": 8"),
            std::string::npos);
  // Sliding windows: Mistral's on every layer (null, or one as long as the positions: none);
  // Qwen2's on all layers or none.
  const std::string mistral = R"({"model_type": "mistral", "num_hidden_layers": 2, "num_attention_heads": 4,
      "hidden_size": 32, "intermediate_size": 48, "max_position_embeddings": 16, "vocab_size": 64)";
  auto window_of = [&](const std::string& json) -> int64_t {
    if (!write(json).empty()) return -1;
    return hf_model_config(d.string(), models::ModelConfig{}).value().family_int("sliding_window");
  };
  EXPECT_EQ(window_of(mistral + R"(, "sliding_window": 8})"), 8);
  EXPECT_EQ(window_of(mistral + R"(, "sliding_window": null})"), 0);
  EXPECT_EQ(window_of(mistral + R"(, "sliding_window": 16})"), 0);
  EXPECT_NE(write(mistral + R"(, "sliding_window": 0})").find("sliding_window 0 must be a positive integer or null"),
            std::string::npos);
  const std::string qwen2 = R"({"model_type": "qwen2", "num_hidden_layers": 2, "num_attention_heads": 4,
      "hidden_size": 32, "intermediate_size": 48, "max_position_embeddings": 16, "vocab_size": 64, "sliding_window": 4)";
  EXPECT_EQ(window_of(qwen2 + R"(, "use_sliding_window": false})"), 0);
  EXPECT_EQ(window_of(qwen2 + R"(, "use_sliding_window": true, "max_window_layers": 0})"), 4);
  EXPECT_EQ(window_of(qwen2 + R"(, "use_sliding_window": true, "max_window_layers": 2})"), 0);
  EXPECT_NE(write(qwen2 + R"(, "use_sliding_window": true, "max_window_layers": 1})")
                .find("max_window_layers 1 of 2 windows only some layers"),
            std::string::npos);
  EXPECT_NE(write(R"({"model_type": "llama", "num_attention_heads": 4, "max_position_embeddings": 16})")
                .find("\"num_hidden_layers\" (an integer) is missing"),
            std::string::npos);
  EXPECT_EQ(write(llama + "}"), "");  // and a plain one reads
  const auto files = hf_weight_files(d.string());
  ASSERT_FALSE(files.is_ok());
  EXPECT_NE(files.status().to_string().find("holds model.safetensors or model.safetensors.index.json; it has neither"),
            std::string::npos);
}

// Without PyTorch: a scratch directory of hand-written files.
class HfModelDirFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trident_hf_files_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  void write(const std::string& name, const std::string& text) const {
    std::FILE* f = std::fopen((dir_ / name).c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  fs::path dir_;
};

// The index must say where every tensor of the shards is, and nothing more: a tensor it names
// that no shard holds, or one a shard holds that it does not name, was read without a word.
TEST_F(HfModelDirFilesTest, AnIndexNamesShardFilesThatExist) {
  const std::string shard = "model-00001-of-00001.safetensors";
  ASSERT_TRUE(checkpoint::save_safetensors(checkpoint::default_env(), (dir_ / shard).string(),
                                           std::vector<checkpoint::NamedTensor>{{"a", zeros({2})}, {"b", zeros({2})}})
                  .is_ok());
  const std::string index = (dir_ / "model.safetensors.index.json").string();
  auto error = [&](const std::string& json) {
    write("model.safetensors.index.json", json);
    const auto files = hf_weight_files(dir_.string());
    return files.is_ok() ? std::string() : files.status().message();
  };
  EXPECT_EQ(error(R"({"weight_map": {"a": ")" + shard + R"(", "b": ")" + shard + R"("}})"), "");
  EXPECT_EQ(error(R"({"metadata": {}})"),
            index + ": no \"weight_map\" object {tensor name: shard file}, as save_pretrained writes it");
  EXPECT_EQ(error(R"({"weight_map": {"a": 5}})"),
            index + ": weight_map gives 'a' the shard 5, which is not a file name (a string)");
  EXPECT_EQ(error(R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})"),
            index + ": weight_map places 'a' in 'model-00002-of-00002.safetensors', which is not a file of " +
                dir_.string());
  // The map is a guide to the files, as in transformers: a listed buffer no shard holds, or a
  // tensor left out, is for load_hf_weights to judge by parameter.
  EXPECT_EQ(error(R"({"weight_map": {"a": ")" + shard + R"(", "rotary_emb.inv_freq": ")" + shard + R"("}})"), "");
  // A number past a double: an error naming the index, not an escaping exception (found by
  // fuzz/hf_index_fuzz; fuzz/corpus/hf_index_fuzz/crash_number_overflow).
  EXPECT_EQ(error(R"({"metadata": {"total_size": 1e999}, "weight_map": {}})"),
            index + ": not JSON: [json.exception.out_of_range.406] number overflow parsing '1e999'");
}

// train.init_from = DIR takes the architecture from DIR/config.json; a [model] key the config
// or the command line gives that disagrees is an error, not silently replaced.
TEST_F(HfModelDirFilesTest, GivenModelKeysMustAgreeWithConfigJson) {
  write("config.json", R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 32, "n_positions": 32,
      "vocab_size": 64})");
  auto resolve = [&](const std::vector<std::string>& overrides) {
    TrainConfig cfg;
    config::ConfigTree tree;
    cfg.bind(tree);
    std::vector<std::string> all = overrides;
    all.push_back("train.init_from=" + dir_.string());
    EXPECT_TRUE(tree.apply_overrides(all, "command line").is_ok());
    const Status s = resolve_init_from(cfg);
    return s.is_ok() ? std::string() : s.message();
  };
  const std::string path = (dir_ / "config.json").string();
  EXPECT_EQ(resolve({}), "");
  EXPECT_EQ(resolve({"model.n_layer=1", "model.dropout=0.1", "model.init_seed=7"}), "");  // agrees; the run's own
  EXPECT_EQ(resolve({"model.n_layer=3"}),
            "model.n_layer = 3 is given, but " + path +
                " gives model.n_layer = 1; train.init_from takes the architecture from the directory: leave "
                "model.n_layer out, or make it agree");
  EXPECT_NE(resolve({"model.arch=llama", "model.n_layer=1"}).find("model.arch = \"llama\" is given, but " + path +
                                                                   " gives model.arch = \"gpt2\""),
            std::string::npos);
  EXPECT_NE(resolve({"model.layer_norm_eps=1e-6"}).find("gives model.layer_norm_eps = 1e-05"), std::string::npos);
  // 0 means "derive it" in a TOML config; config.json states the derived number.
  write("config.json", R"({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2,
      "num_key_value_heads": 2, "hidden_size": 32, "intermediate_size": 64, "max_position_embeddings": 32,
      "vocab_size": 64})");
  EXPECT_EQ(resolve({"model.arch=llama", "model.n_kv_heads=0", "model.intermediate_size=0"}), "");
  EXPECT_NE(resolve({"model.arch=llama", "model.n_kv_heads=1"}).find("gives model.n_kv_heads = 2"), std::string::npos);
  write("config.json", R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 32, "n_positions": 32,
      "vocab_size": 64})");
  // Set in code, not given: the directory replaces it.
  TrainConfig cfg;
  cfg.model.n_layer = 3;
  cfg.train.init_from = dir_.string();
  ASSERT_TRUE(resolve_init_from(cfg).is_ok());
  EXPECT_EQ(cfg.model.n_layer, 1);
}

}  // namespace
}  // namespace trident::train
