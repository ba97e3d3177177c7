// Training through the device code paths, on the emulated device (support/emulated_device.h:
// host memory and host kernels behind the device tables): a GPT-2 moved with Module::to,
// trained with AdamW (state created on the device) and global-norm clipping, gives the host's
// losses bit for bit; so does ZeRO-Offload with the model on the device and the bf16 masters
// on the host, whose gradients arrive by asynchronous copies; a checkpoint of device
// tensors holds the host's bytes; and AdamW rounding the masters into the model in its own
// launches gives the bits of a step then a copy. The same paths run on a GPU in
// tests/cuda/cuda_training_test.cc.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "autograd/engine.h"
#include "checkpoint/env.h"
#include "checkpoint/safetensors.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
#include "models/gpt2/model.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/mixed_precision.h"
#include "support/emulated_device.h"
#include "support/tiny_run.h"

namespace trident {
namespace {

// The training tests' tiny GPT-2 (support/tiny_run.h): 2 layers, width 32, context 16, vocab 64.
models::gpt2::GPT2Config tiny_model() { return models::gpt2::GPT2Config::from(testing::tiny_run_config({}).model); }

// Losses of `steps` AdamW steps on fixed random tokens, the model on `device`; with
// `precision` bf16, fp32 masters on `master_device` (ZeRO-Offload when that is the host).
// `overlapped`: the parts of MasterWeights::step's ZeRO-Offload path, called one by one: AdamW
// steps the masters one at a time, each copied to the model while the next is stepped.
// `in_flight`: ZeRO-Offload's bound on the gradient bytes on their way to the host.
std::vector<double> train(Device device, const std::string& precision = "fp32",
                          std::optional<Device> master_device = std::nullopt, int steps = 5,
                          bool overlapped = false,
                          int64_t in_flight = optim::MasterWeights::kDefaultOffloadInFlightBytes) {
  models::gpt2::GPT2 model(tiny_model());
  model.to(device);
  for (const Tensor& p : model.parameters()) EXPECT_EQ(p.device(), device);
  std::optional<optim::MasterWeights> master;
  if (precision != "fp32" || master_device)
    master.emplace(model.named_parameters(), precision == "bf16" ? DType::kBF16 : DType::kF32, master_device,
                   in_flight);
  optim::AdamWOptions options;
  options.lr = 3e-3;
  optim::AdamW opt(master ? master->masters() : model.named_parameters(), options);
  const std::vector<Tensor> weights = master ? master->master_tensors() : model.parameters();
  Generator gen(7);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    const Tensor idx = core::to_device(randint(0, 64, {4, 16}, gen), device);
    const Tensor tgt = core::to_device(randint(0, 64, {4, 16}, gen), device);
    const Tensor loss = model.loss(idx, tgt);
    EXPECT_EQ(loss.device(), device);
    losses.push_back(loss.item());
    autograd::backward(loss);
    if (master) master->finish_backward();
    optim::clip_grad_norm_(weights, 1.0);
    if (overlapped) {
      const std::vector<float> before = to_vector<float>(core::cast(core::to_device(model.parameters()[0], Device::cpu()), DType::kF32));
      opt.step(options.lr, [&](size_t k) { master->copy_to_model_async(k); });
      // In flight until finished (the emulated device copies only when waited for).
      EXPECT_EQ(to_vector<float>(core::cast(core::to_device(model.parameters()[0], Device::cpu()), DType::kF32)), before);
      master->finish_copy_to_model();
    } else if (master) {
      master->step(opt, options.lr);
    } else {
      opt.step(options.lr);
    }
    if (master) master->zero_grads();
    model.zero_grad();
  }
  for (const auto& [name, state] : opt.state())
    EXPECT_EQ(state.device(), master_device.value_or(device)) << name << ": optimizer state on the wrong device";
  return losses;
}

TEST(DeviceTraining, Fp32OnADeviceGivesTheHostLossesBitForBit) {
  const std::vector<double> host = train(Device::cpu());
  EXPECT_EQ(train(testing::emulated_device()), host);
}

TEST(DeviceTraining, OffloadedMastersOnTheHostGiveTheDeviceLossesBitForBit) {
  const Device dev = testing::emulated_device();
  const std::vector<double> on_device = train(dev, "bf16");
  EXPECT_EQ(train(dev, "bf16", Device::cpu()), on_device);
  EXPECT_EQ(train(dev, "bf16", Device::cpu(), 5, /*overlapped=*/true), on_device);
  EXPECT_EQ(train(dev, "fp32", Device::cpu(), 5, /*overlapped=*/true), train(dev));
  EXPECT_EQ(train(Device::cpu(), "bf16"), on_device);
}

// ZeRO-Offload's gradient copies are asynchronous (the emulated device runs them only when
// waited for, as late as a GPU may): until finish_backward() the masters have no gradient and
// reading them is a clear error; after it they hold the on-device masters' gradients.
TEST(DeviceTraining, OffloadedGradientsArriveAtFinishBackward) {
  const Device dev = testing::emulated_device();
  std::vector<std::vector<float>> grads[2];
  for (int offload = 0; offload < 2; ++offload) {
    models::gpt2::GPT2 model(tiny_model());
    model.to(dev);
    optim::MasterWeights master(model.named_parameters(), DType::kBF16,
                                offload ? std::optional<Device>(Device::cpu()) : std::nullopt);
    Generator gen(3);
    const Tensor idx = core::to_device(randint(0, 64, {2, 16}, gen), dev);
    autograd::backward(model.loss(idx, idx));
    if (offload) {
      for (const auto& [name, m] : master.masters()) EXPECT_FALSE(m.grad().has_value()) << name;
      try {
        master.grads_overflowed();
        ADD_FAILURE() << "read the masters' gradients with copies in flight";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("finish_backward()"), std::string::npos) << e.what();
      }
    }
    master.finish_backward();
    for (const auto& [name, m] : master.masters()) {
      ASSERT_TRUE(m.grad().has_value()) << name;
      EXPECT_EQ(m.grad()->device(), offload ? Device::cpu() : dev) << name;
      grads[offload].push_back(to_vector<float>(*m.grad()));
    }
  }
  EXPECT_EQ(grads[1], grads[0]);
}

