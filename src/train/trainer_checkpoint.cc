// The trainer's checkpoints: saving under every layout, by one path that reads the placement
// table (Note [Checkpoints from placements] in train/checkpoint_pieces.h), and loading any
// checkpoint under any layout, plus loading weights from Hugging Face files. See the file list
// in trainer.h.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "checkpoint/atomic_file.h"
#include "checkpoint/checkpoint_dir.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "comm/string_collectives.h"
#include "train/checkpoint_pieces.h"
#include "train/hf_model_dir.h"

namespace trident::train {
namespace {

// Whether two tensors of one shape and dtype hold the same bits.
bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = core::contiguous(core::to_device(a, Device::cpu())), y = core::contiguous(core::to_device(b, Device::cpu()));
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * element_size(x.dtype())) == 0;
}

// Copies `src` into parameter `dst` (shape-checked, dtype-converted) without recording.
Status assign(const std::string& what, const Tensor& dst, const Tensor& src) {
  if (!(src.shape() == dst.shape()))
    return Status::invalid(what + ": shape " + src.shape().str() + " does not match the model's " + dst.shape().str());
  autograd::NoGradGuard no_grad;
  core::copy_(dst, src);
  return Status::ok();
}

// Fields of [model] whose values differ between two configs, as "key: a vs b" lines (another
// arch differs in arch; its own keys are not compared).
std::string model_differences(const models::ModelConfig& a, const models::ModelConfig& b) {
  if (a.arch != b.arch) return "\n  model.arch: checkpoint \"" + a.arch + "\", config \"" + b.arch + "\"";
  std::string diffs;
  for (const OptionField& f : a.fields()) {
    if (f.key == "activation_checkpointing") continue;  // how the model runs, not what it is
    const OptionValue va = f.get(&a), vb = f.get(&b);
    if (va != vb) diffs += "\n  model." + f.key + ": checkpoint " + option_value_str(va) + ", config " + option_value_str(vb);
  }
  return diffs;
}

std::string parameter_of(const std::string& name) { return parallel::parameter_of_state(name); }

}  // namespace

Status load_checkpoint_weights(const std::vector<nn::NamedTensor>& params, const checkpoint::CheckpointReader& r) {
  for (const auto& [name, p] : params) {
    auto t = r.load_tensor(name);
    if (!t.is_ok()) return t.status();
    Status s = assign(r.dir() + ": parameter '" + name + "'", p, t.value());
    if (!s.is_ok()) return s;
  }
  return Status::ok();
}

Status load_hf_weights(models::CausalLM& model, const std::string& path) {
  auto files = hf_weight_files(path);
  if (!files.is_ok()) return files.status();
  std::map<std::string, Tensor> params;
  for (auto& [name, t] : model.named_parameters()) params.emplace(name, t);
  std::set<std::string> loaded;
  std::string unknown;
  for (const std::string& file : files.value()) {
    auto reader = checkpoint::SafetensorsReader::open(checkpoint::default_env(), file);
    if (!reader.is_ok()) return reader.status();
    for (const checkpoint::SafetensorsEntry& e : reader.value().entries()) {
      const std::optional<std::string> name = model.parameter_name_from_hf(e.name);
      if (!name) continue;
      auto it = params.find(*name);
      if (it == params.end()) {
        unknown += (unknown.empty() ? "" : ", ") + e.name;
        continue;
      }
      if (!loaded.insert(*name).second)
        return Status::invalid(path + ": tensor '" + e.name + "' appears twice (again in " + file + ")");
      auto t = reader.value().load_floating(e.name);  // an integer tensor is no parameter's values
      if (!t.is_ok()) return t.status();
      Status s = assign(file + ": tensor '" + e.name + "'", it->second, t.value());
      if (!s.is_ok()) return s;
    }
  }
  if (!unknown.empty())
    return Status::invalid(path + ": tensors that are not parameters of model.arch = \"" + model.model_config().arch +
                           "\": " + unknown);
  std::string missing;
  for (const auto& [name, t] : params)
    if (!loaded.count(name)) missing += (missing.empty() ? "" : ", ") + name;
  if (!missing.empty()) return Status::invalid(path + ": missing parameters: " + missing);
  return Status::ok();
}

