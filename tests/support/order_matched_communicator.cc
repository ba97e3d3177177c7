#include "support/order_matched_communicator.h"

#include <chrono>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/factory.h"

namespace trident::testing {
namespace {

class DoneWork final : public comm::Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class OrderMatched final : public comm::Communicator {
 public:
  explicit OrderMatched(std::shared_ptr<comm::Communicator> engine)
      : engine_(std::move(engine)), acks_(engine_->split(0, engine_->rank())) {}

  int rank() const override { return engine_->rank(); }
  int size() const override { return engine_->size(); }
  std::string backend() const override { return engine_->backend() + " (order-matched)"; }

  // Collectives run one after another, as on a stream (each completes before the next starts).
  std::unique_ptr<comm::Work> all_reduce_async(const Tensor& t, comm::ReduceOp op) override {
    engine_->all_reduce(t, op);
    return done();
  }
  std::unique_ptr<comm::Work> reduce_scatter_async(const Tensor& input, const Tensor& output,
                                                   comm::ReduceOp op) override {
    engine_->reduce_scatter(input, output, op);
    return done();
  }
  std::unique_ptr<comm::Work> all_gather_async(const Tensor& input, const Tensor& output) override {
    engine_->all_gather(input, output);
    return done();
  }
  std::unique_ptr<comm::Work> broadcast_async(const Tensor& t, int root) override {
    engine_->broadcast(t, root);
    return done();
  }
  std::unique_ptr<comm::Work> all_to_all_async(const Tensor& input, const Tensor& output) override {
    engine_->all_to_all(input, output);
    return done();
  }
  std::unique_ptr<comm::Work> all_to_all_v_async(const Tensor& input, const std::vector<int64_t>& send_counts,
                                                 const Tensor& output,
                                                 const std::vector<int64_t>& recv_counts) override {
    engine_->all_to_all_v(input, send_counts, output, recv_counts);
    return done();
  }
  void barrier() override { engine_->barrier(); }
  std::unique_ptr<comm::Communicator> split(int color, int key) override {
    return order_matched(std::shared_ptr<comm::Communicator>(engine_->split(color, key)));
  }

  std::unique_ptr<comm::Work> send_async(const Tensor& t, int dst, int tag) override {
    return send_recv_async({{comm::PeerOp::Kind::kSend, t, dst, tag}});
  }
  std::unique_ptr<comm::Work> recv_async(const Tensor& t, int src, int tag) override {
    return send_recv_async({{comm::PeerOp::Kind::kRecv, t, src, tag}});
  }

  // One NCCL group, to completion: the messages go with tag 0 (matched by order), and a send
  // completes only once its receiver acknowledges it (a rendezvous, whatever MPI's eager
  // limit), on a second communicator, with the message's number between the pair as the tag.
  std::unique_ptr<comm::Work> send_recv_async(const std::vector<comm::PeerOp>& ops) override {
    struct Message {
      bool send;
      int peer, number;
      std::unique_ptr<comm::Work> data, ack;
      Tensor ack_buf;
    };
    std::vector<Message> messages;
    for (const comm::PeerOp& op : ops) {
      const bool send = op.kind == comm::PeerOp::Kind::kSend;
      int& counter = (send ? sent_ : received_)[op.peer];
      Message msg{send, op.peer, counter++ % 30000, nullptr, nullptr, zeros({1})};
      msg.data = send ? engine_->send_async(op.tensor, op.peer, 0) : engine_->recv_async(op.tensor, op.peer, 0);
      if (send) msg.ack = acks_->recv_async(msg.ack_buf, op.peer, msg.number);
      messages.push_back(std::move(msg));
    }
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      bool all = true;
      for (Message& msg : messages) {
        if (!msg.send && !msg.ack && msg.data->test()) msg.ack = acks_->send_async(msg.ack_buf, msg.peer, msg.number);
        all = msg.data->test() && msg.ack && msg.ack->test() && all;
      }
      if (all) break;
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      TRI_CHECK(waited < comm::MpiRuntime::timeout(), "rank ", rank(), ": order-matched send/recv batch of ",
                ops.size(), " messages did not complete in ", comm::MpiRuntime::timeout(),
                " s: a send waits for a receive its peer has not posted (a deadlock on NCCL)");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return done();
  }

 private:
  static std::unique_ptr<comm::Work> done() { return std::make_unique<DoneWork>(); }

  std::shared_ptr<comm::Communicator> engine_;
  std::unique_ptr<comm::Communicator> acks_;
  std::map<int, int> sent_, received_;  // messages to / from each peer so far
};

}  // namespace

std::unique_ptr<comm::Communicator> order_matched(std::shared_ptr<comm::Communicator> engine) {
  return std::make_unique<OrderMatched>(std::move(engine));
}

}  // namespace trident::testing