// Note [Offloaded gradients in flight]: past a bucket's worth of gradients on their way to the
// host, the host waits for them and folds them in, freeing their device copies, so the device
// never holds every gradient at once; the masters' gradients, and so the losses, are the same bits.
TEST(DeviceTraining, OffloadedGradientsLeaveTheDeviceABucketAtATime) {
  const Device dev = testing::emulated_device();
  for (const char* precision : {"bf16", "fp32"}) {
    const std::vector<double> at_the_end = train(dev, precision, Device::cpu());
    EXPECT_EQ(train(dev, precision, Device::cpu(), 5, false, /*in_flight=*/1), at_the_end) << precision;
  }
  // The device's gradient bytes at their peak in one backward, with a bound of `limit` bytes.
  int64_t largest = 0, all = 0;
  const auto peak = [&](int64_t limit) {
    models::gpt2::GPT2 model(tiny_model());
    model.to(dev);
    optim::MasterWeights master(model.named_parameters(), DType::kBF16, Device::cpu(), limit);
    largest = all = 0;
    for (const Tensor& p : model.parameters()) {
      largest = std::max<int64_t>(largest, static_cast<int64_t>(p.nbytes()));
      all += static_cast<int64_t>(p.nbytes());
    }
    Generator gen(3);
    const Tensor idx = core::to_device(randint(0, 64, {2, 16}, gen), dev);
    Allocator& device_memory = *device_allocator(dev.type);
    device_memory.reset_peak_stats();
    autograd::backward(model.loss(idx, idx));
    master.finish_backward();
    return device_memory.stats().category(MemoryCategory::kGradient).peak;
  };
  const int64_t unbounded = peak(optim::MasterWeights::kDefaultOffloadInFlightBytes);
  EXPECT_GE(unbounded, all) << "every gradient waits on the device for the backward's end";
  const int64_t bounded = peak(largest);
  EXPECT_LE(bounded, 2 * largest + 4096) << "at most the bound and the gradient that crossed it, of " << all
                                         << " bytes of gradients";
}

