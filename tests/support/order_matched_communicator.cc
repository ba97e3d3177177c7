#include "support/order_matched_communicator.h"

#include <utility>
#include <vector>

namespace trident::testing {
namespace {

class OrderMatched final : public comm::Communicator {
 public:
  explicit OrderMatched(std::shared_ptr<comm::Communicator> engine) : engine_(std::move(engine)) {}

  int rank() const override { return engine_->rank(); }
  int size() const override { return engine_->size(); }
  std::string backend() const override { return engine_->backend() + " (order-matched)"; }

  std::unique_ptr<comm::Work> all_reduce_async(const Tensor& t, comm::ReduceOp op) override {
    return queue(engine_->all_reduce_async((drain(), t), op));
  }
  std::unique_ptr<comm::Work> reduce_scatter_async(const Tensor& input, const Tensor& output,
                                                   comm::ReduceOp op) override {
    return queue(engine_->reduce_scatter_async((drain(), input), output, op));
  }
  std::unique_ptr<comm::Work> all_gather_async(const Tensor& input, const Tensor& output) override {
    return queue(engine_->all_gather_async((drain(), input), output));
  }
  std::unique_ptr<comm::Work> broadcast_async(const Tensor& t, int root) override {
    return queue(engine_->broadcast_async((drain(), t), root));
  }
  std::unique_ptr<comm::Work> send_async(const Tensor& t, int dst, int) override {
    return queue(engine_->send_async((drain(), t), dst, 0));
  }
  std::unique_ptr<comm::Work> recv_async(const Tensor& t, int src, int) override {
    return queue(engine_->recv_async((drain(), t), src, 0));
  }
  std::unique_ptr<comm::Work> send_recv_async(const std::vector<comm::PeerOp>& ops) override {
    drain();
    std::vector<comm::PeerOp> untagged = ops;
    for (comm::PeerOp& op : untagged) op.tag = 0;
    return queue(engine_->send_recv_async(untagged));
  }
  std::unique_ptr<comm::Work> all_to_all_async(const Tensor& input, const Tensor& output) override {
    return queue(engine_->all_to_all_async((drain(), input), output));
  }
  void barrier() override {
    drain();
    engine_->barrier();
  }
  std::unique_ptr<comm::Communicator> split(int color, int key) override {
    drain();
    return order_matched(std::shared_ptr<comm::Communicator>(engine_->split(color, key)));
  }

 private:
  // The stream: an operation starts once every earlier one has completed.
  void drain() {
    for (const std::shared_ptr<comm::Work>& w : in_flight_) w->wait();
    in_flight_.clear();
  }
  // Its Work waits for the engine's (shared with the stream's queue).
  class Queued final : public comm::Work {
   public:
    explicit Queued(std::shared_ptr<comm::Work> inner) : inner_(std::move(inner)) {}
    void wait() override { inner_->wait(); }
    bool test() override { return inner_->test(); }

   private:
    std::shared_ptr<comm::Work> inner_;
  };
  std::unique_ptr<comm::Work> queue(std::unique_ptr<comm::Work> work) {
    std::shared_ptr<comm::Work> shared(std::move(work));
    in_flight_.push_back(shared);
    return std::make_unique<Queued>(shared);
  }

  std::shared_ptr<comm::Communicator> engine_;
  std::vector<std::shared_ptr<comm::Work>> in_flight_;
};

}  // namespace

std::unique_ptr<comm::Communicator> order_matched(std::shared_ptr<comm::Communicator> engine) {
  return std::make_unique<OrderMatched>(std::move(engine));
}

}  // namespace trident::testing
