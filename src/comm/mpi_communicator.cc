#include "comm/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <string>
#include <utility>
#include <vector>

#include "comm/flight_diagnosis.h"
#include "comm/flight_recorder.h"
#include "comm/mpi_chunked_all_reduce.h"
#include "comm/mpi_schedule_work.h"
#include "comm/mpi_support.h"
#include "comm/ring_schedule.h"
#include "core/half.h"

namespace trident::comm {
namespace {

using mpi_support::mpi_counts;
using mpi_support::mpi_error;
using mpi_support::MpiCounts;
using mpi_support::mpi_type;
using mpi_support::poll_until_done;
using mpi_support::progress_thread_from_env;
using mpi_support::timeout_from_env;


// MPI reductions of bf16/f16: each pairwise combination widens to float and rounds back.
template <class T, class Combine>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = T(Combine{}(static_cast<float>(a[i]), static_cast<float>(b[i])));
}
struct Add {
  float operator()(float a, float b) const { return a + b; }
};
struct Max {
  float operator()(float a, float b) const { return a > b ? a : b; }
};
struct Min {
  float operator()(float a, float b) const { return a < b ? a : b; }
};

struct HalfOps {
  MPI_Op for_bf16[3], for_f16[3];  // indexed by ReduceOp
  HalfOps() {
    MPI_Op_create(&half_reduce<bf16, Add>, 1, &for_bf16[0]);
    MPI_Op_create(&half_reduce<bf16, Max>, 1, &for_bf16[1]);
    MPI_Op_create(&half_reduce<bf16, Min>, 1, &for_bf16[2]);
    MPI_Op_create(&half_reduce<f16, Add>, 1, &for_f16[0]);
    MPI_Op_create(&half_reduce<f16, Max>, 1, &for_f16[1]);
    MPI_Op_create(&half_reduce<f16, Min>, 1, &for_f16[2]);
  }
};

// Note [Naming the rank at a timeout]
// A wait that times out says which rank stopped taking part, as the hang rule does (Note
// [Hang actions] in train/run_monitor.cc), from the flight records alone: every rank whose
// wait times out writes its own (out_dir/flight_rank<r>.json) and then reads the others',
// waiting a grace of at most 10 s (the timeout, when shorter) for them. A rank that wrote
// none in that time is in no communication wait: the one that stopped taking part. When every
// rank wrote one, the records say who is behind (comm/flight_diagnosis.h). The first rank to
// finish its grace ends the job, so every rank waits the grace before MPI_Abort.
//
}  // namespace

