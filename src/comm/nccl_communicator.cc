#include "comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <optional>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm/flight_recorder.h"
#include "comm/mpi_communicator.h"
#include "core/factory.h"

namespace trident::comm {
namespace {

#define TRI_NCCL_CHECK(call, rank, what)                                                                 \
  do {                                                                                                   \
    const ncclResult_t tri_nccl_rc_ = (call);                                                            \
    TRI_CHECK(tri_nccl_rc_ == ncclSuccess, "rank ", (rank), ": NCCL ", (what), " failed: ",               \
              ncclGetErrorString(tri_nccl_rc_), " (", ncclGetLastError(nullptr), ")");                    \
  } while (0)

#define TRI_CUDA_COMM_CHECK(call, rank, what)                                                            \
  do {                                                                                                   \
    const cudaError_t tri_cuda_rc_ = (call);                                                             \
    TRI_CHECK(tri_cuda_rc_ == cudaSuccess, "rank ", (rank), ": CUDA error in NCCL ", (what), ": ",        \
              cudaGetErrorString(tri_cuda_rc_));                                                         \
  } while (0)

ncclDataType_t nccl_type(DType d, int rank, const char* what) {
  switch (d) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    default: break;
  }
  TRI_CHECK_TYPE(false, "rank ", rank, ": NCCL ", what, ": dtype ", d, " is not supported (f32, f64, bf16, f16, i32, i64)");
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// An operation queued on the communicator's stream; `done` is recorded after it.
class NcclWork final : public Work {
 public:
  NcclWork(ncclComm_t comm, cudaEvent_t done, int rank, std::string what, int id, int64_t seq)
      : comm_(comm), done_(done), rank_(rank), what_(std::move(what)), id_(id), seq_(seq) {}
  ~NcclWork() override {
    if (!waited_) {
      try {
        wait();
      } catch (...) {  // destructors must not throw; the error was reported by wait()
      }
    }
    cudaEventDestroy(done_);
  }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    // Poll rather than block, so a peer that died or stopped is noticed (Note [Distributed
    // failures] in mpi_communicator.cc: the same timeout as MPI's).
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) break;
      TRI_CHECK(q == cudaErrorNotReady, "rank ", rank_, ": NCCL ", what_, " failed on the GPU: ", cudaGetErrorString(q));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess) {
        ncclCommAbort(comm_);
        TRI_CHECK(false, "rank ", rank_, ": NCCL ", what_, " failed: ", ncclGetErrorString(async),
                  " (a peer died or its connection broke)");
      }
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > MpiRuntime::timeout()) {
        ncclCommAbort(comm_);
        // The flight record says which collective (Note [Reading a flight record]).
        const FlightRecorder& fr = flight_recorder();
        const bool written = fr.write_dump();
        TRI_CHECK(false, "rank ", rank_, ": NCCL ", what_, " did not complete in ", MpiRuntime::timeout(),
                  " s (a peer is not taking part); aborted the communicator. Its last communication (flight record",
                  written ? ", also in " + fr.dump_path() : std::string(), "):\n", fr.text(16));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    flight_recorder().completed(id_, seq_);
    // Later kernels on the compute stream read the result only after the operation.
    TRI_CUDA_COMM_CHECK(cudaStreamWaitEvent(nullptr, done_, 0), rank_, what_.c_str());
  }
  bool test() override {
    if (waited_) return true;
    if (cudaEventQuery(done_) != cudaSuccess) return false;
    flight_recorder().completed(id_, seq_);  // again at wait(): the recorder keeps the first
    return true;
  }

 private:
  ncclComm_t comm_;
  cudaEvent_t done_;
  int rank_;
  std::string what_;
  int id_;       // the communicator's number in the flight recorder
  int64_t seq_;  // this operation's number there
  bool waited_ = false;
};

