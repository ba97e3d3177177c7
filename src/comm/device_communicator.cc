#include "comm/device_communicator.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"

#ifdef TRIDENT_WITH_NCCL
#include "comm/nccl_communicator.h"
#endif

namespace trident::comm {
namespace {

Tensor flat(const Tensor& t) { return views::view(t, {t.numel()}); }

// The result's bytes into the caller's tensor as the engine itself would write them: raw, so
// the tensor's version does not change (MPI and NCCL write without bumping it, and ZeRO-3
// re-gathers parameters that autograd saved; PyTorch FSDP preserves the counter the same way).
void write_result(const Tensor& dst, const Tensor& src) { core::copy_bytes_(dst, src); }

// The engine's operation, then the stand-ins' results copied to the caller's tensors.
class StagedWork final : public Work {
 public:
  StagedWork(std::unique_ptr<Work> inner, std::vector<std::pair<Tensor, Tensor>> results, std::vector<Tensor> keep)
      : inner_(std::move(inner)), results_(std::move(results)), keep_(std::move(keep)) {}
  ~StagedWork() override {
    if (inner_) {
      try {
        wait();
      } catch (...) {  // destructors must not throw; wait() reported it to whoever waited
      }
    }
  }
  void wait() override {
    if (!inner_) return;
    // Taken first: after a failed wait the stand-ins hold no result, and nothing is written
    // back (not even by the destructor's wait).
    const std::unique_ptr<Work> inner = std::move(inner_);
    std::vector<std::pair<Tensor, Tensor>> results = std::move(results_);
    keep_.clear();
    inner->wait();
    for (const auto& [dst, src] : results) write_result(dst, src);
  }
  bool test() override { return !inner_ || inner_->test(); }

 private:
  std::unique_ptr<Work> inner_;
  std::vector<std::pair<Tensor, Tensor>> results_;  // (caller's tensor, stand-in), flat
  std::vector<Tensor> keep_;                        // stand-ins the engine reads until it completes
};

class StagingCommunicator final : public Communicator {
 public:
  StagingCommunicator(std::shared_ptr<Communicator> engine, Device native)
      : engine_(std::move(engine)), native_(native) {}

  int rank() const override { return engine_->rank(); }
  int size() const override { return engine_->size(); }
  std::string backend() const override { return engine_->backend(); }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    count(CommOp::kAllReduce, t);
    if (native(t)) return engine_->all_reduce_async(t, op);
    const Tensor s = stage(t, "all_reduce");
    return done(engine_->all_reduce_async(s, op), {{flat(t), s}});
  }

  std::unique_ptr<Work> reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) override {
    count(CommOp::kReduceScatter, input);
    if (native(input) && native(output)) return engine_->reduce_scatter_async(input, output, op);
    same_device(input, output, "reduce_scatter");
    contiguous(output, "reduce_scatter");
    // In place on a private copy of the input: the result is its first output.numel() elements.
    const Tensor s = stage(input, "reduce_scatter");
    const Tensor s_out = views::narrow(s, 0, 0, output.numel());
    return done(engine_->reduce_scatter_async(s, s_out, op), {{flat(output), s_out}});
  }

  std::unique_ptr<Work> all_gather_async(const Tensor& input, const Tensor& output) override {
    count(CommOp::kAllGather, output);
    if (native(input) && native(output)) return engine_->all_gather_async(input, output);
    same_device(input, output, "all_gather");
    contiguous(input, "all_gather");
    const Tensor s_out = stand_in(output, "all_gather");
    const Tensor mine = views::narrow(s_out, 0, static_cast<int64_t>(rank()) * input.numel(), input.numel());
    core::copy_(mine, flat(input));
    return done(engine_->all_gather_async(mine, s_out), {{flat(output), s_out}});
  }

