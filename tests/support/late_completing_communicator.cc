#include "support/late_completing_communicator.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace trident::testing {

namespace {

class LateWork final : public comm::Work {
 public:
  LateWork(std::unique_ptr<comm::Work> work, int unfinished_tests) : work_(std::move(work)), left_(unfinished_tests) {}
  void wait() override { work_->wait(); }
  bool test() override {
    if (left_ > 0) {
      --left_;
      return false;
    }
    return work_->test();
  }

 private:
  std::unique_ptr<comm::Work> work_;
  int left_;
};

class LateCompleting final : public comm::Communicator {
 public:
  LateCompleting(std::shared_ptr<comm::Communicator> engine, int unfinished_tests)
      : engine_(std::move(engine)), unfinished_tests_(unfinished_tests) {}
  int rank() const override { return engine_->rank(); }
  int size() const override { return engine_->size(); }
  std::string backend() const override { return engine_->backend() + " (late-completing)"; }
  std::unique_ptr<comm::Work> all_reduce_async(const Tensor& t, comm::ReduceOp op) override {
    return late(engine_->all_reduce_async(t, op));
  }
  std::unique_ptr<comm::Work> reduce_scatter_async(const Tensor& input, const Tensor& output,
                                                   comm::ReduceOp op) override {
    return late(engine_->reduce_scatter_async(input, output, op));
  }
  std::unique_ptr<comm::Work> all_gather_async(const Tensor& input, const Tensor& output) override {
    return late(engine_->all_gather_async(input, output));
  }
  std::unique_ptr<comm::Work> broadcast_async(const Tensor& t, int root) override {
    return late(engine_->broadcast_async(t, root));
  }
  std::unique_ptr<comm::Work> all_to_all_async(const Tensor& input, const Tensor& output) override {
    return late(engine_->all_to_all_async(input, output));
  }
  std::unique_ptr<comm::Work> all_to_all_v_async(const Tensor& input, const std::vector<int64_t>& send_counts,
                                                 const Tensor& output,
                                                 const std::vector<int64_t>& recv_counts) override {
    return late(engine_->all_to_all_v_async(input, send_counts, output, recv_counts));
  }
  std::unique_ptr<comm::Work> send_async(const Tensor& t, int dst, int tag) override {
    return late(engine_->send_async(t, dst, tag));
  }
  std::unique_ptr<comm::Work> recv_async(const Tensor& t, int src, int tag) override {
    return late(engine_->recv_async(t, src, tag));
  }
  std::unique_ptr<comm::Work> send_recv_async(const std::vector<comm::PeerOp>& ops) override {
    return late(engine_->send_recv_async(ops));
  }
  void barrier() override { engine_->barrier(); }
  std::unique_ptr<comm::Communicator> split(int color, int key) override {
    return late_completing(std::shared_ptr<comm::Communicator>(engine_->split(color, key)), unfinished_tests_);
  }

 private:
  std::unique_ptr<comm::Work> late(std::unique_ptr<comm::Work> work) const {
    return std::make_unique<LateWork>(std::move(work), unfinished_tests_);
  }
  std::shared_ptr<comm::Communicator> engine_;
  int unfinished_tests_;
};

}  // namespace

std::unique_ptr<comm::Communicator> late_completing(std::shared_ptr<comm::Communicator> engine, int unfinished_tests) {
  return std::make_unique<LateCompleting>(std::move(engine), unfinished_tests);
}

}  // namespace trident::testing