namespace mpi_support {

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU16:
    case DType::kBF16:
    case DType::kF16: return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MpiCounts mpi_counts(const std::vector<int64_t>& counts, const std::string& where, const char* side) {
  MpiCounts m;
  int64_t displ = 0;
  for (size_t j = 0; j < counts.size(); ++j) {
    TRI_CHECK(counts[j] <= INT_MAX && displ <= INT_MAX, where, ": the ", side, " block of rank ", j, " (", counts[j],
              " elements at offset ", displ, ") is past MPI's int count (", INT_MAX, "); split the exchange");
    m.counts.push_back(static_cast<int>(counts[j]));
    m.displs.push_back(static_cast<int>(displ));
    displ += counts[j];
  }
  return m;
}

// Calls test() until it says done; past the timeout, names `what` (and what `stalled_on`
// says it waits for), prints the flight record and ends the job (Note [Distributed failures] in
// comm/mpi_runtime.cc).
void poll_until_done(const std::function<bool()>& test, const std::string& what,
                     const std::function<std::string()>& stalled_on) {
  mpi_support::note_op("waiting for", what);
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    ChunkedAllReduces::advance_all();  // Note [Chunked all-reduce on one host]: whatever this waits for
    if (test()) break;
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > mpi_support::timeout_seconds()) {
      // The flight record says which collective (Note [Reading a flight record]).
      const FlightRecorder& fr = flight_recorder();
      const double wait_began = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                                    .count() - waited;
      const bool written = fr.write_dump();
      const std::string on = stalled_on();
      // Note [Naming the rank at a timeout]
      const std::string stalled =
          written ? name_stalled_ranks(fr, mpi_support::world_size(), std::min(10.0, mpi_support::timeout_seconds()), wait_began - mpi_support::timeout_seconds()) : "";
      std::fprintf(stderr,
                   "trident (rank %d): %s did not complete within %.0f s%s%s%s%s; ending the job. Its last "
                   "communication (flight record%s%s):\n%s",
                   mpi_support::world_rank(), what.c_str(), mpi_support::timeout_seconds(),
                   on.empty() ? (stalled.empty() ? " (a rank stopped taking part?)" : "") : ": ", on.c_str(),
                   stalled.empty() ? "" : "; ", stalled.c_str(), written ? ", also in " : "",
                   written ? fr.dump_path().c_str() : "", fr.text(16).c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  mpi_support::note_op("computing, last communication:", what);
}

}  // namespace mpi_support

namespace {

class MpiWork final : public Work {
 public:
  // `keep`: what MPI reads until the operation completes (all_to_all_v's counts).
  MpiWork(MPI_Request request, std::string what, int comm, int64_t seq, std::shared_ptr<const void> keep)
      : request_(request), what_(std::move(what)), comm_(comm), seq_(seq), keep_(std::move(keep)) {}
  ~MpiWork() override {
    if (request_ != MPI_REQUEST_NULL) {
      MPI_Wait(&request_, MPI_STATUS_IGNORE);  // never leave one in flight
      flight_recorder().completed(comm_, seq_);
    }
  }
  // Polls (MPI_Test) rather than blocking, to enforce the timeout.
  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    poll_until_done([this] { return poll(); }, what_, [] { return std::string(); });
    flight_recorder().completed(comm_, seq_);
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    ChunkedAllReduces::advance_all();
    const bool done = poll();
    if (done) flight_recorder().completed(comm_, seq_);
    return done;
  }

 private:
  bool poll() {
    int done = 0;
    const int rc = MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
    TRI_CHECK_KIND(ErrorKind::kDistributed, rc == MPI_SUCCESS, what_, " failed: ", mpi_error(rc));
    return done != 0;
  }