namespace {

// Whether every value of `t` is finite (true for integer tensors).
bool all_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return true;
  const Tensor c = core::to_device(core::contiguous(t), Device::cpu());
  if (c.dtype() == DType::kF32) {
    const float* p = c.data_ptr<float>();
    return std::all_of(p, p + c.numel(), [](float v) { return std::isfinite(v); });
  }
  const std::vector<float> v = to_vector<float>(c);
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

// Hands out each shard's values as the writer asks for them (lazy ones read only then), and
// notes the first tensor that holds a NaN or an infinity.
class CheckedShards {
 public:
  explicit CheckedShards(const std::vector<WrittenShard>& shards) : shards_(shards) {}
  StatusOr<Tensor> operator()(size_t i) {
    Tensor t = shards_[i].get();
    if (bad_.empty() && !all_finite(t)) bad_ = shards_[i].tensor;
    return t;
  }
  const std::string& bad() const { return bad_; }

 private:
  const std::vector<WrittenShard>& shards_;
  std::string bad_;
};

// Writes shards[which] as file `file` of the checkpoint, each under its logical name and read
// only when written.
Status write_streamed(checkpoint::CheckpointWriter& writer, const std::string& file,
                      const std::vector<WrittenShard>& shards, const std::vector<size_t>& which, CheckedShards& values,
                      const checkpoint::StringMap& metadata) {
  std::vector<checkpoint::TensorSpec> specs;
  for (size_t i : which) specs.push_back({shards[i].tensor, shards[i].dtype, shards[i].shape});
  return writer.write_safetensors_streamed(
      file, specs, [&](size_t k) { return values(which[k]); }, metadata);
}

}  // namespace

