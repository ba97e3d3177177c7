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

void Communicator::count(CommOp op, const Tensor& t) {
  CommStats::Counter& c = stats_.of(op);
  ++c.calls;
  c.elements += t.numel();
  c.bytes += t.numel() * static_cast<int64_t>(element_size(t.dtype()));
}

}  // namespace trident::comm