  MPI_Request request_;
  std::string what_;
  int comm_;
  int64_t seq_;
  std::shared_ptr<const void> keep_;  // destroyed after the destructor's MPI_Wait
};

// Note [Hierarchical collectives]
// Over several hosts, all-reduce, reduce-scatter, all-gather and broadcast run as trident's own
// ring schedules (comm/ring_schedule.h) of MPI_Isend/Irecv, not as MPI's collectives: then
// every byte this rank sends has a known peer, so the link-class counters are exact (Note
// [Link classes]) and a stalled step names the peer and host it waits for. Flat, one ring
// runs through every rank in rank order; each host's block of ranks is then crossed by 2 ring
// edges (one each way), each carrying 2(p-1)/p of the data for all-reduce. Hierarchical
// (BytePS's, NCCL's two-level rings), a ring inside each host reduce-scatters, the L ranks of
// a host each all-reduce their 1/L chunk with their peers on the other H hosts, and a ring
// inside the host all-gathers: what crosses hosts falls from 2(HL-1)/L to 2(H-1) times the
// data in total (3 -> 2 for 2 hosts x 2 ranks, 4 -> 2 as L grows). It costs the intra-host
// phases, so `auto` takes it when the host's link to the others is the bottleneck: with
// B_intra the bandwidth between two ranks of a host and B_inter a host's link, the ring's
// time 2(p-1)/p N / B_inter against 2(L-1)/L N / B_intra + 2(H-1)/H N / B_inter says
// hierarchical wins iff B_intra > H B_inter. The bandwidths come from parallel.intra_host_gbps
// and inter_host_gbps, or are measured once (a 4 MiB exchange between neighbours, all ranks at
// once, so a host's link is shared by its L ranks as in the inter-host phase). On one host
// MPI's own collectives run (shared memory), as before. Every schedule runs on a duplicate of
// the communicator with the operation's number as tag, so concurrent collectives and the
// caller's send/recv never match each other's messages.
//
// Note [Link classes]
// intra_host_bytes and inter_host_bytes count what this rank sends, by where the receiver is:
// exactly, step by step, for the ring schedules, send() and all_to_all's and all_to_all_v's
// blocks (each peer's own count). MPI's own collectives on one host do not say what they
// send; they are counted as a ring would send (2(p-1)/p of the data for all-reduce, (p-1)/p
// for reduce-scatter and all-gather, the whole tensor for a broadcast from every rank but the
// chain's last), all inside the host.
// Where each world rank is (Note [Hierarchical collectives]): a host key (the lowest world
// rank on the host: MPI_Comm_split_type's shared-memory group) and the host's name. Computed
// once, collectively, by the first communicator; pretend_ranks_per_host() replaces the keys
// for tests on one machine.
struct WorldHosts {
  std::vector<int> key;
  std::vector<std::string> name;
};
int g_pretend_per_host = 0;

const WorldHosts& world_hosts() {
  static WorldHosts w = [] {
    WorldHosts h;
    int size = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    int lowest = rank;
    MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, local);
    MPI_Comm_free(&local);
    h.key.resize(static_cast<size_t>(size));
    MPI_Allgather(&lowest, 1, MPI_INT, h.key.data(), 1, MPI_INT, MPI_COMM_WORLD);
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    std::vector<char> names(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    for (int r = 0; r < size; ++r) h.name.emplace_back(&names[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    return h;
  }();
  return w;
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm), chunked_(ChunkedAllReduces::for_comm(comm)) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    learn_hosts();
  }
  ~MpiCommunicator() override {
    try {
      if (std::uncaught_exceptions() == 0) chunked_->flush();  // unwinding from a failure: say it, do not wait
    } catch (...) {
    }
    if (ring_comm_ != MPI_COMM_NULL) MPI_Comm_free(&ring_comm_);
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }

  const HostLayout& hosts() const override { return layout_; }
  bool hierarchical() const override { return hierarchical_; }

  void set_hierarchy(Hierarchy mode, double intra_gbps, double inter_gbps) override {
    mode_ = mode;
    intra_gbps_ = intra_gbps;
    inter_gbps_ = inter_gbps;
    hierarchical_ = false;
    const int per_host = layout_.ranks_per_host();
    if (layout_.num_hosts() < 2) return;
    TRI_CHECK(mode != Hierarchy::kOn || per_host > 0, where("parallel.hierarchical = on"),
              ": hierarchical collectives need the same number of ranks on every host; this communicator has ",
              layout_.str());
    char why[160];
    if (mode != Hierarchy::kAuto) {
      hierarchical_ = mode == Hierarchy::kOn;
      std::snprintf(why, sizeof why, "parallel.hierarchical = %s", hierarchical_ ? "on" : "off");
    } else {
      if (per_host < 2) return;  // one rank per host (or uneven hosts): the flat ring
      // Note [Hierarchical collectives]: measure what was not configured.
      const bool measured = intra_gbps <= 0 || inter_gbps <= 0;
      if (measured) {
        const auto [intra, inter_per_rank] = measure_gbps();
        if (intra_gbps <= 0) intra_gbps = intra;
        if (inter_gbps <= 0) inter_gbps = inter_per_rank * per_host;  // the L ranks shared the link
      }
      hierarchical_ = intra_gbps > layout_.num_hosts() * inter_gbps;
      std::snprintf(why, sizeof why,
                    "%.2f Gbit/s between ranks of a host, %.2f Gbit/s across hosts (%s; auto: on when inside > %d x "
                    "across)",
                    intra_gbps, inter_gbps, measured ? "measured" : "configured", layout_.num_hosts());
    }
    if (rank_ == 0 && per_host > 1)
      std::fprintf(stderr, "trident: hierarchical collectives %s for the communicator of %d ranks on %s: %s\n",
                   hierarchical_ ? "on" : "off", size_, layout_.str().c_str(), why);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    const int n = count_of(t, "all_reduce");
    count(CommOp::kAllReduce, t);
    if (multi_host()) {
      mpi_op(t, op, "all_reduce");  // checks the dtype
      return run_schedule("all_reduce", all_reduce_schedule(layout_, rank_, n, hierarchical_),
                          static_cast<char*>(t.raw_data()), t.dtype(), op, nullptr, {}, bytes_of(t));
    }
    count_native(2 * bytes_of(t) * (size_ - 1) / size_);
    if (bytes_of(t) > 2 * ChunkedAllReduces::kChunkBytes) {  // Note [Chunked all-reduce on one host]
      const MPI_Op mop = mpi_op(t, op, "all_reduce");
      auto [what, seq] = begin_op("all_reduce", bytes_of(t));
      return chunked_->start(static_cast<char*>(t.raw_data()), t.numel(), mpi_type(t.dtype()),
                            static_cast<int64_t>(element_size(t.dtype())), mop, what,
                            [id = id_, seq] { flight_recorder().completed(id, seq); });
    }
    chunked_->flush();
    MPI_Request r;
    const int rc = MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), n, mpi_type(t.dtype()), mpi_op(t, op, "all_reduce"),
                                  comm_, &r);
    return started(rc, r, "all_reduce", bytes_of(t));
  }

  std::unique_ptr<Work> reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) override {
    check_pair(input, output, "reduce_scatter", /*input_is_whole=*/true);
    count(CommOp::kReduceScatter, input);
    const int n = count_of(output, "reduce_scatter");
    if (multi_host()) {
      mpi_op(input, op, "reduce_scatter");
      // A private working buffer with the blocks where the schedule wants them.
      auto work = std::make_shared<std::vector<char>>(static_cast<size_t>(bytes_of(input)));
      const size_t block = static_cast<size_t>(n) * element_size(input.dtype());
      for (int r = 0; r < size_; ++r)
        std::memcpy(work->data() + block_offset(layout_, r, n, hierarchical_) * element_size(input.dtype()),
                    static_cast<const char*>(input.raw_data()) + static_cast<size_t>(r) * block, block);
      char* out = static_cast<char*>(output.raw_data());
      const size_t mine = static_cast<size_t>(block_offset(layout_, rank_, n, hierarchical_)) * element_size(input.dtype());
      return run_schedule("reduce_scatter", reduce_scatter_schedule(layout_, rank_, n, hierarchical_), work->data(),
                          input.dtype(), op, [work, out, mine, block] { std::memcpy(out, work->data() + mine, block); },
                          work, bytes_of(input));
    }
    count_native(bytes_of(input) * (size_ - 1) / size_);
    chunked_->flush();
    MPI_Request r;
    // In place when output is the start of input (the result lands there, MPI_IN_PLACE).
    const void* send = output.raw_data() == input.raw_data() ? MPI_IN_PLACE : input.raw_data();
    const int rc = MPI_Ireduce_scatter_block(send, output.raw_data(), n, mpi_type(input.dtype()),
                                             mpi_op(input, op, "reduce_scatter"), comm_, &r);
    return started(rc, r, "reduce_scatter", bytes_of(input));
  }

  std::unique_ptr<Work> all_gather_async(const Tensor& input, const Tensor& output) override {
    check_pair(input, output, "all_gather", /*input_is_whole=*/false);
    count(CommOp::kAllGather, output);
    const int n = count_of(input, "all_gather");
    if (multi_host()) {
      auto work = std::make_shared<std::vector<char>>(static_cast<size_t>(bytes_of(output)));
      const size_t es = element_size(input.dtype()), block = static_cast<size_t>(n) * es;
      std::memcpy(work->data() + block_offset(layout_, rank_, n, hierarchical_) * es, input.raw_data(), block);
      std::vector<size_t> from(static_cast<size_t>(size_));
      for (int r = 0; r < size_; ++r) from[static_cast<size_t>(r)] = block_offset(layout_, r, n, hierarchical_) * es;
      char* out = static_cast<char*>(output.raw_data());
      return run_schedule("all_gather", all_gather_schedule(layout_, rank_, n, hierarchical_), work->data(),
                          input.dtype(), ReduceOp::kSum,
                          [work, out, from, block] {
                            for (size_t r = 0; r < from.size(); ++r)
                              std::memcpy(out + r * block, work->data() + from[r], block);
                          },
                          work, bytes_of(output));
    }
    count_native(bytes_of(output) * (size_ - 1) / size_);
    chunked_->flush();
    MPI_Request r;
    // In place when input is this rank's block of output (MPI_IN_PLACE).
    const size_t block_bytes = static_cast<size_t>(n) * element_size(input.dtype());
    const void* send = static_cast<const char*>(input.raw_data()) ==
                               static_cast<const char*>(output.raw_data()) + static_cast<size_t>(rank_) * block_bytes
                           ? MPI_IN_PLACE
                           : input.raw_data();
    const int rc = MPI_Iallgather(send, n, mpi_type(input.dtype()), output.raw_data(), n,
                                  mpi_type(output.dtype()), comm_, &r);
    return started(rc, r, "all_gather", bytes_of(output));
  }

  std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) override {
    check_rank(root, "broadcast root");
    const int n = count_of(t, "broadcast");
    count(CommOp::kBroadcast, t);
    if (multi_host()) {
      const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / static_cast<int64_t>(element_size(t.dtype())));
      return run_schedule("broadcast", broadcast_schedule(layout_, rank_, root, n, chunk),
                          static_cast<char*>(t.raw_data()), t.dtype(), ReduceOp::kSum, nullptr, {}, bytes_of(t));
    }
    if ((rank_ - root + size_) % size_ != size_ - 1) count_native(bytes_of(t));
    chunked_->flush();
    MPI_Request r;
    const int rc = MPI_Ibcast(t.raw_data(), n, mpi_type(t.dtype()), root, comm_, &r);
    return started(rc, r, "broadcast", bytes_of(t));
  }

  std::unique_ptr<Work> send_async(const Tensor& t, int dst, int tag) override {
    check_rank(dst, "send destination");
    const int n = count_of(t, "send");
    count(CommOp::kSend, t);
    count_sent(dst, bytes_of(t));
    MPI_Request r;
    const int rc = MPI_Isend(t.raw_data(), n, mpi_type(t.dtype()), dst, tag, comm_, &r);
    return started(rc, r, "send to rank " + std::to_string(dst), bytes_of(t));
  }

  std::unique_ptr<Work> recv_async(const Tensor& t, int src, int tag) override {
    check_rank(src, "recv source");
    const int n = count_of(t, "recv");
    count(CommOp::kRecv, t);
    MPI_Request r;
    const int rc = MPI_Irecv(t.raw_data(), n, mpi_type(t.dtype()), src, tag, comm_, &r);
    return started(rc, r, "recv from rank " + std::to_string(src), bytes_of(t));
  }

  std::unique_ptr<Work> all_to_all_async(const Tensor& input, const Tensor& output) override {
    check_tensor(input, "all_to_all");
    check_tensor(output, "all_to_all");
    TRI_CHECK(input.numel() == output.numel() && input.dtype() == output.dtype() && input.numel() % size_ == 0,
              where("all_to_all"), ": input (", input.numel(), " ", input.dtype(), ") and output (", output.numel(),
              " ", output.dtype(), ") must have the same dtype and a size divisible by the ", size_, " ranks");
    count(CommOp::kAllToAll, input);
    const int n = count_of(input, "all_to_all") / size_;
    for (int r = 0; r < size_; ++r)
      if (r != rank_) count_sent(r, bytes_of(input) / size_);
    chunked_->flush();
    MPI_Request r;
    const int rc = MPI_Ialltoall(input.raw_data(), n, mpi_type(input.dtype()), output.raw_data(), n,
                                 mpi_type(output.dtype()), comm_, &r);
    return started(rc, r, "all_to_all", bytes_of(input));
  }

  std::unique_ptr<Work> all_to_all_v_async(const Tensor& input, const std::vector<int64_t>& send_counts,
                                           const Tensor& output, const std::vector<int64_t>& recv_counts) override {
    const std::string op = where("all_to_all_v");
    check_tensor(input, "all_to_all_v");
    check_tensor(output, "all_to_all_v");
    check_all_to_all_v(op, input, send_counts, output, recv_counts);
    // MPI reads the counts until the operation completes: the Work keeps them.
    auto counts = std::make_shared<const std::pair<MpiCounts, MpiCounts>>(mpi_counts(send_counts, op, "send"),
                                                                          mpi_counts(recv_counts, op, "recv"));
    count(CommOp::kAllToAllV, input);
    const int64_t es = static_cast<int64_t>(element_size(input.dtype()));
    for (int r = 0; r < size_; ++r)
      if (r != rank_) count_sent(r, send_counts[static_cast<size_t>(r)] * es);
    const auto& [send, recv] = *counts;
    const MPI_Datatype type = mpi_type(input.dtype());
    chunked_->flush();
    MPI_Request r;
    const int rc = MPI_Ialltoallv(input.raw_data(), send.counts.data(), send.displs.data(), type, output.raw_data(),
                                  recv.counts.data(), recv.displs.data(), type, comm_, &r);
    return started(rc, r, "all_to_all_v", bytes_of(input), counts);
  }

  void barrier() override {
    ++stats_.of(CommOp::kBarrier).calls;
    chunked_->flush();
    MPI_Request r;
    const int rc = MPI_Ibarrier(comm_, &r);
    started(rc, r, "barrier", 0)->wait();  // with the timeout
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    TRI_CHECK(color >= 0, where("split"), ": color must be >= 0, got ", color);
    MPI_Comm sub;
    chunked_->flush();
    const int rc = MPI_Comm_split(comm_, color, key, &sub);
    TRI_CHECK_KIND(ErrorKind::kDistributed, rc == MPI_SUCCESS, where("split"), " failed: ", mpi_error(rc));
    auto child = std::make_unique<MpiCommunicator>(sub);
    child->set_hierarchy(mode_, intra_gbps_, inter_gbps_);  // collective over the child's ranks
    return child;
  }

 private:
  std::string where(const char* op) const {
    return "rank " + std::to_string(world_rank_) + ": " + op;
  }

  void check_tensor(const Tensor& t, const char* op) const {
    TRI_CHECK(t.device().is_cpu(), where(op), ": the MPI backend takes CPU tensors, got one on ", t.device());
    TRI_CHECK(t.is_contiguous(), where(op), ": tensor ", t.shape(), " must be contiguous");
  }

  int count_of(const Tensor& t, const char* op) const {
    check_tensor(t, op);
    TRI_CHECK(t.numel() <= INT_MAX, where(op), ": ", t.numel(), " elements exceed MPI's int count (", INT_MAX,
              "); split the tensor");
    return static_cast<int>(t.numel());
  }

  void check_rank(int r, const char* what) const {
    TRI_CHECK(r >= 0 && r < size_, where(what), " ", r, " is not a rank of this communicator (size ", size_, ")");
  }

  // reduce_scatter: input is size() x output; all_gather: output is size() x input.
  void check_pair(const Tensor& input, const Tensor& output, const char* op, bool input_is_whole) const {
    check_tensor(input, op);
    check_tensor(output, op);
    const Tensor& whole = input_is_whole ? input : output;
    const Tensor& part = input_is_whole ? output : input;
    TRI_CHECK(input.dtype() == output.dtype(), where(op), ": input ", input.dtype(), " and output ", output.dtype(),
              " differ in dtype");
    TRI_CHECK(whole.numel() == part.numel() * size_, where(op), ": ", input_is_whole ? "input" : "output", " has ",
              whole.numel(), " elements; expected ", size_, " ranks x ", part.numel());
  }

  MPI_Op mpi_op(const Tensor& t, ReduceOp op, const char* what) const {
    const int i = static_cast<int>(op);
    if (t.dtype() == DType::kBF16 || t.dtype() == DType::kF16) {
      static const HalfOps ops;  // created after MPI_Init, on first use
      return t.dtype() == DType::kBF16 ? ops.for_bf16[i] : ops.for_f16[i];
    }
    TRI_CHECK(t.dtype() != DType::kU16, where(what), ": reductions of u16 are not supported");
    return op == ReduceOp::kSum ? MPI_SUM : op == ReduceOp::kMax ? MPI_MAX : MPI_MIN;
  }

  std::unique_ptr<Work> started(int rc, MPI_Request r, const std::string& op, int64_t bytes,
                                std::shared_ptr<const void> keep = nullptr) {
    TRI_CHECK_KIND(ErrorKind::kDistributed, rc == MPI_SUCCESS, where(op.c_str()), " failed to start: ", mpi_error(rc));
    auto [what, seq] = begin_op(op, bytes);
    return std::make_unique<MpiWork>(r, std::move(what), id_, seq, std::move(keep));
  }
  // An operation's name in messages, noted as this rank's current one and recorded as started
  // (its flight record's sequence number). No "rank N: " in it: every line that prints it
  // starts with "trident (rank N)".
  std::pair<std::string, int64_t> begin_op(const std::string& op, int64_t bytes) {
    std::string what = op + " (communicator of " + std::to_string(size_) + " ranks)";
    mpi_support::note_op("in", what);
    return {std::move(what), flight_recorder().started(id_, size_, op, bytes)};
  }
  static int64_t bytes_of(const Tensor& t) { return t.numel() * static_cast<int64_t>(element_size(t.dtype())); }

  bool multi_host() const { return layout_.num_hosts() > 1; }

  // The host layout from the world's (Note [Hierarchical collectives]): this communicator's
  // ranks' world ranks, their hosts numbered by lowest rank here.
  void learn_hosts() {
    const WorldHosts& w = world_hosts();
    std::vector<int> world_of(static_cast<size_t>(size_));
    MPI_Allgather(&world_rank_, 1, MPI_INT, world_of.data(), 1, MPI_INT, comm_);
    std::vector<int> keys;  // per host here: its world key
    layout_.host_of.resize(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      const int wr = world_of[static_cast<size_t>(r)];
      const int key = g_pretend_per_host > 0 ? wr / g_pretend_per_host : w.key[static_cast<size_t>(wr)];
      auto it = std::find(keys.begin(), keys.end(), key);
      if (it == keys.end()) {
        keys.push_back(key);
        layout_.names.push_back(g_pretend_per_host > 0 ? w.name[static_cast<size_t>(wr)] + "#" + std::to_string(key)
                                                       : w.name[static_cast<size_t>(wr)]);
        it = keys.end() - 1;
      }
      layout_.host_of[static_cast<size_t>(r)] = static_cast<int>(it - keys.begin());
    }
    if (multi_host()) {
      MPI_Comm_dup(comm_, &ring_comm_);
      MPI_Comm_set_errhandler(ring_comm_, MPI_ERRORS_RETURN);
    }
  }

  void count_sent(int peer, int64_t bytes) {
    const bool same = layout_.host_of[static_cast<size_t>(peer)] == layout_.host_of[static_cast<size_t>(rank_)];
    (same ? stats_.intra_host_bytes : stats_.inter_host_bytes) += bytes;
  }
  void count_native(int64_t bytes) { stats_.intra_host_bytes += bytes; }  // Note [Link classes]

  // Starts a ring schedule on `buffer` (kept alive by `keep` when the Work owns it).
  std::unique_ptr<Work> run_schedule(const char* op, RingSchedule schedule, char* buffer, DType dtype, ReduceOp rop,
                                     std::function<void()> finish, std::shared_ptr<std::vector<char>> keep,
                                     int64_t bytes) {
    for (const RingStep& st : schedule.steps)
      if (st.send_to >= 0) count_sent(st.send_to, st.send.count * static_cast<int64_t>(element_size(dtype)));
    const std::string what = where(op) + " (" + (hierarchical_ ? "hierarchical" : "ring") + ", communicator of " +
                             std::to_string(size_) + " ranks)";
    mpi_support::note_op("in", what);
    const int64_t seq = flight_recorder().started(id_, size_, op, bytes);
    const int tag = static_cast<int>(++schedules_ % 32000);
    if (keep) {  // the buffer lives as long as the finish step needs it
      auto inner = std::move(finish);
      finish = [inner, keep] { if (inner) inner(); };
    }
    return std::make_unique<ScheduleWork>(ring_comm_, tag, std::move(schedule), buffer, dtype, rop, std::move(finish),
                                          what, layout_, rank_, id_, seq, inflight_);
  }

  // Bandwidths (Gbit/s) between neighbours on a host and across hosts, every rank at once;
  // the slowest rank's (every rank gets the same numbers).
  std::pair<double, double> measure_gbps() {
    constexpr size_t kBytes = 4 << 20;
    std::vector<char> out(kBytes, 1), in(kBytes);
    const std::vector<int> mine = layout_.ranks_on(layout_.host_of[static_cast<size_t>(rank_)]);
    const int local = static_cast<int>(std::find(mine.begin(), mine.end(), rank_) - mine.begin());
    const int host = layout_.host_of[static_cast<size_t>(rank_)], hosts = layout_.num_hosts();
    const int L = static_cast<int>(mine.size());
    double seconds[2];
    for (int kind = 0; kind < 2; ++kind) {
      const int next = kind == 0 ? mine[static_cast<size_t>((local + 1) % L)]
                                 : layout_.ranks_on((host + 1) % hosts)[static_cast<size_t>(local)];
      const int prev = kind == 0 ? mine[static_cast<size_t>((local + L - 1) % L)]
                                 : layout_.ranks_on((host + hosts - 1) % hosts)[static_cast<size_t>(local)];
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        barrier();
        const auto t0 = std::chrono::steady_clock::now();
        MPI_Request rq[2];
        MPI_Irecv(in.data(), static_cast<int>(kBytes), MPI_BYTE, prev, 32001, ring_comm_, &rq[0]);
        MPI_Isend(out.data(), static_cast<int>(kBytes), MPI_BYTE, next, 32001, ring_comm_, &rq[1]);
        poll_until_done(
            [&] {
              int done = 0;
              MPI_Testall(2, rq, &done, MPI_STATUSES_IGNORE);
              return done != 0;
            },
            where("measuring link bandwidth"), [] { return std::string(); });
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      seconds[kind] = best;
    }
    MPI_Allreduce(MPI_IN_PLACE, seconds, 2, MPI_DOUBLE, MPI_MAX, comm_);
    return {kBytes * 8 / seconds[0] / 1e9, kBytes * 8 / seconds[1] / 1e9};
  }

  MPI_Comm comm_;
  // Large all-reduces on one host, and what every other collective waits for; shared by every
  // communicator object on the same handle.
  std::shared_ptr<ChunkedAllReduces> chunked_;
  MPI_Comm ring_comm_ = MPI_COMM_NULL;  // the ring schedules' messages (Note [Hierarchical collectives])
  HostLayout layout_;
  Hierarchy mode_ = Hierarchy::kOff;
  double intra_gbps_ = 0, inter_gbps_ = 0;
  bool hierarchical_ = false;
  int64_t schedules_ = 0;
  std::vector<ScheduleWork*> inflight_;  // its schedules not yet finished (ScheduleWork)
  int rank_ = 0, size_ = 1, world_rank_ = 0;
  int id_ = flight_recorder().new_communicator();  // Note [Reading a flight record]
};

}  // namespace

void MpiRuntime::pretend_ranks_per_host(int ranks) {
  TRI_CHECK(ranks >= 0, "pretend_ranks_per_host: ranks must be >= 0, got ", ranks);
  g_pretend_per_host = ranks;
}

std::unique_ptr<Communicator> MpiRuntime::world() {
  init();
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

}  // namespace trident::comm