// Note [No checkpoint from non-finite state]
// A step whose loss was NaN leaves NaN weights (and moments) behind it. With a rule that rolls
// back (not_finite -> rollback_and_skip) the run goes on to the next boundary, and a periodic
// checkpoint due at that step would be written from those weights and become the newest: the
// rollback, a resume and `sample` would all start from it. So every rank checks what it writes
// (weights, frozen weights and optimizer state, every dtype widened to f32) as it writes it,
// into the checkpoint's staging directory, and the ranks agree before anything is committed:
// if any value anywhere is not finite, the staging directory is removed, nothing is
// committed and save_checkpoint() says false; the newest checkpoint stays the last good one.
// Checking while writing reads each tensor once, which matters when the optimizer's state is
// on NVMe and is read from the disk only as it is written (Note [Streaming the tier into a
// checkpoint] in parallel/zero.cc).
StatusOr<bool> Trainer::save_checkpoint() {
  // Note [Checkpoints from placements] in train/checkpoint_pieces.h.
  const std::string name = checkpoint::step_checkpoint_name(step_);
  const parallel::PlacementTable& table = *par_.placements;
  const RankCoords at{par_.stage(), par_.tp_rank(), comm_ ? comm_->rank() : 0,
                      [&](parallel::AxisSet axes) { return mesh_ ? mesh_->group(axes).rank() : 0; }};
  std::vector<nn::NamedTensor> frozen;
  for (const parallel::ParamPlacement* row : table.on_stage(at.stage))
    if (!row->trainable) frozen.emplace_back(row->name, frozen_values(row->name));
  const std::vector<WrittenShard> shards = rank_shards(table, at, update_->held_pieces(), frozen, update_->rank_state());
  CheckedShards values(shards);
  skipped_checkpoint_note_.clear();
  // Whether every rank wrote only finite values (collective): if not, the note says where.
  const auto all_finite_everywhere = [&]() {
    if (all_ranks(values.bad().empty())) return true;
    std::string where = values.bad().empty() ? "" : "'" + values.bad() + "' on rank " + std::to_string(comm_ ? comm_->rank() : 0);
    if (comm_) {  // name the first rank that found one, wherever it is
      for (const std::string& w : comm::gather_strings(*comm_, where))
        if (where.empty() && !w.empty()) where = w;
    }
    skipped_checkpoint_note_ = "not writing the checkpoint of step " + std::to_string(step_) + ": " + where +
                               " holds a NaN or an infinity (a checkpoint is never written from non-finite weights "
                               "or optimizer state; the newest checkpoint stays the last good one)";
    return false;
  };
  // Each pipeline stage draws its dropout masks from its own generator: every stage's offset
  // goes into the trainer state (summed over the world: only the first rank of each stage
  // adds its own), so a resumed pipeline draws the same masks.
  std::vector<int64_t> stage_offsets;
  if (mesh_ && mesh_->pp_size() > 1) {
    std::vector<int64_t> mine(static_cast<size_t>(mesh_->pp_size()), 0);
    if (mesh_->dp_rank() == 0 && mesh_->tp_rank() == 0)
      mine[static_cast<size_t>(at.stage)] = static_cast<int64_t>(model_->dropout_generator().offset());
    Tensor t = from_vector(mine, {mesh_->pp_size()});
    comm_->all_reduce(t);
    stage_offsets = to_vector<int64_t>(t);
  }
  // Rank 0 alone, every tensor whole: model.safetensors and optimizer.safetensors.
  bool whole = true;
  for (const WrittenShard& w : shards)
    whole = whole && w.shard.kind == checkpoint::TensorShard::Kind::kBox && w.shard.covers_whole(w.shape) &&
            table.contains(parameter_of(w.tensor));
  if (all_ranks(is_rank0() ? whole : shards.empty())) {
    Status saved = Status::ok();
    std::optional<checkpoint::CheckpointWriter> writer;
    if (is_rank0()) {
      saved = [&]() -> Status {
        auto begun = checkpoint::CheckpointWriter::begin(checkpoint::default_env(), cfg_.train.out_dir, name);
        if (!begun.is_ok()) return begun.status();
        writer.emplace(std::move(begun.value()));
        std::vector<size_t> weights, state;
        for (size_t i = 0; i < shards.size(); ++i) (table.contains(shards[i].tensor) ? weights : state).push_back(i);
        // "format": "pt" is what transformers' safetensors loader expects.
        Status s = write_streamed(*writer, "model.safetensors", shards, weights, values, {{"format", "pt"}});
        if (!s.is_ok()) return s;
        return write_streamed(*writer, "optimizer.safetensors", shards, state, values, {});
      }();
    }
    if (!all_finite_everywhere()) return false;  // the writer's staging directory goes with it
    if (is_rank0() && saved.is_ok()) saved = commit_checkpoint(*writer, update_->step_count(), stage_offsets);
    if (Status agreed = agree_on(saved, name); !agreed.is_ok()) return agreed;
    return true;
  }
  // Every rank that writes anything writes its own file; rank 0 lists them all.
  auto writer = begin_shared_checkpoint(name);
  if (!writer.is_ok()) return writer.status();
  auto file_of = [](int r) {
    char file[64];
    std::snprintf(file, sizeof file, "shard.rank%05d.safetensors", r);
    return std::string(file);
  };
  auto files = write_shard_files(name, file_of(comm_->rank()), shards, [&values](size_t i) { return values(i); },
                                /*write=*/!shards.empty());
  if (!files.is_ok()) return files.status();
  if (!all_finite_everywhere()) return false;
  const std::vector<std::string> lists = comm::gather_strings(*comm_, shards_to_json(shards));
  Status s = Status::ok();
  if (is_rank0()) {
    checkpoint::CheckpointWriter& w = *writer.value();
    for (int r = 0; r < world_size(); ++r) {
      const std::vector<WrittenShard> theirs = shards_from_json(lists[static_cast<size_t>(r)], file_of(r));
      if (theirs.empty()) continue;
      checkpoint::ManifestFile f = files.value()[static_cast<size_t>(r)];
      f.name = file_of(r);
      w.add_file(f);
      for (const WrittenShard& ws : theirs) w.add_tensor_shard(ws.tensor, ws.dtype, ws.shape, ws.shard);
    }
    s = commit_checkpoint(w, update_->step_count(), stage_offsets);
  }
  if (Status agreed = agree_on(s, name); !agreed.is_ok()) return agreed;
  return true;
}

