#include "comm/communicator.h"

#include <limits>
#include <sstream>

#include "core/check.h"

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
    case CommOp::kAllToAllV: return "all_to_all_v";
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
  if (intra_host_bytes + inter_host_bytes > 0)
    os << "sent: " << intra_host_bytes << " bytes inside the host, " << inter_host_bytes << " bytes to other hosts\n";
  return os.str();
}

std::vector<int> HostLayout::ranks_on(int host) const {
  std::vector<int> ranks;
  for (size_t r = 0; r < host_of.size(); ++r)
    if (host_of[r] == host) ranks.push_back(static_cast<int>(r));
  return ranks;
}

int HostLayout::ranks_per_host() const {
  const int hosts = num_hosts();
  if (hosts == 0 || host_of.size() % static_cast<size_t>(hosts) != 0) return 0;
  const int per = static_cast<int>(host_of.size()) / hosts;
  for (int h = 0; h < hosts; ++h)
    if (static_cast<int>(ranks_on(h).size()) != per) return 0;
  return per;
}

std::string HostLayout::str() const {
  std::ostringstream os;
  for (int h = 0; h < num_hosts(); ++h) {
    const std::vector<int> ranks = ranks_on(h);
    os << (h > 0 ? ", " : "") << names[static_cast<size_t>(h)] << " (rank" << (ranks.size() > 1 ? "s " : " ");
    // Runs of consecutive ranks as a-b.
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      os << (i > 0 ? "," : "") << ranks[i];
      if (j > i) os << "-" << ranks[j];
      i = j + 1;
    }
    os << ")";
  }
  return os.str();
}

HostLayout HostLayout::single(int size, const std::string& name) {
  return HostLayout{std::vector<int>(static_cast<size_t>(size), 0), {name}};
}

Hierarchy parse_hierarchy(const std::string& s) {
  if (s == "auto") return Hierarchy::kAuto;
  if (s == "on") return Hierarchy::kOn;
  TRI_CHECK(s == "off", "hierarchical collectives: '", s, "' is not one of auto, on, off");
  return Hierarchy::kOff;
}

const HostLayout& Communicator::hosts() const {
  if (default_hosts_.host_of.empty()) default_hosts_ = HostLayout::single(size());
  return default_hosts_;
}

void Communicator::set_hierarchy(Hierarchy, double, double) {}

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

void Communicator::check_all_to_all_v(const std::string& where, const Tensor& input,
                                      const std::vector<int64_t>& send_counts, const Tensor& output,
                                      const std::vector<int64_t>& recv_counts) const {
  TRI_CHECK(input.dtype() == output.dtype(), where, ": input ", input.dtype(), " and output ", output.dtype(),
            " differ in dtype");
  for (const bool send : {true, false}) {
    const std::vector<int64_t>& counts = send ? send_counts : recv_counts;
    const Tensor& t = send ? input : output;
    const char* name = send ? "send_counts" : "recv_counts";
    TRI_CHECK(counts.size() == static_cast<size_t>(size()), where, ": ", name, " has ", counts.size(),
              " entries; expected one per rank of the communicator (", size(), ")");
    int64_t total = 0;
    for (size_t j = 0; j < counts.size(); ++j) {
      TRI_CHECK(counts[j] >= 0, where, ": ", name, "[", j, "] = ", counts[j],
                " is negative; counts are elements, >= 0");
      // Saturates: a garbage count cannot wrap the sum around to the right size.
      total = counts[j] > std::numeric_limits<int64_t>::max() - total ? std::numeric_limits<int64_t>::max()
                                                                       : total + counts[j];
    }
    TRI_CHECK(total == t.numel(), where, ": ", name, " sum to ", total, " elements, but the ",
              send ? "input " : "output ", t.shape(), " has ", t.numel());
  }
}

void Communicator::count(CommOp op, const Tensor& t) {
  CommStats::Counter& c = stats_.of(op);
  ++c.calls;
  c.elements += t.numel();
  c.bytes += t.numel() * static_cast<int64_t>(element_size(t.dtype()));
}

}  // namespace trident::comm