class NcclCommunicatorImpl final : public Communicator {
 public:
  NcclCommunicatorImpl(ncclComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {
    TRI_CUDA_COMM_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), rank_, "stream creation");
  }
  ~NcclCommunicatorImpl() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    check(t, "all_reduce");
    count(CommOp::kAllReduce, t);
    return launch("all_reduce", bytes_of(t), [&] {
      return ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype(), rank_, "all_reduce"),
                           nccl_op(op), comm_, stream_);
    });
  }

  std::unique_ptr<Work> reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) override {
    check_pair(input, output, "reduce_scatter", /*input_is_whole=*/true);
    count(CommOp::kReduceScatter, input);
    // The interface's in-place form puts the result in the input's first block (MPI's
    // convention); NCCL's in-place form puts it in block `rank`, and an output overlapping the
    // input anywhere else is not allowed. So: NCCL's form, then this rank's block moved to the
    // front on the same stream.
    const bool in_place = output.raw_data() == input.raw_data();
    const size_t bytes = static_cast<size_t>(output.numel()) * element_size(output.dtype());
    void* recv = in_place ? static_cast<char*>(input.raw_data()) + static_cast<size_t>(rank_) * bytes : output.raw_data();
    return launch("reduce_scatter", bytes_of(input), [&] {
      const ncclResult_t rc = ncclReduceScatter(input.raw_data(), recv, static_cast<size_t>(output.numel()),
                                                nccl_type(input.dtype(), rank_, "reduce_scatter"), nccl_op(op), comm_,
                                                stream_);
      if (rc != ncclSuccess || recv == output.raw_data()) return rc;
      return cudaMemcpyAsync(output.raw_data(), recv, bytes, cudaMemcpyDeviceToDevice, stream_) == cudaSuccess
                 ? ncclSuccess
                 : ncclUnhandledCudaError;
    });
  }

  std::unique_ptr<Work> all_gather_async(const Tensor& input, const Tensor& output) override {
    check_pair(input, output, "all_gather", /*input_is_whole=*/false);
    count(CommOp::kAllGather, output);
    return launch("all_gather", bytes_of(input), [&] {
      return ncclAllGather(input.raw_data(), output.raw_data(), static_cast<size_t>(input.numel()),
                           nccl_type(input.dtype(), rank_, "all_gather"), comm_, stream_);
    });
  }

  std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) override {
    check(t, "broadcast");
    check_rank(root, "broadcast root");
    count(CommOp::kBroadcast, t);
    return launch("broadcast", bytes_of(t), [&] {
      return ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                           nccl_type(t.dtype(), rank_, "broadcast"), root, comm_, stream_);
    });
  }

  std::unique_ptr<Work> send_async(const Tensor& t, int dst, int tag) override {
    check(t, "send");
    check_rank(dst, "send destination");
    TRI_CHECK(tag >= 0, "rank ", rank_, ": NCCL send: tag must be >= 0, got ", tag);
    count(CommOp::kSend, t);
    return launch("send", bytes_of(t), [&] {
      return ncclSend(t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype(), rank_, "send"), dst, comm_, stream_);
    });
  }

  std::unique_ptr<Work> recv_async(const Tensor& t, int src, int tag) override {
    check(t, "recv");
    check_rank(src, "recv source");
    TRI_CHECK(tag >= 0, "rank ", rank_, ": NCCL recv: tag must be >= 0, got ", tag);
    count(CommOp::kRecv, t);
    return launch("recv", bytes_of(t), [&] {
      return ncclRecv(t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype(), rank_, "recv"), src, comm_, stream_);
    });
  }

  std::unique_ptr<Work> send_recv_async(const std::vector<PeerOp>& ops) override {
    std::vector<ncclDataType_t> types;  // checked before the group opens: nothing throws inside it
    int64_t sent = 0;
    for (const PeerOp& op : ops) {
      const bool send = op.kind == PeerOp::Kind::kSend;
      check(op.tensor, send ? "send" : "recv");
      check_rank(op.peer, send ? "send destination" : "recv source");
      types.push_back(nccl_type(op.tensor.dtype(), rank_, send ? "send" : "recv"));
      count(send ? CommOp::kSend : CommOp::kRecv, op.tensor);
      if (send) sent += bytes_of(op.tensor);
    }
    return launch("send_recv", sent, [&] {
      ncclResult_t rc = ncclGroupStart();
      for (size_t i = 0; i < ops.size() && rc == ncclSuccess; ++i) {
        const PeerOp& op = ops[i];
        const size_t n = static_cast<size_t>(op.tensor.numel());
        rc = op.kind == PeerOp::Kind::kSend ? ncclSend(op.tensor.raw_data(), n, types[i], op.peer, comm_, stream_)
                                            : ncclRecv(op.tensor.raw_data(), n, types[i], op.peer, comm_, stream_);
      }
      const ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    });
  }

  std::unique_ptr<Work> all_to_all_async(const Tensor& input, const Tensor& output) override {
    check(input, "all_to_all");
    check(output, "all_to_all");
    TRI_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0 && input.dtype() == output.dtype(),
              "rank ", rank_, ": NCCL all_to_all: input ", input.str(), " and output ", output.str(),
              " must be the same size, a multiple of the ", size_, " ranks, and of one dtype");
    count(CommOp::kAllToAll, input);
    const std::vector<int64_t> blocks(static_cast<size_t>(size_), input.numel() / size_);
    return exchange("all_to_all", input, blocks, output, blocks);
  }

  std::unique_ptr<Work> all_to_all_v_async(const Tensor& input, const std::vector<int64_t>& send_counts,
                                           const Tensor& output, const std::vector<int64_t>& recv_counts) override {
    check(input, "all_to_all_v");
    check(output, "all_to_all_v");
    check_all_to_all_v("rank " + std::to_string(rank_) + ": NCCL all_to_all_v", input, send_counts, output,
                       recv_counts);
    count(CommOp::kAllToAllV, input);
    return exchange("all_to_all_v", input, send_counts, output, recv_counts);
  }

  void barrier() override {
    if (!barrier_flag_) barrier_flag_ = empty({1}, DType::kF32, Device::cuda());
    count(CommOp::kBarrier, *barrier_flag_);
    launch("barrier", 0, [&] {
      return ncclAllReduce(barrier_flag_->raw_data(), barrier_flag_->raw_data(), 1, ncclFloat32, ncclSum, comm_, stream_);
    })->wait();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    ncclComm_t sub = nullptr;
    TRI_NCCL_CHECK(ncclCommSplit(comm_, color, key, &sub, nullptr), rank_, "split");
    int r = 0, n = 0;
    TRI_NCCL_CHECK(ncclCommUserRank(sub, &r), rank_, "split");
    TRI_NCCL_CHECK(ncclCommCount(sub, &n), rank_, "split");
    return std::make_unique<NcclCommunicatorImpl>(sub, r, n);
  }

 private:
  void check(const Tensor& t, const char* what) const {
    TRI_CHECK(t.device().is_cuda(), "rank ", rank_, ": NCCL ", what, " takes CUDA tensors, got ", t.str(), " on ",
              t.device());
    TRI_CHECK(t.is_contiguous(), "rank ", rank_, ": NCCL ", what, " takes contiguous tensors, got ", t.str());
  }
  void check_rank(int r, const char* what) const {
    TRI_CHECK(r >= 0 && r < size_, "rank ", rank_, ": NCCL ", what, " ", r, " is not a rank of this communicator (0..",
              size_ - 1, ")");
  }
  // input (size * n) and output (n) for reduce_scatter, input (n) and output (size * n) for all_gather.
  void check_pair(const Tensor& input, const Tensor& output, const char* what, bool input_is_whole) const {
    check(input, what);
    check(output, what);
    const Tensor& whole = input_is_whole ? input : output;
    const Tensor& part = input_is_whole ? output : input;
    TRI_CHECK(input.dtype() == output.dtype() && whole.numel() == part.numel() * size_, "rank ", rank_, ": NCCL ", what,
              ": expected ", input_is_whole ? "input" : "output", " of ", size_, " x the other's elements and one dtype, got input ",
              input.str(), ", output ", output.str());
  }
  // all_to_all(_v): in one group, a send and a receive per peer, block after block (NCCL's
  // recipe for all-to-all-v). An empty block is skipped on both sides (rank i's send_counts[j]
  // is rank j's recv_counts[i]), as PyTorch's all_to_all_single does.
  std::unique_ptr<Work> exchange(const char* what, const Tensor& input, const std::vector<int64_t>& send_counts,
                                 const Tensor& output, const std::vector<int64_t>& recv_counts) {
    const size_t es = element_size(input.dtype());
    const ncclDataType_t type = nccl_type(input.dtype(), rank_, what);
    return launch(what, bytes_of(input), [&] {
      const char* in = static_cast<const char*>(input.raw_data());
      char* out = static_cast<char*>(output.raw_data());
      ncclResult_t rc = ncclGroupStart();
      for (size_t r = 0; r < send_counts.size() && rc == ncclSuccess; ++r) {
        const size_t n_send = static_cast<size_t>(send_counts[r]), n_recv = static_cast<size_t>(recv_counts[r]);
        const int peer = static_cast<int>(r);
        if (n_send > 0) rc = ncclSend(in, n_send, type, peer, comm_, stream_);
        if (n_recv > 0 && rc == ncclSuccess) rc = ncclRecv(out, n_recv, type, peer, comm_, stream_);
        in += n_send * es;
        out += n_recv * es;
      }
      const ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    });
  }
  // Queues `call` on the communicator's stream behind the compute stream's work so far.
  // Recorded in the flight recorder as `bytes` of this rank's input (Note [Reading a flight record]).
  template <class Call>
  std::unique_ptr<Work> launch(const char* what, int64_t bytes, const Call& call) {
    cudaEvent_t ready = nullptr, done = nullptr;
    TRI_CUDA_COMM_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), rank_, what);
    TRI_CUDA_COMM_CHECK(cudaEventRecord(ready, nullptr), rank_, what);
    TRI_CUDA_COMM_CHECK(cudaStreamWaitEvent(stream_, ready, 0), rank_, what);
    cudaEventDestroy(ready);  // released once recorded work completes
    TRI_NCCL_CHECK(call(), rank_, what);
    TRI_CUDA_COMM_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), rank_, what);
    TRI_CUDA_COMM_CHECK(cudaEventRecord(done, stream_), rank_, what);
    const int64_t seq = flight_recorder().started(id_, size_, what, bytes);
    return std::make_unique<NcclWork>(comm_, done, rank_, what, id_, seq);
  }
  static int64_t bytes_of(const Tensor& t) { return t.numel() * static_cast<int64_t>(element_size(t.dtype())); }

  ncclComm_t comm_;
  int rank_, size_;
  int id_ = flight_recorder().new_communicator();  // Note [Reading a flight record]
  cudaStream_t stream_ = nullptr;
  std::optional<Tensor> barrier_flag_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap) {
  const int rank = bootstrap.rank(), size = bootstrap.size();
  int devices = 0;
  TRI_CUDA_COMM_CHECK(cudaGetDeviceCount(&devices), rank, "setup");
  TRI_CHECK(devices > 0, "rank ", rank, ": NCCL needs a GPU and this process sees none");
  // One GPU per rank of a host: the launcher's local rank (OpenMPI's, or torchrun-style
  // LOCAL_RANK), else the global rank (one host).
  int local = rank;
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"})
    if (const char* v = std::getenv(name)) {
      char* end = nullptr;
      const long parsed = std::strtol(v, &end, 10);
      TRI_CHECK(end != v && *end == '\0' && parsed >= 0 && parsed <= INT32_MAX, "rank ", rank, ": ", name, "=\"", v,
                "\" is not a local rank (a non-negative integer)");
      local = static_cast<int>(parsed);
      break;
    }
  TRI_CUDA_COMM_CHECK(cudaSetDevice(local % devices), rank, "setup");
  ncclUniqueId id;
  if (rank == 0) TRI_NCCL_CHECK(ncclGetUniqueId(&id), rank, "unique id");
  // The id's bytes travel as i32s (the communicators' dtypes have no byte type).
  static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0, "ncclUniqueId is a whole number of i32s");
  Tensor bytes = empty({static_cast<int64_t>(sizeof(ncclUniqueId) / sizeof(int32_t))}, DType::kI32);
  if (rank == 0) std::memcpy(bytes.raw_data(), &id, sizeof id);
  bootstrap.broadcast(bytes, 0);
  std::memcpy(&id, bytes.raw_data(), sizeof id);
  ncclComm_t comm = nullptr;
  TRI_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank), rank, "init");
  return std::make_unique<NcclCommunicatorImpl>(comm, rank, size);
}

std::unique_ptr<Communicator> make_nccl_self_communicator() {
  ncclUniqueId id;
  TRI_NCCL_CHECK(ncclGetUniqueId(&id), 0, "unique id");
  ncclComm_t comm = nullptr;
  TRI_NCCL_CHECK(ncclCommInitRank(&comm, 1, id, 0), 0, "init");
  return std::make_unique<NcclCommunicatorImpl>(comm, 0, 1);
}

}  // namespace trident::comm