// The bits of a tensor's values widened to f32 (exact for bf16 and f16; -0 and +0 differ).
std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> out;
  for (const float x : to_vector<float>(t)) out.push_back(std::bit_cast<uint32_t>(x));
  return out;
}

// Note [AdamW into the model]: with the masters on the model's device, MasterWeights::step
// rounds them into the model in AdamW's own launches. After several steps the masters, AdamW's
// state and the bf16/f16 model hold the bits of AdamW::step then copy_to_model; so do the
// losses. At step 2 one master is overwritten (as a checkpoint load would) and has no gradient:
// it is not updated, and both paths copy it into the model as it is.
TEST(DeviceTraining, AdamWWritesTheModelWithTheBitsOfStepThenCopyToModel) {
  const Device dev = testing::emulated_device();
  for (const DType compute : {DType::kBF16, DType::kF16}) {
    struct Run {
      std::vector<double> losses;
      std::vector<std::vector<uint32_t>> masters, state, model;
    };
    const auto run = [&](bool fused) {
      models::gpt2::GPT2 model(tiny_model());
      model.to(dev);
      optim::MasterWeights master(model.named_parameters(), compute);
      optim::AdamWOptions options;
      options.lr = 3e-3;
      optim::AdamW opt(master.masters(), options);
      Generator gen(7);
      Run r;
      for (int s = 0; s < 4; ++s) {
        const Tensor idx = core::to_device(randint(0, 64, {4, 16}, gen), dev);
        const Tensor tgt = core::to_device(randint(0, 64, {4, 16}, gen), dev);
        const Tensor loss = model.loss(idx, tgt);
        r.losses.push_back(loss.item());
        autograd::backward(loss);
        master.finish_backward();
        optim::clip_grad_norm_(master.master_tensors(), 1.0);
        if (s == 2) {
          Tensor stale = master.masters()[1].second;
          core::copy_(stale, core::to_device(randn(stale.shape(), gen), dev));
          stale.zero_grad();
        }
        if (fused) {
          master.step(opt, options.lr);
        } else {
          opt.step(options.lr);
          master.copy_to_model();
        }
        master.zero_grads();
        model.zero_grad();
      }
      for (const auto& [name, m] : master.masters()) r.masters.push_back(bits(m));
      for (const auto& [name, t] : opt.state()) r.state.push_back(bits(t));
      for (const Tensor& p : model.parameters()) {
        EXPECT_EQ(p.dtype(), compute);
        EXPECT_EQ(p.device(), dev);
        r.model.push_back(bits(p));
      }
      return r;
    };
    const Run fused = run(true), unfused = run(false);
    EXPECT_EQ(fused.losses, unfused.losses) << compute;
    EXPECT_EQ(fused.masters, unfused.masters) << compute;
    EXPECT_EQ(fused.state, unfused.state) << compute;
    ASSERT_EQ(fused.model.size(), unfused.model.size());
    for (size_t k = 0; k < fused.model.size(); ++k)
      EXPECT_EQ(fused.model[k], unfused.model[k]) << compute << ", parameter " << k;
    // The model moved with the masters (the steps changed it).
    EXPECT_NE(fused.losses.front(), fused.losses.back()) << compute;
  }
}

TEST(DeviceTraining, CheckpointsOfDeviceTensorsHoldTheHostBytes) {
  models::gpt2::GPT2 host(tiny_model()), moved(tiny_model());
  moved.to(testing::emulated_device());
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("trident_device_ckpt_" + std::to_string(::getpid()) + ".safetensors");
  std::vector<checkpoint::NamedTensor> tensors;
  for (const auto& [name, t] : moved.named_parameters()) tensors.push_back({name, t});
  ASSERT_TRUE(checkpoint::save_safetensors(checkpoint::default_env(), file.string(), tensors).is_ok());
  auto read = checkpoint::load_safetensors(checkpoint::default_env(), file.string());
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  for (const auto& [name, t] : host.named_parameters()) {
    const auto it = std::find_if(read.value().begin(), read.value().end(), [&](const auto& e) { return e.name == name; });
    ASSERT_NE(it, read.value().end()) << name;
    EXPECT_EQ(to_vector<float>(it->tensor), to_vector<float>(t)) << name;
  }
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace trident
