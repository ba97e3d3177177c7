// Communicator: the collective and point-to-point operations every distributed strategy is
// written against (data parallel, ZeRO, tensor/pipeline parallel). Backends implement it on a
// real communication engine: MPI (OpenMPI) between processes and hosts here, NCCL between
// GPUs later (issue #7). A strategy never names a backend.
//
// Tensors are contiguous CPU tensors of the same dtype and shape on every rank (what each
// operation requires of sizes is stated below). Reductions support f32, f64, bf16, f16
// (summed in fp32), i32 and i64. Every operation has an asynchronous form returning a Work
// handle (MPI non-blocking collectives), so communication overlaps computation; the tensors
// must stay alive and untouched until the handle is waited on.
//
// Every communicator counts, per operation kind, the calls made and the elements and bytes
// this rank handed to them (stats()): the ZeRO and tensor-parallel tests check their
// communication volume with these counters, and the trainer reports them in metrics. It also
// counts the bytes this rank sent by link class, to ranks on its own host and to other hosts
// (Note [Link classes] in comm/mpi_communicator.cc).
//
// A communicator knows which of its ranks share a host (hosts()); over several hosts, all-
// reduce, reduce-scatter and all-gather can run hierarchically (set_hierarchy(): inside each
// host first, so that fewer bytes cross hosts; Note [Hierarchical collectives]).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>
#include <string>

#include "core/tensor.h"

namespace trident::comm {

enum class ReduceOp { kSum, kMax, kMin };

enum class CommOp : int {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
  kAllToAll,
  kAllToAllV,
};
inline constexpr int kNumCommOps = 9;
const char* comm_op_name(CommOp op);

struct CommStats {
  struct Counter {
    int64_t calls = 0;
    int64_t elements = 0;  // elements of the input this rank handed to the operation
    int64_t bytes = 0;
  };
  std::array<Counter, kNumCommOps> ops{};
  const Counter& of(CommOp op) const { return ops[static_cast<int>(op)]; }
  Counter& of(CommOp op) { return ops[static_cast<int>(op)]; }
  // Bytes this rank sent to ranks on its own host and on other hosts (all operations).
  int64_t intra_host_bytes = 0;
  int64_t inter_host_bytes = 0;
  int64_t total_bytes() const;
  std::string str() const;  // one line per operation kind that was used
};

// An operation in flight. wait() blocks until it completes (and throws if it failed);
// destroying a handle that was not waited on waits for it.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Whether it has completed (then wait() returns at once).
  virtual bool test() = 0;
};

// Which ranks of a communicator share a host (MPI_Comm_split_type shared memory).
struct HostLayout {
  std::vector<int> host_of;         // per rank: its host's index, hosts numbered by their lowest rank
  std::vector<std::string> names;   // per host: its name (the processor name)
  int num_hosts() const { return static_cast<int>(names.size()); }
  std::vector<int> ranks_on(int host) const;
  // The same number of ranks on every host (hierarchical schedules need it); 0 when not.
  int ranks_per_host() const;
  // "h0 (ranks 0-1), h1 (ranks 2-3)".
  std::string str() const;
  // Every rank on one host (all names "localhost" when nothing else is known).
  static HostLayout single(int size, const std::string& name = "localhost");
};

// How all-reduce, reduce-scatter and all-gather run over several hosts (parallel.hierarchical).
enum class Hierarchy { kAuto, kOn, kOff };
// "auto", "on" or "off"; throws naming the value otherwise.
Hierarchy parse_hierarchy(const std::string& s);

// One send or receive of a batch (Communicator::send_recv_async).
struct PeerOp {
  enum class Kind { kSend, kRecv };
  Kind kind;
  Tensor tensor;
  int peer;
  int tag;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi", later "nccl".
  virtual std::string backend() const = 0;

