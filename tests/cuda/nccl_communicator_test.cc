// The Communicator on NCCL (issue #7), in one process: every operation on GPU tensors gives
// what a group of one must (the MPI tests check the semantics with several ranks; NCCL with
// several ranks needs a GPU each), the counters count, and misuse is a clear error. Without a
// GPU, asking for NCCL is a clear error, not a crash or a hang.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/copy.h"
#include "core/factory.h"
#include "kernels/cuda/cuda_device.h"

#ifdef TRIDENT_WITH_NCCL
#include "comm/nccl_communicator.h"

namespace trident::comm {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason()

Tensor on_gpu(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return core::to_device(from_vector(v, Shape{n}), Device::cuda());
}
std::vector<float> values(const Tensor& t) { return to_vector<float>(t); }

TEST(NcclCommunicator, WithoutAGpuItIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  try {
    make_nccl_self_communicator();
    FAIL() << "an NCCL communicator without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL"), std::string::npos) << e.what();
  }
}

TEST(NcclCommunicator, AGroupOfOneRunsEveryOperation) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Communicator> c = make_nccl_self_communicator();
  EXPECT_EQ(c->backend(), "nccl");
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  const Tensor t = on_gpu({1.5f, -2.0f, 3.0f});
  c->all_reduce(t);
  EXPECT_EQ(values(t), (std::vector<float>{1.5f, -2.0f, 3.0f}));
  c->all_reduce(t, ReduceOp::kMax);
  EXPECT_EQ(values(t), (std::vector<float>{1.5f, -2.0f, 3.0f}));
  const Tensor out = empty({3}, DType::kF32, Device::cuda());
  c->reduce_scatter(t, out);
  EXPECT_EQ(values(out), values(t));
  const Tensor gathered = empty({3}, DType::kF32, Device::cuda());
  c->all_gather(t, gathered);
  EXPECT_EQ(values(gathered), values(t));
  c->broadcast(t, 0);
  EXPECT_EQ(values(t), (std::vector<float>{1.5f, -2.0f, 3.0f}));
  const Tensor swapped = empty({3}, DType::kF32, Device::cuda());
  c->all_to_all(t, swapped);
  EXPECT_EQ(values(swapped), values(t));
  // bf16 and integer reductions.
  const Tensor b = core::cast(on_gpu({0.5f, 4.0f}), DType::kBF16);
  c->all_reduce(b);
  EXPECT_EQ(values(b), (std::vector<float>{0.5f, 4.0f}));
  c->barrier();
  std::unique_ptr<Communicator> sub = c->split(0, 0);
  EXPECT_EQ(sub->size(), 1);
  sub->all_reduce(t);
  EXPECT_EQ(values(t), (std::vector<float>{1.5f, -2.0f, 3.0f}));
  EXPECT_EQ(c->stats().of(CommOp::kAllReduce).calls, 3);
  EXPECT_EQ(c->stats().of(CommOp::kAllReduce).bytes, 3 * 4 + 3 * 4 + 2 * 2);
}

TEST(NcclCommunicator, HostTensorsAndBadRanksAreClearErrors) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Communicator> c = make_nccl_self_communicator();
  const Tensor host = from_vector(std::vector<float>{1, 2}, Shape{2});
  try {
    c->all_reduce(host);
    FAIL() << "NCCL took a host tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes CUDA tensors"), std::string::npos) << e.what();
  }
  try {
    c->broadcast(on_gpu({1.0f}), 3);
    FAIL() << "broadcast from a rank that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a rank of this communicator"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::comm
#endif  // TRIDENT_WITH_NCCL