bool Trainer::is_rank_state(const std::string& name) { return train::is_rank_state(name); }

bool Trainer::all_ranks(bool ok) const {
  if (world_size() == 1) return ok;
  profiler::ProfileScope scope("train.all_reduce", profiler::Phase::kCommunication);
  Tensor t = full({1}, ok ? 1.0 : 0.0, DType::kI64);
  comm_->all_reduce(t, comm::ReduceOp::kMin);
  return t.item() != 0.0;
}

StatusOr<std::optional<checkpoint::CheckpointWriter>> Trainer::begin_shared_checkpoint(const std::string& name) {
  std::optional<checkpoint::CheckpointWriter> writer;
  Status s = Status::ok();
  if (is_rank0()) {
    auto w = checkpoint::CheckpointWriter::begin(checkpoint::default_env(), cfg_.train.out_dir, name);
    if (w.is_ok()) writer.emplace(std::move(w.value()));
    else s = w.status();
  }
  if (!all_ranks(s.is_ok()))
    return s.is_ok() ? Status::io_error("checkpoint " + name + ": rank 0 could not start it") : s;
  return writer;
}

StatusOr<std::vector<checkpoint::ManifestFile>> Trainer::write_shard_files(
    const std::string& name, const std::string& file, const std::vector<WrittenShard>& shards,
    const std::function<StatusOr<Tensor>(size_t)>& values, bool write) {
  checkpoint::Env* env = checkpoint::default_env();
  uint64_t size = 0;
  uint32_t crc = 0;
  Status s = Status::ok();
  if (write) {
    s = [&]() -> Status {
      auto out = checkpoint::AtomicFileWriter::create(
          env, checkpoint::join_path(checkpoint::staging_dir_for(cfg_.train.out_dir, name), file));
      if (!out.is_ok()) return out.status();
      std::vector<checkpoint::TensorSpec> specs;
      for (const WrittenShard& ws : shards) specs.push_back({ws.shard.key, ws.dtype, ws.shard.stored_shape()});
      Status w = checkpoint::write_safetensors_streamed(out.value(), specs, values);
      if (!w.is_ok()) return w;
      size = out.value().size();
      crc = out.value().crc32c();
      return out.value().commit();
    }();
  }
  // Everyone learns whether every rank wrote its file, and each file's size and checksum.
  const int N = world_size();
  Tensor mine = from_vector(std::vector<int64_t>{s.is_ok() ? 1 : 0, static_cast<int64_t>(size), static_cast<int64_t>(crc)},
                            Shape{3});
  Tensor all = zeros({3 * static_cast<int64_t>(N)}, DType::kI64);
  comm_->all_gather(mine, all);
  const std::vector<int64_t> info = to_vector<int64_t>(all);
  std::vector<checkpoint::ManifestFile> files(static_cast<size_t>(N));
  for (int r = 0; r < N; ++r) {
    if (info[3 * r] == 0)
      return s.is_ok() ? Status::io_error("checkpoint " + name + ": rank " + std::to_string(r) + " could not write its shard")
                       : s;
    files[static_cast<size_t>(r)] = {"", static_cast<uint64_t>(info[3 * r + 1]), static_cast<uint32_t>(info[3 * r + 2])};
  }
  files[static_cast<size_t>(comm_->rank())].name = file;  // the others' names are the caller's to know
  return files;
}

Status Trainer::agree_on(const Status& rank0_status, const std::string& name) const {
  if (!all_ranks(rank0_status.is_ok()))
    return rank0_status.is_ok() ? Status::io_error("checkpoint " + name + ": rank 0 could not commit it") : rank0_status;
  return Status::ok();
}