  // t = op over ranks of t, in place.
  virtual std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) = 0;
  // input (size() * n elements) reduced over ranks; this rank gets elements
  // [rank * n, (rank + 1) * n) of the result in output (n elements). In place when output
  // is the first n elements of input (input is then overwritten).
  virtual std::unique_ptr<Work> reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  // output (size() * n elements) = the ranks' inputs (n elements each) in rank order. In
  // place when input is this rank's block of output.
  virtual std::unique_ptr<Work> all_gather_async(const Tensor& input, const Tensor& output) = 0;
  // t = root's t on every rank.
  virtual std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) = 0;
  virtual std::unique_ptr<Work> send_async(const Tensor& t, int dst, int tag) = 0;
  virtual std::unique_ptr<Work> recv_async(const Tensor& t, int src, int tag) = 0;
  // input and output of size() * n elements: block j of input goes to rank j, block i of
  // output comes from rank i.
  virtual std::unique_ptr<Work> all_to_all_async(const Tensor& input, const Tensor& output) = 0;
  // input holds, rank after rank, send_counts[j] elements for rank j; output receives, rank
  // after rank, recv_counts[i] elements from rank i (mixture-of-experts token dispatch). Counts
  // are elements, one per rank of the communicator, >= 0; they must sum to input's and
  // output's sizes, and rank i's send_counts[j] must equal rank j's recv_counts[i] (not
  // checked: exchange the counts first, e.g. with all_to_all). One dtype; input and output
  // must not overlap. Counted under CommOp::kAllToAllV (elements and bytes of the input).
  virtual std::unique_ptr<Work> all_to_all_v_async(const Tensor& input, const std::vector<int64_t>& send_counts,
                                                   const Tensor& output, const std::vector<int64_t>& recv_counts) = 0;
  virtual void barrier() = 0;
  // Posts the sends and receives together and returns one Work for them all (NCCL: one group,
  // as torch.distributed.batch_isend_irecv; here: each on its own). NCCL pairs two ranks'
  // messages by the order each side posts them, not by tag, and a send may wait for its
  // receive: two ranks that each send before receiving from the other deadlock unless each
  // posts the two in one batch.
  virtual std::unique_ptr<Work> send_recv_async(const std::vector<PeerOp>& ops);

  // Blocking forms.
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::kSum) { all_reduce_async(t, op)->wait(); }
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(input, output, op)->wait();
  }
  void all_gather(const Tensor& input, const Tensor& output) { all_gather_async(input, output)->wait(); }
  void broadcast(const Tensor& t, int root) { broadcast_async(t, root)->wait(); }
  void send(const Tensor& t, int dst, int tag = 0) { send_async(t, dst, tag)->wait(); }
  void recv(const Tensor& t, int src, int tag = 0) { recv_async(t, src, tag)->wait(); }
  void all_to_all(const Tensor& input, const Tensor& output) { all_to_all_async(input, output)->wait(); }
  void all_to_all_v(const Tensor& input, const std::vector<int64_t>& send_counts, const Tensor& output,
                    const std::vector<int64_t>& recv_counts) {
    all_to_all_v_async(input, send_counts, output, recv_counts)->wait();
  }

  // A sub-communicator of the ranks that pass the same color, ordered by key (then by rank
  // here), as MPI_Comm_split: the mesh's data-, tensor- and pipeline-parallel groups.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Which ranks share a host (every rank on one host unless the backend knows better).
  virtual const HostLayout& hosts() const;
  // Hierarchical collectives (Note [Hierarchical collectives]): on, off, or auto (on where
  // the layout allows it and the hosts' link is slow enough for it to pay; link bandwidths in
  // Gbit/s, 0 = measure them). Collective (every rank of the communicator calls it with the
  // same arguments). Backends without hierarchical schedules ignore it.
  virtual void set_hierarchy(Hierarchy mode, double intra_host_gbps = 0, double inter_host_gbps = 0);
  // Whether collectives run hierarchically now.
  virtual bool hierarchical() const { return false; }

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 protected:
  void count(CommOp op, const Tensor& t);
  // all_to_all_v's checks every backend shares: one dtype, one count per rank, none negative,
  // each side's counts summing to its tensor's size. `where` starts each message ("rank 3:
  // all_to_all_v"). The backend checks devices and contiguity itself.
  void check_all_to_all_v(const std::string& where, const Tensor& input, const std::vector<int64_t>& send_counts,
                          const Tensor& output, const std::vector<int64_t>& recv_counts) const;
  CommStats stats_;

 private:
  mutable HostLayout default_hosts_;
};

}  // namespace trident::comm