  std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) override {
    count(CommOp::kBroadcast, t);
    if (native(t)) return engine_->broadcast_async(t, root);
    const Tensor s = stage(t, "broadcast");
    return done(engine_->broadcast_async(s, root), {{flat(t), s}});
  }

  std::unique_ptr<Work> send_async(const Tensor& t, int dst, int tag) override {
    count(CommOp::kSend, t);
    if (native(t)) return engine_->send_async(t, dst, tag);
    const Tensor s = stage(t, "send");
    return done(engine_->send_async(s, dst, tag), {}, {s});
  }

  std::unique_ptr<Work> recv_async(const Tensor& t, int src, int tag) override {
    count(CommOp::kRecv, t);
    if (native(t)) return engine_->recv_async(t, src, tag);
    const Tensor s = stand_in(t, "recv");
    return done(engine_->recv_async(s, src, tag), {{flat(t), s}});
  }

  std::unique_ptr<Work> send_recv_async(const std::vector<PeerOp>& ops) override {
    std::vector<PeerOp> staged;
    std::vector<std::pair<Tensor, Tensor>> results;
    std::vector<Tensor> keep;
    for (const PeerOp& op : ops) {
      const bool send = op.kind == PeerOp::Kind::kSend;
      count(send ? CommOp::kSend : CommOp::kRecv, op.tensor);
      PeerOp s = op;
      if (!native(op.tensor)) {
        s.tensor = send ? stage(op.tensor, "send") : stand_in(op.tensor, "recv");
        if (send) keep.push_back(s.tensor);
        else results.emplace_back(flat(op.tensor), s.tensor);
      }
      staged.push_back(std::move(s));
    }
    return done(engine_->send_recv_async(staged), std::move(results), std::move(keep));
  }

  std::unique_ptr<Work> all_to_all_async(const Tensor& input, const Tensor& output) override {
    count(CommOp::kAllToAll, input);
    if (native(input) && native(output)) return engine_->all_to_all_async(input, output);
    same_device(input, output, "all_to_all");
    const Tensor s_in = stage(input, "all_to_all");
    const Tensor s_out = stand_in(output, "all_to_all");
    return done(engine_->all_to_all_async(s_in, s_out), {{flat(output), s_out}}, {s_in});
  }

  std::unique_ptr<Work> all_to_all_v_async(const Tensor& input, const std::vector<int64_t>& send_counts,
                                           const Tensor& output, const std::vector<int64_t>& recv_counts) override {
    // Checked before anything is staged (the engine checks again what it is handed).
    check_all_to_all_v("rank " + std::to_string(rank()) + ": all_to_all_v", input, send_counts, output, recv_counts);
    count(CommOp::kAllToAllV, input);
    if (native(input) && native(output)) return engine_->all_to_all_v_async(input, send_counts, output, recv_counts);
    same_device(input, output, "all_to_all_v");
    const Tensor s_in = stage(input, "all_to_all_v");
    const Tensor s_out = stand_in(output, "all_to_all_v");
    return done(engine_->all_to_all_v_async(s_in, send_counts, s_out, recv_counts), {{flat(output), s_out}}, {s_in});
  }

  void barrier() override {
    ++stats_.of(CommOp::kBarrier).calls;
    engine_->barrier();
  }

  const HostLayout& hosts() const override { return engine_->hosts(); }
  void set_hierarchy(Hierarchy mode, double intra_gbps, double inter_gbps) override {
    engine_->set_hierarchy(mode, intra_gbps, inter_gbps);
  }
  bool hierarchical() const override { return engine_->hierarchical(); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    return with_staging(std::shared_ptr<Communicator>(engine_->split(color, key)), native_);
  }

 private:
  bool native(const Tensor& t) const { return t.device() == native_; }

  void same_device(const Tensor& input, const Tensor& output, const char* op) const {
    TRI_CHECK(input.device() == output.device(), "rank ", rank(), ": ", op, ": input on ", input.device(),
              " and output on ", output.device(), " must be on one device");
  }

  void contiguous(const Tensor& t, const char* op) const {
    TRI_CHECK(t.is_contiguous(), "rank ", rank(), ": ", op, ": tensor ", t.shape(), " on ", t.device(),
              " must be contiguous");
  }

  // A flat, uninitialized tensor on the engine's device the size of `t` (page-locked when that
  // is the host, so that device copies run at full speed).
  Tensor stand_in(const Tensor& t, const char* op) const {
    contiguous(t, op);
    TRI_CHECK_NOT_IMPLEMENTED(t.device().is_cpu() || native_.is_cpu(), "rank ", rank(), ": ", op, ": a tensor on ",
                              t.device(), " for a ", backend(), " communicator on ", native_,
                              ": staging between two devices goes through the host; copy it there first");
    return native_.is_cpu() ? empty_pinned({t.numel()}, t.dtype()) : empty({t.numel()}, t.dtype(), native_);
  }
  Tensor stage(const Tensor& t, const char* op) const {
    Tensor s = stand_in(t, op);
    core::copy_(s, flat(t));
    return s;
  }

  static std::unique_ptr<Work> done(std::unique_ptr<Work> inner, std::vector<std::pair<Tensor, Tensor>> results,
                                    std::vector<Tensor> keep = {}) {
    return std::make_unique<StagedWork>(std::move(inner), std::move(results), std::move(keep));
  }

  std::shared_ptr<Communicator> engine_;
  Device native_;
};

}  // namespace

std::unique_ptr<Communicator> with_staging(std::shared_ptr<Communicator> engine, Device native) {
  TRI_CHECK(engine != nullptr, "with_staging: no communicator to stage for");
  return std::make_unique<StagingCommunicator>(std::move(engine), native);
}

std::unique_ptr<Communicator> communicator_for(std::shared_ptr<Communicator> world, Device device) {
#ifdef TRIDENT_WITH_NCCL
  if (device.is_cuda()) return with_staging(std::shared_ptr<Communicator>(make_nccl_communicator(*world)), device);
#else
  // Without NCCL nothing picks each rank's GPU: every rank would share GPU 0.
  TRI_CHECK_NOT_IMPLEMENTED(!device.is_cuda() || world->size() == 1, "rank ", world->rank(), ": ", world->size(),
                            " ranks on GPUs need NCCL, and this build has none (CMake did not find libnccl)");
#endif
  return with_staging(std::move(world), Device::cpu());
}

}  // namespace trident::comm
