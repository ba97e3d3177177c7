#include "comm/communicator.h"

#include <sstream>

namespace trident::comm {

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "all_reduce";
    case CommOp::kReduceScatter: return "reduce_scatter";
    case CommOp::kAllGather: return "all_gather";
    case CommOp::kBroadcast: return "broadcast";
    case CommOp::kSend: return "send";
    case CommOp::kRecv: return "recv";
    case CommOp::kBarrier: return "barrier";
    case CommOp::kAllToAll: return "all_to_all";
  }
  return "?";
}

int64_t CommStats::total_bytes() const {
  int64_t total = 0;
  for (const Counter& c : ops) total += c.bytes;
  return total;
}

std::string CommStats::str() const {
  std::ostringstream os;
  for (int i = 0; i < kNumCommOps; ++i) {
    const Counter& c = ops[static_cast<size_t>(i)];
    if (c.calls == 0) continue;
    os << comm_op_name(static_cast<CommOp>(i)) << ": " << c.calls << " calls, " << c.elements << " elements, "
       << c.bytes << " bytes\n";
  }
  return os.str();
}

namespace {

// Several operations' Works as one.
class WorkList final : public Work {
 public:
  explicit WorkList(std::vector<std::unique_ptr<Work>> works) : works_(std::move(works)) {}
  void wait() override {
    for (auto& w : works_) w->wait();
  }
  bool test() override {
    bool done = true;
    for (auto& w : works_) done = w->test() && done;  // tests every one: each drives its progress
    return done;
  }

 private:
  std::vector<std::unique_ptr<Work>> works_;
};

}  // namespace

std::unique_ptr<Work> Communicator::send_recv_async(const std::vector<PeerOp>& ops) {
  std::vector<std::unique_ptr<Work>> works;
  for (const PeerOp& op : ops)
    works.push_back(op.kind == PeerOp::Kind::kSend ? send_async(op.tensor, op.peer, op.tag)
                                                   : recv_async(op.tensor, op.peer, op.tag));
  return std::make_unique<WorkList>(std::move(works));
}

void Communicator::count(CommOp op, const Tensor& t) {
  CommStats::Counter& c = stats_.of(op);
  ++c.calls;
  c.elements += t.numel();
  c.bytes += t.numel() * static_cast<int64_t>(element_size(t.dtype()));
}

}  // namespace trident::comm
