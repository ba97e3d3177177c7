#include "planner/cluster.h"

#include <algorithm>

#include "config/config_tree.h"
#include "core/host_memory.h"

namespace trident::planner {

const OptionTable<ClusterShape>& ClusterShape::table() {
  static const auto t = OptionTable<ClusterShape>("cluster", "The machines: nodes of identical devices")
                            .add("name", &ClusterShape::name, "what it is (printed with the plan)")
                            .add("nodes", &ClusterShape::nodes, "nodes", Range::at_least(1))
                            .add("devices_per_node", &ClusterShape::devices_per_node,
                                 "devices (GPUs, or CPU ranks) per node", Range::at_least(1))
                            .add("host_memory_gib", &ClusterShape::host_memory_gib,
                                 "each node's host memory (GiB), where ZeRO-Offload keeps the optimizer's state "
                                 "beside GPUs (0: not checked)",
                                 Range::non_negative())
                            .add("disk_read_gbs", &ClusterShape::disk_read_gbs,
                                 "each node's disk under parallel.nvme_path (the NVMe tier): sequential reads, GB/s, "
                                 "all its ranks at once (calibrate with parallel.nvme_path measures it; 0: unknown)",
                                 Range::non_negative())
                            .add("disk_write_gbs", &ClusterShape::disk_write_gbs,
                                 "the same disk's sequential writes, GB/s (0: unknown)", Range::non_negative());
  return t;
}

const OptionTable<DeviceSpec>& DeviceSpec::table() {
  static const auto t =
      OptionTable<DeviceSpec>("device", "One device: memory and compute rates")
          .add("kind", &DeviceSpec::kind,
               "what the ranks run on (the fused head's chunks and offload differ)", {"cpu", "gpu"})
          .add("memory_gib", &DeviceSpec::memory_gib, "memory per device (GiB)", Range::positive())
          .add("peak_tflops_fp32", &DeviceSpec::peak_tflops_fp32, "peak fp32 matrix TFLOP/s",
               Range::positive())
          .add("peak_tflops_bf16", &DeviceSpec::peak_tflops_bf16, "peak bf16 matrix TFLOP/s",
               Range::positive())
          .add("peak_tflops_fp16", &DeviceSpec::peak_tflops_fp16, "peak fp16 matrix TFLOP/s",
               Range::positive())
          .add("gemm_efficiency", &DeviceSpec::gemm_efficiency,
               "fraction of the peak the model's GEMMs reach (calibrate: measured at the model's "
               "shapes)",
               Range::between(0.01, 1.0))
          .add("memory_bandwidth_gbs", &DeviceSpec::memory_bandwidth_gbs,
               "rate of memory-bound ops (norms, activations, the optimizer), GB/s",
               Range::positive())
          .add("attention_efficiency", &DeviceSpec::attention_efficiency,
               "the attention kernel's FLOP rate as a fraction of the GEMM rate",
               Range::between(0.01, 2.0))
          .add("comm_overlap", &DeviceSpec::comm_overlap,
               "fraction of the compute a data-parallel or ZeRO collective issued beside it hides "
               "behind, where the framework overlaps it (NCCL on its own stream: near 1; 0: none)",
               Range::between(0.0, 1.0))
          .add("allocator_headroom", &DeviceSpec::allocator_headroom,
               "what the allocator holds beyond the tensors' peak, as a fraction of it (a caching "
               "allocator's fragmentation, the runtime's buffers): a layout fits when its peak x "
               "(1 + this) is within memory_gib",
               Range::between(0.0, 1.0))
          .add("gemm_half_rows", &DeviceSpec::gemm_half_rows,
               "rows (tokens per micro-batch) at which the GEMM rate is half its peak (0: no "
               "fall-off)",
               Range::non_negative())
          .add("attention_half_head_size", &DeviceSpec::attention_half_head_size,
               "the head size at which the attention kernel's rate is half attention_efficiency's "
               "(flash attention's efficiency falls with small heads; 0: no fall-off)",
               Range::non_negative())
          .add("unfused_attention_efficiency", &DeviceSpec::unfused_attention_efficiency,
               "an unfused attention's score GEMMs (plan --attention unfused) as a fraction of the "
               "GEMM rate, its scores' passes through memory apart (0: attention_efficiency)",
               Range::between(0.0, 2.0))
          .add("gemm_half_k", &DeviceSpec::gemm_half_k,
               "the reduction length K at which a GEMM's rate is half its peak (the forward's K is "
               "a product's inputs, the dx's its outputs, tensor parallelism dividing one; 0: no "
               "fall-off)",
               Range::non_negative())
          .add("vocab_loss_ns_per_logit", &DeviceSpec::vocab_loss_ns_per_logit,
               "a vocabulary-parallel loss's local passes (maxima, sums, gradient) per logit, ns "
               "(calibrate: measured; 0: four passes over the f32 logits at memory_bandwidth_gbs)",
               Range::non_negative())
          .add("fused_loss_ns_per_logit", &DeviceSpec::fused_loss_ns_per_logit,
               "the fused head's loss (tp = 1) outside its GEMMs: log-sum-exp and softmax - onehot "
               "per logit, ns (calibrate: measured; 0: three passes over the compute dtype's "
               "logits at memory_bandwidth_gbs)",
               Range::non_negative())
          .add("collective_skew_us", &DeviceSpec::collective_skew_us,
               "the wait for the slowest of 2 ranks at each blocking collective (tensor "
               "parallelism's all-reduces, expert parallelism's exchanges) beyond the collective's "
               "own time, us (calibrate: measured; a group of n ranks waits E[max of n normals] / "
               "E[max of 2] as long)",
               Range::non_negative())
          .add("collective_skew_fraction", &DeviceSpec::collective_skew_fraction,
               "the same wait's part that grows with the compute before the collective, as a "
               "fraction of it",
               Range::between(0.0, 1.0));
  return t;
}

namespace {

template <class T>
OptionTable<T> link_table(const char* section, const char* doc) {
  return OptionTable<T>(section, doc)
      .add("bandwidth_gbs", &T::bandwidth_gbs, "per device and direction, GB/s", Range::positive())
      .add("latency_us", &T::latency_us, "one message's latency, microseconds", Range::non_negative())
      .add("reduce_scatter_factor", &T::reduce_scatter_factor,
           "a reduce-scatter's time over the ring model's at this link's rate, half an all-reduce's (1: NCCL's "
           "rings; calibrate measures it: MPI's can be slower, Note [Collectives as measured])",
           Range::between(0.01, 100.0))
      .add("all_gather_factor", &T::all_gather_factor,
           "an all-gather's time over the ring model's at this link's rate (1: NCCL's rings; calibrate measures it)",
           Range::between(0.01, 100.0))
      .add("all_to_all_factor", &T::all_to_all_factor,
           "an all_to_all_v's time (expert parallelism's exchanges) over the model's, (n - 1) / n of the bytes at "
           "this link's rate and n - 1 latencies (1: NCCL; calibrate measures it)",
           Range::between(0.01, 100.0));
}

}  // namespace

const OptionTable<IntraNodeLink>& IntraNodeLink::table() {
  static const auto t = link_table<IntraNodeLink>("intra_node", "Between devices of one node (NVLink, shared memory)");
  return t;
}

const OptionTable<InterNodeLink>& InterNodeLink::table() {
  static const auto t = link_table<InterNodeLink>("inter_node", "Between nodes (InfiniBand, Ethernet)");
  return t;
}

int64_t Cluster::memory_bytes() const { return static_cast<int64_t>(device.memory_gib * 1024.0 * 1024.0 * 1024.0); }

bool Cluster::device_fits(int64_t peak) const {
  return static_cast<double>(peak) * (1.0 + device.allocator_headroom) <= static_cast<double>(memory_bytes());
}

bool Cluster::host_fits(int64_t per_rank, int64_t ranks) const {
  if (shape.host_memory_gib <= 0.0 || per_rank == 0) return true;
  const double on_a_node = static_cast<double>(per_rank) * static_cast<double>(std::min(ranks, shape.devices_per_node));
  return on_a_node <= shape.host_memory_gib * 1024.0 * 1024.0 * 1024.0;
}

double Cluster::gemm_flops(DType dtype, double rows) const {
  const double peak = dtype == DType::kBF16 ? device.peak_tflops_bf16
                      : dtype == DType::kF16 ? device.peak_tflops_fp16
                                             : device.peak_tflops_fp32;
  return peak * 1e12 * device.gemm_efficiency * rows / (rows + device.gemm_half_rows);
}

// Note [Unfused attention]
// An unfused attention (SC'21's Megatron; eager code without a flash kernel) writes its
// (T x T) scores per head to memory and passes over them: the scores GEMM writes them, the
// scale-mask-softmax reads and writes them, dropout reads and writes them and its mask, the
// values GEMM reads them; the backward about twice that. About kUnfusedScorePasses elements
// of the compute dtype per score, forward and backward (18 bytes in fp16). The time model
// spends 7 T d / rate per head and token on attention forward and backward (2 T d forward,
// 5 T d backward, Note [Attention by head size]), T scores each, so those bytes add
// h = passes x E x rate / (7 x memory bandwidth) to the head size in d / (d + h): a cost per
// score whatever the head size. Its GEMMs run at unfused_attention_efficiency of the GEMM
// rate. On SC'21's A100s h is 113 at 0.48 (tests/planner/megatron_test). A fused kernel
// (FlashAttention, cuDNN's, trident's own) keeps no scores: attention_efficiency and
// attention_half_head_size are its figures.
namespace {
constexpr double kUnfusedScorePasses = 9.0;
}  // namespace

double Cluster::attention_flops(DType dtype, double head_size, bool unfused) const {
  if (unfused) {
    const double eff =
        device.unfused_attention_efficiency > 0.0 ? device.unfused_attention_efficiency : device.attention_efficiency;
    const double rate = gemm_flops(dtype, 1e18) * eff;
    const double h = kUnfusedScorePasses * static_cast<double>(element_size(dtype)) * rate /
                     (7.0 * device.memory_bandwidth_gbs * 1e9);
    return rate * head_size / (head_size + h);
  }
  const double rate = gemm_flops(dtype, 1e18) * device.attention_efficiency;
  const double h = device.attention_half_head_size;
  return h > 0.0 ? rate * head_size / (head_size + h) : rate;
}

bool Cluster::crosses_nodes(int64_t span, int64_t ranks) const {
  const int64_t d = shape.devices_per_node;
  return span > d || (ranks > d && d % span != 0);
}

const LinkSpec& Cluster::link_for(int64_t span, int64_t ranks) const {
  return crosses_nodes(span, ranks) ? static_cast<const LinkSpec&>(inter) : static_cast<const LinkSpec&>(intra);
}

namespace {

void bind(config::ConfigTree& tree, Cluster& c) {
  tree.bind(c.shape);
  tree.bind(c.device);
  tree.bind(c.intra);
  tree.bind(c.inter);
}

}  // namespace

std::string Cluster::to_toml() const {
  Cluster copy = *this;
  config::ConfigTree tree;
  bind(tree, copy);
  return tree.to_toml();
}

StatusOr<Cluster> parse_cluster(const std::string& text, const std::string& source_name) {
  Cluster c;
  config::ConfigTree tree;
  bind(tree, c);
  if (Status s = tree.load_toml_string(text, source_name); !s.is_ok()) return s;
  return c;
}

StatusOr<Cluster> load_cluster(const std::string& path) {
  Cluster c;
  config::ConfigTree tree;
  bind(tree, c);
  if (Status s = tree.load_toml_file(path); !s.is_ok()) return s;
  return c;
}

Cluster local_cluster(int64_t ranks) {
  Cluster c;
  c.shape.devices_per_node = ranks;
  // The ranks share the host's memory.
  const double bytes = host_memory_bytes();
  if (bytes > 0) c.device.memory_gib = bytes / (1024.0 * 1024.0 * 1024.0) / static_cast<double>(ranks);
  return c;
}

}  // namespace trident::planner
