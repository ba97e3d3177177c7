#include "planner/time_model.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "models/causal_lm.h"
#include "ops/loss.h"
#include "parallel/pipeline.h"
#include "planner/collective_skew.h"
#include "planner/data_parallel_time.h"
#include "planner/fine_tuning.h"
#include "planner/gemm_time.h"
#include "planner/pipeline_sim.h"
#include "planner/placements.h"

namespace trident::planner {
namespace {

// ZeRO-Offload's host side: a CPU's memory-bound AdamW and a PCIe 4 x16 link (per device).
constexpr double kOffloadHostGBs = 20.0;
constexpr double kOffloadLinkGBs = 25.0;
// Ranks of a CPU: their "offload" moves state between buffers of the same memory.
bool cluster_is_host(const Cluster& c) { return !c.gpu(); }

double saved_bytes_per_token(const std::vector<models::SavedActivation>& list, int64_t E, int64_t tp) {
  double b = 0.0;
  for (const auto& a : list)
    if (a.kept_none)
      b += static_cast<double>(a.per_token * (a.i64 ? 8 : a.f32 ? 4 : E)) / (a.tp_split ? static_cast<double>(tp) : 1.0);
  return b;
}

ComputeParts scaled(const ComputeParts& p, double k) {
  ComputeParts o;
  o.products = k * p.products;
  o.experts = k * p.experts;
  o.attention = k * p.attention;
  o.memory = k * p.memory;
  o.adapters = k * p.adapters;
  o.head = k * p.head;
  o.loss = k * p.loss;
  o.recompute = k * p.recompute;
  o.optimizer = k * p.optimizer;
  o.accumulate = k * p.accumulate;
  return o;
}

ComputeParts operator+(ComputeParts a, const ComputeParts& b) {
  a.products += b.products;
  a.experts += b.experts;
  a.attention += b.attention;
  a.memory += b.memory;
  a.adapters += b.adapters;
  a.head += b.head;
  a.loss += b.loss;
  a.recompute += b.recompute;
  a.optimizer += b.optimizer;
  a.accumulate += b.accumulate;
  return a;
}

}  // namespace

TimeEstimate predict_time(const RunSpec& run, const Layout& l, const Cluster& cluster) {
  const models::ModelShapes& s = run.shapes;
  const int64_t E = static_cast<int64_t>(element_size(run.compute));
  const double T = static_cast<double>(run.seq_len), C = static_cast<double>(run.model.n_embd);
  const double tokens = static_cast<double>(l.micro_batch) * T;  // per micro-batch and data-parallel rank
  const double tp = static_cast<double>(l.tp);
  // Of the peak, at the model's head size (Note [Attention by head size]).
  const double attn_rate =
      cluster.attention_flops(run.compute, static_cast<double>(s.head_size), run.convention.unfused_attention);
  const double mem_rate = cluster.device.memory_bandwidth_gbs * 1e9;

  // One block, one token: forward matmul FLOPs, attention forward FLOPs, memory-bound bytes.
  const double attn_q = static_cast<double>(s.attention_heads * s.head_size);  // query width
  const double block_attn = 2.0 * T * attn_q / tp;
  const double block_mem = 3.0 * saved_bytes_per_token(s.block, E, l.tp);

  // Note [Frozen weights' time]
  // A frozen weight (LoRA's base, train.freeze) gets no gradient: its product's backward runs
  // the dx GEMM alone (the layers before still need their input's gradient), a frozen head
  // makes no dw and none of the fused loss's per-micro-batch passes over it, and frozen
  // experts' grouped products no dW. Counting them had a LoRA run of GPT-2 "small" on one Zen 4
  // core 42% over its measured step. LoRA's own factors are counted instead (adapter_work in
  // fine_tuning.h): their two r-wide products and their scaling and adding.
  auto trains_of = [&](const std::vector<std::pair<int64_t, int64_t>>& products) {
    std::vector<bool> t;
    for (const auto& [in, out] : products) t.push_back(product_weight_trains(run, in, out));
    return t;
  };
  const std::vector<bool> block_trains = trains_of(s.block_matmuls), sparse_trains = trains_of(s.sparse_block_matmuls);
  const std::vector<bool> head_trains{head_weight_trains(run)};
  const double expert_passes = s.sparse_blocks > 0 && !experts_train(run) ? 2.0 : 3.0;  // forward, dx and dW
  // The products' GEMMs by their shapes on this tp rank (Note [GEMMs by shape]).
  const ProductSeconds block_products =
      product_seconds(s.block_matmuls, s, l.tp, true, cluster, run.compute, tokens, &block_trains);
  // Per block and micro-batch: the forward, the backward (with the rerun) and the rerun alone.
  // LoRA's factors, on every rank whole (their split under tp is left out), and their passes.
  const AdapterWork adapters = adapter_work(run, E);
  const ProductSeconds adapter_products =
      product_seconds(adapters.products, s, l.tp, false, cluster, run.compute, tokens);
  const double adapter_fwd = adapter_products.forward / adapters.blocks + adapters.forward_bytes_per_token / mem_rate;
  const double adapter_bwd = adapter_products.backward / adapters.blocks + adapters.backward_bytes_per_token / mem_rate;
  // Per block and micro-batch, by part (ComputeParts): the forward, the backward and the rerun.
  const double attn_fwd = tokens * block_attn / attn_rate;
  ComputeParts dense;
  dense.products = tokens * (block_products.forward + block_products.backward);
  dense.attention = 3.5 * attn_fwd;
  dense.memory = tokens * block_mem / mem_rate;
  dense.adapters = tokens * (adapter_fwd + adapter_bwd);
  const double block_fwd =
      tokens * (block_products.forward + block_mem / 3.0 / mem_rate + adapter_fwd) + attn_fwd;
  if (l.checkpointing == "full") dense.recompute = block_fwd;
  else if (l.checkpointing == "selective")  // the memory-bound ops again, the adapters' scaling and adding among them
    dense.recompute = attn_fwd + tokens * (block_mem / 3.0 / mem_rate + adapters.forward_bytes_per_token / mem_rate);
  const double block_bwd = dense.total() - block_fwd;
  // Note [The time of a mixture of experts]
  // A sparse block's products: what every token runs through (attention, the router, a shared
  // expert) and k routed rows per token through one expert's SwiGLU (the active parameters).
  // Each expert's products are GEMMs of the rows it is sent: with balanced routing N k / E of a
  // micro-batch's N tokens, and under expert parallelism its ep ranks' (ep N k / E), priced by
  // those rows and the products' reduction lengths (Note [GEMMs by shape]; tiny-moe's 4 experts
  // see 1,024 of b8's 2,048 rows). The grouped products are no kept_or_computed product, so
  // "selective" reruns them. Their rows travel by all_to_all_v over the ep group: two exchanges
  // forward and two backward per block and micro-batch (another two in a checkpointed rerun),
  // N k C elements each, (ep - 1) / ep of them off the rank; counted exposed.
  const double expert_mm = static_cast<double>(s.experts_per_token * models::matmul_flops_per_token(s.expert_matmuls));
  const double k_routed = static_cast<double>(s.experts_per_token);
  const double expert_rows =
      s.experts > 0 ? std::max(1.0, tokens * k_routed * static_cast<double>(l.ep) / static_cast<double>(s.experts)) : tokens;
  const std::vector<bool> expert_trains(s.expert_matmuls.size(), expert_passes > 2.0);
  const ProductSeconds expert_products =
      product_seconds(s.expert_matmuls, s, 1, false, cluster, run.compute, expert_rows, &expert_trains);
  const double sparse_mem = 3.0 * saved_bytes_per_token(s.sparse_block, E, l.tp);
  const ProductSeconds sparse_products =
      product_seconds(s.sparse_block_matmuls, s, l.tp, true, cluster, run.compute, tokens, &sparse_trains);
  ComputeParts sparse_parts;
  sparse_parts.products = tokens * (sparse_products.forward + sparse_products.backward);
  sparse_parts.experts = tokens * k_routed * (expert_products.forward + expert_products.backward);
  sparse_parts.attention = 3.5 * attn_fwd;
  sparse_parts.memory = tokens * sparse_mem / mem_rate;
  sparse_parts.adapters = tokens * (adapter_fwd + adapter_bwd);
  const double experts_fwd = tokens * k_routed * expert_products.forward;
  const double sparse_fwd =
      tokens * (sparse_products.forward + sparse_mem / 3.0 / mem_rate + adapter_fwd) + experts_fwd + attn_fwd;
  if (l.checkpointing == "full") sparse_parts.recompute = sparse_fwd;
  else if (l.checkpointing == "selective")
    sparse_parts.recompute =
        experts_fwd + attn_fwd + tokens * (sparse_mem / 3.0 / mem_rate + adapters.forward_bytes_per_token / mem_rate);
  const double sparse_bwd = sparse_parts.total() - sparse_fwd;
  // Under expert parallelism each sparse layer waits for its busiest ep rank's experts
  // (Note [Measured expert load]): their products, and their rerun, take `imbalance` x the
  // balanced rows' time; 1 without measured counts.
  const double experts_re = l.checkpointing == "none" ? 0.0 : experts_fwd;
  // Counted before a capacity drops rows: none runs more than moe_capacity_factor x its share.
  const double capped = s.capacity_factor > 0.0 ? std::max(1.0, s.capacity_factor) : 1e300;
  auto extra = [&](int64_t b) { return s.is_sparse(b) ? std::min(run.expert_load.imbalance(b, l.ep), capped) - 1.0 : 0.0; };
  // Block b's parts, forward (with the busiest rank's experts) and backward, per micro-batch.
  auto parts_of = [&](int64_t b) {
    if (!s.is_sparse(b)) return dense;
    ComputeParts p = sparse_parts;
    p.experts *= 1.0 + extra(b);
    p.recompute += extra(b) * experts_re;
    return p;
  };
  auto fwd_of = [&](int64_t b) { return s.is_sparse(b) ? sparse_fwd + extra(b) * experts_fwd : block_fwd; };
  auto bwd_of = [&](int64_t b) { return s.is_sparse(b) ? sparse_bwd + extra(b) * (sparse_parts.experts - experts_fwd + experts_re) : block_bwd; };
  auto sparse_in = [&](int64_t begin, int64_t end) {
    int64_t n = 0;
    for (int64_t b = begin; b < end; ++b) n += s.is_sparse(b) ? 1 : 0;
    return static_cast<double>(n);
  };
  // The head's product forward and its two backward, and the vocabulary-parallel loss's
  // passes (half forward, half backward) on the last chunk.
  // With tp = 1 the fused loss runs the head's products in chunks of rows (Note [Head chunks] in
  // ops/loss.cc: 1,024 of GPT-2's vocabulary on a CPU), at the rate of those rows.
  const double head_rows =
      l.tp == 1 ? std::min(tokens, static_cast<double>(ops::linear_cross_entropy_chunk_rows(s.head_matmul.second, run.on_device)))
                : tokens;
  const ProductSeconds head_products =
      product_seconds({s.head_matmul}, s, l.tp, true, cluster, run.compute, head_rows, &head_trains);
  double head_fwd = tokens * head_products.forward, head_bwd = tokens * head_products.backward;
  // Note [The embedding's dense gradient]
  // The token embedding's backward writes a dense (V, C) f32 gradient every micro-batch (zeroed,
  // then its rows added), V / tp rows of a vocabulary-parallel one; tied to the head on one
  // stage, the head's dw is then added to it (read both, write one). Per micro-batch, on the
  // first stage, whatever the tokens: tiny-moe's 50257 x 256 took 2.2 ms a micro-batch in
  // train.profile_step (17.5 ms of a b1 m8 step), GPT-2 small's tied sum 11-19 ms.
  double embedding_s = 0.0;
  if (token_embedding_trains(run)) {
    const double rows = std::ceil(static_cast<double>(run.model.vocab_size) / tp), bytes = rows * C;
    embedding_s = 4.0 * bytes / mem_rate;
    if (s.tied_head_weight && l.pp == 1) embedding_s += 12.0 * bytes / mem_rate;
  }
  // The slowest stage per micro-batch: its blocks, the embedding's gradient on the first, and
  // the head on the last.
  const parallel::PipelineLayout pl = parallel::PipelineLayout::make(run.model.n_layer, static_cast<int>(l.pp),
                                                                     static_cast<int>(l.virtual_stages));
  const std::vector<StageParameters>& stages = stages_of(run, l);
  double stage_s = 0.0, stage_re = 0.0, stage_fwd = 0.0, stage_blocks = 0.0;  // the slowest's
  int64_t stage_params_max = 0, stage_experts_max = 0;  // dense and ep-placed expert elements
  double stage_sparse = 0.0;     // the sparse blocks of the slowest stage
  double stage_exchanges = 0.0;  // their all_to_all_v's, each x its busiest rank's imbalance
  ComputeParts stage_parts;   // the slowest's, per micro-batch
  double loss_fwd = 0.0, loss_bwd = 0.0;  // of head_fwd and head_bwd: the loss's passes
  for (int r = 0; r < l.pp; ++r) {
    double sparse = 0.0, blocks = 0.0, fwd = 0.0, exchanges = 0.0;
    ComputeParts parts;  // the stage's blocks, forward, backward and rerun, per micro-batch
    for (int c = 0; c < pl.num_chunks(); ++c)
      if (pl.rank_of_chunk(c) == r) {
        const auto [b, e] = pl.chunks[static_cast<size_t>(c)];
        sparse += sparse_in(b, e);
        blocks += static_cast<double>(e - b);
        for (int64_t k = b; k < e; ++k) {
          fwd += fwd_of(k);
          parts = parts + parts_of(k);
          exchanges += s.is_sparse(k) ? 1.0 + extra(k) : 0.0;
        }
      }
    double t = parts.total();
    const double re = parts.recompute;
    if (r == 0) t += embedding_s;
    if (r == l.pp - 1) {
      // Note [The vocabulary-parallel loss's time]
      // A vocabulary-parallel loss (parallel/tp_collectives.cc) materializes its (tokens, V / tp)
      // f32 logits and passes over them apart from the products: the maxima, the sums of exp
      // and the gradient (exp again), in double precision on the CPU. On small tp=2 runs
      // that was most of what TP cost beyond the model (CPU time 3.71 s against data
      // parallelism's 3.35 s for the same batch), so calibrate times those passes per logit;
      // uncalibrated (a GPU's cluster file), four passes over memory (read for the maxima and
      // the sums, read and written for the gradient). The fused loss of tp = 1 is
      // Note [The fused loss's time].
      if (l.tp > 1) {
        const double logits = tokens * static_cast<double>(s.head_matmul.second) / tp;
        const double per_logit = cluster.device.vocab_loss_ns_per_logit > 0.0 ? cluster.device.vocab_loss_ns_per_logit * 1e-9
                                                                               : 4.0 * 4.0 / mem_rate;
        loss_fwd = 0.5 * logits * per_logit;
        loss_bwd = 0.5 * logits * per_logit;
      } else {
        // Note [The fused loss's time]
        // The fused loss (ops::linear_cross_entropy) makes each chunk's log-sum-exp and softmax -
        // onehot in the forward, between the logits GEMM and the two gradient GEMMs: an exp per
        // logit twice. On a CPU whose GEMMs are fast that is no longer in the GEMMs' noise: GPT-2
        // small in bf16 on a Zen 5 core, 87 ms of a 1.59 s step (the head's GEMMs 744), and
        // uncounted the step was 11-16% over its prediction. Calibrate times the two passes per
        // logit; uncalibrated, three passes over the logits at the memory's rate.
        const double logits = tokens * static_cast<double>(s.head_matmul.second);
        const double per_logit = cluster.device.fused_loss_ns_per_logit > 0.0
                                     ? cluster.device.fused_loss_ns_per_logit * 1e-9
                                     : 3.0 * static_cast<double>(E) / mem_rate;
        loss_fwd = logits * per_logit;
        // Its dw, f32 (V, C), per micro-batch: zeroed (4 bytes), then scaled (read and write 4)
        // and, under mixed precision, cast to the compute dtype in the backward (read 4, write E).
        const double dw_bytes = run.mixed() ? 16.0 + static_cast<double>(E) : 12.0;
        if (head_trains.front())
          loss_bwd = static_cast<double>(s.head_matmul.first * s.head_matmul.second) * dw_bytes / mem_rate;
      }
      head_fwd += loss_fwd;
      head_bwd += loss_bwd;
      t += head_fwd + head_bwd;
      fwd += head_fwd;
    }
    if (t > stage_s) {
      stage_s = t;
      stage_parts = parts;
      stage_exchanges = exchanges;
      if (r == 0) stage_parts.memory += embedding_s;
      if (r == l.pp - 1) {
        stage_parts.head = tokens * (head_products.forward + head_products.backward);
        stage_parts.loss = loss_fwd + loss_bwd;
      }
      stage_re = re;
      stage_sparse = sparse;
      stage_fwd = fwd;
      stage_blocks = blocks;
    }
    int64_t params = 0, experts = 0;  // the stage's, as the trainer places them
    const StageParameters& held = stages[static_cast<size_t>(r)];
    for (size_t k = 0; k < held.numels.size(); ++k) (held.expert[k] ? experts : params) += held.numels[k];
    if (params + experts > stage_params_max + stage_experts_max) {
      stage_params_max = params;
      stage_experts_max = experts;
    }
  }
  const double m = static_cast<double>(l.accum);
  TimeEstimate out;
  // Dense parameters are replicated (and ZeRO-sharded) over dp x ep, experts placed by expert
  // parallelism over dp.
  const double P_dense = static_cast<double>(stage_params_max), P_experts = static_cast<double>(stage_experts_max);
  const double P = P_dense + P_experts;
  const double dp = static_cast<double>(l.data_parallel());
  const double stepped = l.zero_stage > 0 ? P_dense / dp + P_experts / static_cast<double>(l.dp) : P;
  double adamw = 36.0 * stepped / mem_rate;
  double optimizer = adamw, accumulate = 0.0;
  // ZeRO-Offload: AdamW on the host (kOffloadHostGBs), the gradients down (one rank's every
  // micro-batch in the compute dtype; ZeRO's fp32 shard once) and the compute-dtype parameters
  // up over PCIe (kOffloadLinkGBs), not overlapped here.
  if (l.offload && !cluster_is_host(cluster)) {
    const double down = l.zero_stage == 0 ? static_cast<double>(E) * m : 4.0;
    adamw = 36.0 * stepped / (kOffloadHostGBs * 1e9);
    optimizer = adamw + (down + static_cast<double>(E)) * stepped / (kOffloadLinkGBs * 1e9);
  }
  // Mixed precision folds every micro-batch's gradients of the compute dtype into the f32 ones
  // (read E, read and write 4): 7.2 ms per micro-batch of GPT-2 small's 45M parameters in bf16
  // on a Zen 5 core, four times at m = 4 (train.profile_step). Offload folds on the host.
  const bool host_folds = l.offload && !cluster_is_host(cluster);
  // Sharded FSDP passes over the gradients its own way (Note [Gradient passes a micro-batch]).
  const std::optional<double> fsdp_bytes = fsdp_gradient_pass_bytes(
      run.convention, run.compute, static_cast<int>(l.zero_stage), l.data_parallel());
  if (fsdp_bytes && !host_folds)
    accumulate = (m * *fsdp_bytes * P + (m - 1.0) * 12.0 * stepped) / mem_rate;
  else if (run.mixed() && !host_folds)
    accumulate = m * (static_cast<double>(E) + 8.0) * P / mem_rate;
  // Without it, fp32 gradients accumulate in place: each micro-batch after the first adds its
  // gradient into the sum (read both, write one: 12 bytes an element), ZeRO 2-3 only this rank's
  // reduced part into its shard. On tiny-moe b1 m8 (one Zen 4 core) AccumulateGrad took 118 ms
  // of a 2.9 s step, uncounted before.
  else if (!run.mixed() && !host_folds && m > 1)
    accumulate = (m - 1.0) * 12.0 * (l.zero_stage >= 2 ? stepped : P) / mem_rate;
  // Under ZeRO-0 on several ranks the last micro-batch's backward copies each gradient into its
  // data-parallel bucket (read and write 4 bytes; data_parallel.cc), also where that group is one
  // rank: a dp1 tp2 step of tiny-moe on one Zen 4 host spent 12-16 ms a rank in those copies
  // (train.profile_step's dp.all_reduce, 80 calls).
  if (l.zero_stage == 0 && l.ranks() > 1 && run.convention.copies_into_buckets && !host_folds)
    accumulate += 8.0 * P / mem_rate;
  out.compute_s = m * stage_s + optimizer + accumulate;
  out.recompute_s = m * stage_re;
  out.parts = scaled(stage_parts, m);
  out.parts.optimizer = optimizer;
  out.parts.accumulate = accumulate;
  // The NVMe tier: its disk's time, little of it behind AdamW (Note [The tier's step time]).
  const DiskTime disk = disk_time(run, l, cluster, adamw);
  out.disk = disk.traffic;
  out.disk_s = disk.disk_s;
  out.exposed_disk_s = disk.exposed_s;
  // The pipeline as its schedule runs (Note [Simulated pipeline]): the bubble without the
  // messages, and what the messages add to it exposed.
  const LinkSpec& pp_link = cluster.link_for(l.ranks(), l.ranks());
  // One activation (or its gradient) between stages: split along the sequence under SP.
  const double pp_message_bytes = tokens * C * static_cast<double>(E) / (l.sequence_parallel ? tp : 1.0);
  double pp_message_s = pp_message_bytes / (pp_link.bandwidth_gbs * 1e9) + pp_link.latency_us * 1e-6;
  // Megatron's scatter/gather across nodes (Note [Framework conventions]): each tensor-parallel
  // rank sends its 1/tp of the activation on its own card, and the receivers all-gather it.
  if (run.convention.pipeline_scatter_gather && l.tp > 1 && !l.sequence_parallel &&
      cluster.crosses_nodes(l.ranks(), l.ranks()))
    pp_message_s = pp_message_bytes / tp / (pp_link.bandwidth_gbs * 1e9) + pp_link.latency_us * 1e-6 +
                   collective_seconds(Collective::kAllGather, pp_message_bytes, MeshGroup{l.tp, 1}, l.ranks(), cluster);
  double pp_exposed = 0.0;
  if (l.pp > 1) {
    PipelineCosts costs;
    for (int c = 0; c < pl.num_chunks(); ++c) {
      const bool last = c == pl.num_chunks() - 1;
      const auto [b, e] = pl.chunks[static_cast<size_t>(c)];
      double forward = last ? head_fwd : 0.0, backward = (last ? head_bwd : 0.0) + (c == 0 ? embedding_s : 0.0);
      for (int64_t k = b; k < e; ++k) {
        forward += fwd_of(k);
        backward += bwd_of(k);
      }
      costs.forward.push_back(forward);
      costs.backward.push_back(backward);
    }
    const std::string schedule = l.pipeline_schedule();
    const double ideal = simulate_pipeline(pl, schedule, static_cast<int>(l.accum), costs);
    const double link = pp_link.bandwidth_gbs * 1e9, alpha = pp_link.latency_us * 1e-6;
    costs.message_s = pp_message_s;
    if (s.tied_head_weight) {
      const double rows = static_cast<double>((run.model.vocab_size + l.tp - 1) / l.tp);
      costs.tied = true;
      costs.weight_s = rows * C * static_cast<double>(E) / link + alpha;
      costs.head_grad_s = rows * C * 4.0 / link + alpha;
    }
    const double with_messages = simulate_pipeline(pl, schedule, static_cast<int>(l.accum), costs);
    out.bubble_s = std::max(0.0, ideal - m * stage_s);
    pp_exposed = std::max(0.0, with_messages - ideal);
  }

  // Communication.
  // Each group priced by the links it crosses (Note [Collectives across nodes]).
  const int64_t ranks = l.ranks();
  const MeshGroup tp_group{l.tp, 1};
  // Data parallelism's collectives per group (Note [Overlapped data-parallel traffic] in
  // data_parallel_time.h): the gradients at the convention's bytes per element (4, or 2 under
  // grad_compression = "bf16"), the parameters gathered in the compute dtype.
  const Convention& conv = run.convention;
  DataParallelCollectives dpc;
  auto add_group = [&](double params, const MeshGroup& group) {
    if (group.size <= 1 || params <= 0.0) return;
    const Collective reduction = l.zero_stage == 0 ? Collective::kAllReduce : Collective::kReduceScatter;
    dpc.reduce_s += collective_seconds(reduction, conv.grad_comm_bytes * params, group, ranks, cluster);
    if (l.zero_stage > 0)
      dpc.gather_s += collective_seconds(Collective::kAllGather, static_cast<double>(E) * params, group, ranks, cluster);
  };
  // Dense parameters over dp x ep ranks tp apart, experts over dp ranks tp x ep apart.
  add_group(P_dense, MeshGroup{l.data_parallel(), l.tp});
  add_group(P_experts, MeshGroup{l.dp, l.tp * l.ep});
  MicroBatchPhases phases;
  phases.forward_s = stage_fwd;
  phases.backward_s = stage_s - stage_fwd;
  phases.micro_batches = m;
  phases.grad_buckets =
      run.bucket_bytes > 0 ? std::max(1.0, std::ceil(conv.grad_comm_bytes * P / static_cast<double>(run.bucket_bytes))) : 1.0;
  phases.parts = stage_blocks + 1.0;
  // Sharded FSDP reduce-scatters each wrapped part's gradients as that part's backward ends.
  if (fsdp_bytes) phases.grad_buckets = phases.parts;
  const DataParallelTime dp_time =
      data_parallel_time(static_cast<int>(l.zero_stage), dpc, phases, conv, cluster.device.comm_overlap);
  // Per block and micro-batch, tensor parallelism's all-reduces and expert parallelism's exchanges
  // alike: two in the forward, two in the backward, two more in a checkpointed rerun (they are
  // not matrix products, so "selective" keeps nothing of them).
  const double collectives_per_block = l.checkpointing == "none" ? 4.0 : 6.0;
  // Note [The time of a mixture of experts]: the rows' exchanges.
  double ep_s = 0.0;
  if (l.ep > 1 && stage_sparse > 0.0) {
    const LinkSpec& ep_link = cluster.link_for(l.tp * l.ep, l.ranks());
    const double k = static_cast<double>(l.ep - 1);
    const double bytes = tokens * static_cast<double>(s.experts_per_token) * C * static_cast<double>(E);
    // The busiest ep rank receives imbalance x the balanced rows (Note [Measured expert load]).
    ep_s =
        m * collectives_per_block * ep_link.all_to_all_factor *
        (stage_exchanges * k / static_cast<double>(l.ep) * bytes / (ep_link.bandwidth_gbs * 1e9) +
         stage_sparse * k * ep_link.latency_us * 1e-6);
  }
  double tp_s = 0.0, tp_syncs = 0.0;  // the all-reduces per micro-batch
  if (l.tp > 1) {
    double blocks = 0.0;
    for (int c = 0; c < pl.num_chunks(); ++c)
      if (pl.rank_of_chunk(c) == 0)
        blocks += static_cast<double>(pl.chunks[static_cast<size_t>(c)].second -
                                      pl.chunks[static_cast<size_t>(c)].first);
    const double block_ar = collective_seconds(Collective::kAllReduce, tokens * C * static_cast<double>(E), tp_group, ranks, cluster);
    tp_s = m * blocks * collectives_per_block * block_ar +
           m * 2.0 * block_ar;  // and the embedding's and the head's input's
    // The vocabulary-parallel loss (parallel/tp_collectives.cc): all-reduces of the rows' maxima
    // (tokens) and of their sums and target logits (2 tokens), f32.
    tp_s += m * (collective_seconds(Collective::kAllReduce, 4.0 * tokens, tp_group, ranks, cluster) +
                 collective_seconds(Collective::kAllReduce, 8.0 * tokens, tp_group, ranks, cluster));
    // The slowest stage's blocking collectives: its blocks' (under sequence parallelism each
    // all-reduce is an all-gather and a reduce-scatter, two waits) and, counted on it whatever
    // the stage, the embedding's, the head input's and the loss's two.
    tp_syncs = stage_blocks * collectives_per_block * (l.sequence_parallel ? 2.0 : 1.0) + 4.0;
  }
  // Note [The ranks' skew at a blocking collective]: each blocking collective of tensor and
  // expert parallelism waits for its group's slowest rank, the segment between two of them the
  // slowest stage's compute per micro-batch over their number.
  const double ep_syncs = l.ep > 1 ? collectives_per_block * stage_sparse : 0.0;
  double skew_s = 0.0;
  if (tp_syncs + ep_syncs > 0.0) {
    const double segment = stage_s / (tp_syncs + ep_syncs);
    skew_s = m * (skew_wait_s(cluster.device, static_cast<double>(l.tp), tp_syncs, segment) +
                  skew_wait_s(cluster.device, static_cast<double>(l.ep), ep_syncs, segment));
  }
  double pp_s = 0.0;
  if (l.pp > 1) {
    pp_s = 2.0 * m * static_cast<double>(l.virtual_stages) * pp_message_s;
  }
  out.comm_total_s = dp_time.total_s + tp_s + pp_s + ep_s;
  out.dp_exposed_s = dp_time.exposed_s;
  out.tp_s = tp_s;
  out.ep_s = ep_s;
  out.pp_exposed_s = pp_exposed;
  out.skew_s = skew_s;
  out.exposed_comm_s = dp_time.exposed_s + tp_s + pp_exposed + ep_s + skew_s;
  const double L = static_cast<double>(run.model.n_layer), Ls = static_cast<double>(s.sparse_blocks);
  const double tokens_step = static_cast<double>(run.tokens_per_step());
  const double dense_flops = static_cast<double>(models::matmul_flops_per_token(s.block_matmuls));
  const double sparse_flops = static_cast<double>(models::matmul_flops_per_token(s.sparse_block_matmuls)) + expert_mm;
  const double blocks_flops = (L - Ls) * dense_flops + Ls * sparse_flops;  // per token, forward
  out.model_flops = tokens_step * (3.0 * (blocks_flops + 2.0 * static_cast<double>(s.head_matmul.first * s.head_matmul.second)) +
                                   3.0 * L * 2.0 * T * attn_q);
  out.hardware_flops = out.model_flops;
  if (l.checkpointing == "full") out.hardware_flops += tokens_step * (blocks_flops + L * 2.0 * T * attn_q);
  else if (l.checkpointing == "selective") out.hardware_flops += tokens_step * Ls * expert_mm;
  return out;
}

}  // namespace trident::planner