Status Trainer::commit_checkpoint(checkpoint::CheckpointWriter& w, int64_t optimizer_step,
                                  const std::vector<int64_t>& stage_dropout_offsets) {
  const data::SamplerState sampler = train_sampler_->state();
  const Generator& gen = model_->dropout_generator();
  nlohmann::json state = {
      {"step", step_},
      {"optimizer_step", optimizer_step},
      {"sampler", {{"kind", cfg_.data.sampler}, {"seed", sampler.seed}, {"position", sampler.position}}},
      {"dropout_rng", {{"seed", gen.seed()}, {"offset", gen.offset()}}},
  };
  if (!stage_dropout_offsets.empty()) state["dropout_offset_by_stage"] = stage_dropout_offsets;
  const optim::DynamicLossScaler::State ls = scaler_->state();
  state["loss_scaler"] = {{"scale", ls.scale},
                          {"growth_tracker", ls.growth_tracker},
                          {"hysteresis_left", ls.hysteresis_left},
                          {"skipped", ls.skipped}};
  // Note [Alert state in checkpoints] in train/run_monitor.cc (rank 0 commits, and holds it).
  if (monitor_ && is_rank0()) state["alerts"] = monitor_->alert_state();
  Status s = Status::ok();
  if (!(s = w.write_file("trainer_state.json", state.dump(2) + "\n")).is_ok()) return s;
  if (!(s = w.write_file("config.toml", config_to_toml(cfg_))).is_ok()) return s;
  if (!(s = w.write_file("config.json", model_->hf_config_json())).is_ok()) return s;
  auto done = w.commit();
  if (!done.is_ok()) return done.status();
  return checkpoint::prune_checkpoints(checkpoint::default_env(), cfg_.train.out_dir,
                                       static_cast<int>(cfg_.train.checkpoint_keep));
}

Status Trainer::load_checkpoint(const std::string& dir) {
  auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), dir);
  if (!reader.is_ok()) return reader.status();
  const checkpoint::CheckpointReader& r = reader.value();

  // The architecture must match; other sections (steps, lr, ...) may change on resume.
  auto toml = r.read_file("config.toml");
  if (!toml.is_ok()) return toml.status();
  TrainConfig saved;
  config::ConfigTree tree;
  saved.bind(tree);
  Status s = tree.load_toml_string(toml.value(), dir + "/config.toml");
  if (!s.is_ok()) return s;
  const std::string diffs = model_differences(saved.model, cfg_.model);
  if (!diffs.empty()) return Status::invalid("checkpoint " + dir + " was trained with a different model:" + diffs);
  // Other GEMM engines round differently: the run goes on, but not bit for bit (Note [GEMM
  // engines]), so say so. An "auto" in the checkpoint (or an unused bf16 setting) names none.
  engines_note_.clear();
  auto compare = [&](const char* key, const std::string& was, const std::string& now) {
    if (was != "auto" && was != now)
      engines_note_ += std::string(engines_note_.empty() ? "" : "; ") + key + " was \"" + was + "\", now \"" + now + "\"";
  };
  compare("kernels.f32_gemm", saved.kernels.f32_gemm, cfg_.kernels.f32_gemm);
  if (cfg_.uses_bf16_gemms()) compare("kernels.bf16_gemm", saved.kernels.bf16_gemm, cfg_.kernels.bf16_gemm);
  for (int i = 0; i < kNumKernelSwitches; ++i) {  // the switches that change numbers or kernels
    const auto sw = static_cast<KernelSwitch>(i);
    auto text = [](bool on) { return std::string(on ? "true" : "false"); };
    compare((std::string("kernels.") + kernel_switch_info(sw).key).c_str(), text(saved.kernels.value_of(sw)),
            text(cfg_.kernels.value_of(sw)));
  }
  if (!engines_note_.empty())
    engines_note_ = "resuming " + dir + " on other kernels (" + engines_note_ +
                    "): losses go on with this engine's rounding, not bit for bit; set the checkpoint's values to keep them";

  // A full tensor of the checkpoint as this rank holds it (its tensor-parallel part).
  const parallel::PlacementTable& table = *par_.placements;
  auto load_local = [&](const std::string& name, const std::string& param) -> StatusOr<Tensor> {
    auto t = r.load_tensor(name);
    const parallel::ParamPlacement* row = table.find(param);
    if (!t.is_ok() || row == nullptr || !row->tp_split()) return t;
    if (!(t.value().shape() == row->shape))
      return Status::invalid(dir + ": tensor '" + name + "' has shape " + t.value().shape().str() + "; the model's is " +
                             row->shape.str());
    return table.local_from_full(param, t.value(), par_.tp_rank());
  };
  // The strategy takes what it holds (whole tensors, or its ZeRO partition) through these. A
  // whole tensor that cannot be read or assigned leaves as a StatusError carrying the reader's
  // status; a range read fails as an Error (ZeRO's load, as before the strategies).
  struct StatusError {
    Status status;
  };
  parallel::CheckpointSource source;
  source.whole = [&](const std::string& name, const std::string& param) {
    auto t = load_local(name, param);
    if (!t.is_ok()) throw StatusError{t.status()};
    return t.value();
  };
  source.assign = [&](const std::string& name, const Tensor& dst) {
    auto t = load_local(name, name);
    if (!t.is_ok()) throw StatusError{t.status()};
    if (Status a = assign(dir + ": parameter '" + name + "'", dst, t.value()); !a.is_ok()) throw StatusError{a};
  };
  source.range = [&](const std::string& name, int64_t begin, int64_t end) {
    if (table.at(parameter_of(name)).tp_split()) {  // this rank's part of the tensor, then the range of it
      auto t = load_local(name, parameter_of(name));
      TRI_CHECK(t.is_ok(), t.status().to_string());
      return views::narrow(views::view(core::contiguous(t.value()), {t.value().numel()}), 0, begin, end - begin);
    }
    auto t = r.load_flat_range(name, begin, end);
    TRI_CHECK(t.is_ok(), t.status().to_string());
    return t.value();
  };
  source.of_rank = [&](const std::string& name) {
    const std::string key = rank_state_name(comm_ ? comm_->rank() : 0, name);
    if (!r.has_tensor(key))
      throw StatusError{Status::invalid("checkpoint " + dir + " has no '" + key + "': parallel.grad_compression = \"" +
                                        cfg_.parallel.grad_compression +
                                        "\" resumes the error feedback of a run with the same compression and as many "
                                        "ranks (" + std::to_string(world_size()) + ")")};
    auto t = r.load_tensor(key);
    if (!t.is_ok()) throw StatusError{t.status()};
    return t.value();
  };
  try {
    update_->load_weights(source);
    // Frozen parameters are the trainer's to load: no strategy holds them. A quantized one was
    // rebuilt from where it came from; the checkpoint must hold the same values (Note [Where a
    // quantized base comes from] in quantization/quantized_base.h).
    for (const parallel::ParamPlacement* row : table.on_stage(par_.stage())) {
      if (row->trainable) continue;
      if (!quantized_base_ || !quantized_base_->contains(row->name)) {
        source.assign(row->name, model_->parameter(row->name));
        continue;
      }
      const Tensor now = quantized_base_->dequantized(row->name);
      Tensor saved = empty_like(now);
      source.assign(row->name, saved);
      if (!same_bits(saved, now))
        return Status::invalid("checkpoint " + dir + ": the frozen base weight '" + row->name +
                               "' differs from the one this run quantized to NF4 from " +
                               (cfg_.train.init_from.empty() ? "its seeded initialization"
                                                             : "train.init_from = '" + cfg_.train.init_from + "'") +
                               ": the base changed since the checkpoint was written; resume with the base it was "
                               "trained on");
    }
  } catch (const StatusError& e) {
    return e.status;
  }
  auto state_text = r.read_file("trainer_state.json");
  if (!state_text.is_ok()) return state_text.status();
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(state_text.value());
    // The step counters decide where the run goes on: a negative, fractional or missing one
    // (a hand-edited file) trained "step -3" with an lr of -inf.
    for (const char* key : {"step", "optimizer_step"}) {
      if (!state.is_object() || !state.contains(key))
        return Status::invalid(dir + "/trainer_state.json has no \"" + key + "\" (a step count)");
      const nlohmann::json& v = state.at(key);
      const bool count = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                                                : v.is_number_integer() && v.get<int64_t>() >= 0;
      if (!count)
        return Status::invalid(dir + "/trainer_state.json: \"" + key + "\" = " + v.dump() +
                               " is invalid: a step count is an integer >= 0");
    }
    if (state.at("optimizer_step").get<int64_t>() > state.at("step").get<int64_t>())
      return Status::invalid(dir + "/trainer_state.json: \"optimizer_step\" = " + state.at("optimizer_step").dump() +
                             " is past \"step\" = " + state.at("step").dump() +
                             ": the optimizer steps at most once per step");
    const int64_t opt_step = state.at("optimizer_step").get<int64_t>();
    // Whether the checkpoint has AdamW state: a trainable parameter's tells (all of them
    // must then have it: a parameter frozen when it was saved has none).
    std::vector<std::string> trained;
    for (const parallel::ParamPlacement& row : table.params())
      if (row.trainable) trained.push_back(row.name);
    const bool with_state = !trained.empty() && r.has_tensor(trained.front() + ".exp_avg");
    if (!with_state && opt_step > 0 && !trained.empty())
      return Status::invalid("checkpoint " + dir + " is at optimizer step " + std::to_string(opt_step) +
                             " but has no AdamW state ('" + trained.front() + ".exp_avg')");
    if (with_state)
      for (const std::string& p : trained)
        if (!r.has_tensor(p + ".exp_avg"))
          return Status::invalid("checkpoint " + dir + " has no AdamW state for parameter '" + p +
                                 "', which trains in this run (train.freeze = \"" + cfg_.train.freeze +
                                 "\"): it was frozen when the checkpoint was saved; freeze it again to resume");
    try {
      update_->load_state(source, with_state, opt_step);
    } catch (const StatusError& e) {
      return e.status;
    } catch (const Error& e) {
      return Status::invalid(e.what());
    }
    const auto& smp = state.at("sampler");
    if (smp.at("kind").get<std::string>() != cfg_.data.sampler)
      return Status::invalid("checkpoint " + dir + " used data.sampler = " + smp.at("kind").dump() + ", config has \"" +
                             cfg_.data.sampler + "\"");
    train_sampler_->restore({smp.at("seed").get<uint64_t>(), smp.at("position").get<int64_t>()});
    const auto& rng = state.at("dropout_rng");
    uint64_t offset = rng.at("offset").get<uint64_t>();
    // A pipeline saved with as many stages resumes each stage's own generator. Under another
    // layout (or one process) the stages hold other blocks: the largest offset any stage
    // reached, so that no mask already drawn is drawn again.
    if (state.contains("dropout_offset_by_stage")) {
      const auto& by_stage = state.at("dropout_offset_by_stage");
      if (mesh_ && mesh_->pp_size() > 1 && by_stage.size() == static_cast<size_t>(mesh_->pp_size())) {
        offset = by_stage.at(static_cast<size_t>(mesh_->pp_rank())).get<uint64_t>();
      } else {
        for (const auto& o : by_stage) offset = std::max(offset, o.get<uint64_t>());
      }
    }
    model_->dropout_generator().set_state(rng.at("seed").get<uint64_t>(), offset);
    step_ = state.at("step").get<int64_t>();
    last_checkpoint_step_ = step_;
    saved_alert_state_ = state.contains("alerts") ? state.at("alerts") : nlohmann::json();
    if (state.contains("loss_scaler") && cfg_.precision.loss_scaling()) {
      const auto& ls = state.at("loss_scaler");
      scaler_->load_state({ls.at("scale").get<double>(), ls.at("growth_tracker").get<int64_t>(),
                           ls.at("hysteresis_left").get<int64_t>(), ls.at("skipped").get<int64_t>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::invalid(dir + "/trainer_state.json: " + e.what());
  }
  return Status::ok();
}

}  // namespace trident::train
