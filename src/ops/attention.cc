// Attention front ends: validation, layout canonicalization (unit-stride HS dim), output
// allocation and dtype dispatch to kernels/cpu/attention.h. Contract in ops/attention.h.
#include "ops/attention.h"

#include <cmath>
#include <type_traits>

#include "core/factory.h"
#include "core/views.h"
#include "kernels/cpu/attention.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

using kernels::cpu::AttentionShape;
using kernels::cpu::HeadsView;

// Checks q, k, v (and names them in errors); returns the problem's sizes.
AttentionShape check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                            std::optional<double> scale, int64_t window, const Documents* documents,
                            const char* what, bool fewer_queries = false) {
  check_floating(q, what);
  check_same_dtype(q, k, what);
  check_same_dtype(q, v, what);
  check_same_device(q, k, what);
  check_same_device(q, v, what);
  TRI_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, what,
            ": expected q (B, NH, T, HS) and k, v (B, NKV, T, HS), got q ", q.shape(), ", k ",
            k.shape(), ", v ", v.shape());
  TRI_CHECK(k.shape() == v.shape(), what, ": k ", k.shape(), " and v ", v.shape(),
            " must have the same shape (B, NKV, T, HS)");
  const int64_t B = q.size(0), NH = q.size(1), Tq = q.size(2), HS = q.size(3), NKV = k.size(1), T = k.size(2);
  TRI_CHECK(k.size(0) == B, what, ": q ", q.shape(), " and k ", k.shape(),
            " have different batch sizes (dim 0)");
  if (fewer_queries)
    TRI_CHECK(Tq <= T, what, ": q ", q.shape(), " has more queries than k ", k.shape(), " has keys (dim 2)");
  else
    TRI_CHECK(Tq == T, what, ": q ", q.shape(), " and k ", k.shape(),
              " have different sequence lengths (dim 2); queries and keys must have the same T");
  TRI_CHECK(k.size(3) == HS, what, ": q ", q.shape(), " and k ", k.shape(),
            " have different head sizes (dim 3)");
  TRI_CHECK(HS > 0, what, ": head size (dim 3) must be positive, got q ", q.shape());
  TRI_CHECK(NKV > 0 && NH % NKV == 0, what, ": the number of kv heads NKV=", NKV, " (k ",
            k.shape(), ") must divide the number of query heads NH=", NH, " (q ", q.shape(), ")");
  TRI_CHECK(!scale || std::isfinite(*scale), what, ": scale must be finite, got ", *scale);
  TRI_CHECK(window >= 0, what, ": the sliding window must be >= 1 keys (0: none), got ", window);
  TRI_CHECK(window == 0 || causal, what, ": a sliding window (", window,
            " keys) needs the causal mask; causal=false was given");
  AttentionShape s{B, NH, NKV, T, HS, causal, scale ? *scale : 1.0 / std::sqrt(static_cast<double>(HS)),
                   window >= T ? 0 : window};
  if (documents != nullptr) {
    TRI_CHECK(causal, what, ": document masks need the causal mask; causal=false was given");
    for (const Tensor* bound : {&documents->start, &documents->end}) {
      TRI_CHECK(bound->shape() == Shape({B, T}) && bound->dtype() == DType::kI64 && bound->is_contiguous(), what,
                ": the documents' bounds must be contiguous (B, T) = (", B, ", ", T, ") i64 (ops/documents.h), got ",
                bound->str());
      check_same_device(q, *bound, what);
    }
    s.doc_start = documents->start.data_ptr<int64_t>();
    s.doc_end = documents->end.data_ptr<int64_t>();
  }
  s.Tq = Tq;
  return s;
}

// The kernels need the HS dim unit-stride; any other strides are fine.
Tensor unit_stride_rows(const Tensor& t) {
  return t.stride(3) == 1 || t.size(3) == 1 ? t : core::contiguous(t);
}

template <class T>
HeadsView<T> heads(const Tensor& t) {
  return {t.data_ptr<std::remove_const_t<T>>(), t.stride(0), t.stride(1), t.stride(2)};
}

DType lse_dtype(DType dtype) { return dtype == DType::kF64 ? DType::kF64 : DType::kF32; }

kernels::DeviceHeads device_heads(const Tensor& t) { return {t.raw_data(), t.stride(0), t.stride(1), t.stride(2)}; }

kernels::DeviceAttentionShape device_shape(const AttentionShape& s) {
  return {s.B, s.NH, s.NKV, s.T, s.HS, s.causal, s.scale, s.window, s.doc_start, s.doc_end};
}

// An uninitialized (B, H, T, HS) tensor like x, stored (B, T, H, HS) when tokens_first.
Tensor empty_heads(const Tensor& x, bool tokens_first) {
  if (!tokens_first) return empty(x.shape(), x.dtype(), x.device());
  return views::transpose(empty({x.size(0), x.size(2), x.size(1), x.size(3)}, x.dtype(), x.device()), 1, 2);
}

// A gradient in its input's memory order: tokens-first when the input steps over heads
// faster than over time (q, k, v split from one projection, as GPT-2's are), so it flows
// back through the model's transpose and view to the projection without a copy.
Tensor grad_like(const Tensor& x) { return empty_heads(x, x.strides()[1] < x.strides()[2]); }

}  // namespace

AttentionForward attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                           bool causal, std::optional<double> scale,
                           AttentionOutputLayout layout, int64_t window, const Documents* documents) {
  const AttentionShape s = check_inputs(q_in, k_in, v_in, causal, scale, window, documents, "attention");
  const Tensor q = unit_stride_rows(q_in), k = unit_stride_rows(k_in), v = unit_stride_rows(v_in);
  // See Note [Attention output layout].
  const Tensor out = empty_heads(q, layout == AttentionOutputLayout::kTokensFirst);
  Tensor lse = empty({s.B, s.NH, s.T}, lse_dtype(q.dtype()), q.device());
  if (out.numel() == 0) return {out, lse};
  if (on_device(q)) {
    device_kernels_of(q).attention_forward(q.dtype(), device_heads(out), lse.raw_data(), device_heads(q),
                                           device_heads(k), device_heads(v), device_shape(s));
    return {out, lse};
  }
  dispatch_floating(q.dtype(), "attention", [&]<class T>() {
    kernels::cpu::attention_forward<T>(heads<T>(out), lse.data_ptr<acc_t<T>>(), heads<const T>(q),
                                       heads<const T>(k), heads<const T>(v), s);
  });
  return {out, lse};
}

AttentionGrads attention_backward(const Tensor& dout_in, const Tensor& q_in, const Tensor& k_in,
                                  const Tensor& v_in, const Tensor& out_in, const Tensor& lse,
                                  bool causal, std::optional<double> scale, int64_t window,
                                  const Documents* documents) {
  const char* what = "attention_backward";
  const AttentionShape s = check_inputs(q_in, k_in, v_in, causal, scale, window, documents, what);
  check_same_device(q_in, dout_in, what);
  check_same_device(q_in, out_in, what);
  check_same_device(q_in, lse, what);
  TRI_CHECK(dout_in.shape() == q_in.shape() && out_in.shape() == q_in.shape(), what,
            ": dout ", dout_in.shape(), " and out ", out_in.shape(), " must have q's shape ",
            q_in.shape());
  check_same_dtype(q_in, dout_in, what);
  check_same_dtype(q_in, out_in, what);
  TRI_CHECK(lse.shape() == Shape({s.B, s.NH, s.T}) && lse.dtype() == lse_dtype(q_in.dtype()) &&
                lse.is_contiguous(),
            what, ": lse must be the forward's contiguous (B, NH, T) = (", s.B, ", ", s.NH, ", ",
            s.T, ") ", lse_dtype(q_in.dtype()), " logsumexp, got ", lse.str());
  const Tensor q = unit_stride_rows(q_in), k = unit_stride_rows(k_in), v = unit_stride_rows(v_in);
  const Tensor dout = unit_stride_rows(dout_in), out = unit_stride_rows(out_in);
  AttentionGrads g{grad_like(q_in), grad_like(k_in), grad_like(v_in)};
  if (q.numel() == 0) {
    fill_(g.dk, 0.0);  // no query reads any key: zero gradients
    fill_(g.dv, 0.0);
    return g;
  }
  if (on_device(q)) {
    device_kernels_of(q).attention_backward(q.dtype(), device_heads(g.dq), device_heads(g.dk), device_heads(g.dv),
                                            device_heads(dout), device_heads(q), device_heads(k), device_heads(v),
                                            device_heads(out), lse.raw_data(), device_shape(s));
    return g;
  }
  dispatch_floating(q.dtype(), what, [&]<class T>() {
    kernels::cpu::attention_backward<T>(heads<T>(g.dq), heads<T>(g.dk), heads<T>(g.dv),
                                        heads<const T>(dout), heads<const T>(q), heads<const T>(k),
                                        heads<const T>(v), heads<const T>(out),
                                        lse.data_ptr<acc_t<T>>(), s);
  });
  return g;
}

namespace {

// The decoding forward for attention_decode's two forms: `paged` the pools' block table.
AttentionForward decode_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, AttentionShape s,
                                const Tensor* query_start, const KvBlocks* paged, AttentionOutputLayout layout,
                                const char* what) {
  TRI_CHECK(!on_device(q_in), what, ": decoding attention runs on the CPU only for now; q is on ", q_in.device());
  std::vector<int64_t> starts;
  if (query_start != nullptr) {
    TRI_CHECK(query_start->shape() == Shape({s.B}) && query_start->dtype() == DType::kI64 && !on_device(*query_start),
              what, ": query_start must be (B) = (", s.B, ") i64 on the host, got ", query_start->str());
    starts = to_vector<int64_t>(*query_start);
    for (int64_t b = 0; b < s.B; ++b)
      TRI_CHECK(starts[static_cast<size_t>(b)] >= 0 && starts[static_cast<size_t>(b)] + s.Tq <= s.T, what,
                ": row ", b, "'s queries start at key position ", starts[static_cast<size_t>(b)], ": its ", s.Tq,
                " queries must lie within the ", s.T, " keys");
    s.query_start = starts.data();
  }
  const Tensor q = unit_stride_rows(q_in), k = unit_stride_rows(k_in), v = unit_stride_rows(v_in);
  const Tensor out = empty_heads(q, layout == AttentionOutputLayout::kTokensFirst);
  Tensor lse = empty({s.B, s.NH, s.Tq}, lse_dtype(q.dtype()), q.device());
  if (out.numel() == 0) return {out, lse};
  dispatch_floating(q.dtype(), what, [&]<class T>() {
    HeadsView<const T> kh = heads<const T>(k), vh = heads<const T>(v);
    if (paged != nullptr)
      for (HeadsView<const T>* view : {&kh, &vh}) {
        view->block_table = paged->table.data_ptr<int64_t>();
        view->blocks_per_row = paged->table.size(1);
        view->block_tokens = k.size(2);
      }
    kernels::cpu::attention_forward<T>(heads<T>(out), lse.data_ptr<acc_t<T>>(), heads<const T>(q), kh, vh, s);
  });
  return {out, lse};
}

}  // namespace

AttentionForward attention_decode(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* query_start,
                                  int64_t window, std::optional<double> scale, AttentionOutputLayout layout) {
  const char* what = "attention_decode";
  const AttentionShape s = check_inputs(q, k, v, /*causal=*/true, scale, window, nullptr, what, true);
  return decode_forward(q, k, v, s, query_start, nullptr, layout, what);
}

AttentionForward attention_decode(const Tensor& q, const Tensor& k_blocks, const Tensor& v_blocks, const KvBlocks& blocks,
                                  const Tensor& query_start, int64_t window, std::optional<double> scale,
                                  AttentionOutputLayout layout) {
  const char* what = "attention_decode (paged)";
  TRI_CHECK(k_blocks.dim() == 4 && k_blocks.shape() == v_blocks.shape(), what,
            ": the key and value pools must be (blocks, NKV, block_tokens, HS) alike, got k ", k_blocks.shape(), ", v ",
            v_blocks.shape());
  const int64_t pool = k_blocks.size(0), block_tokens = k_blocks.size(2), B = q.dim() == 4 ? q.size(0) : -1;
  TRI_CHECK(block_tokens > 0 && block_tokens % kernels::cpu::kAttentionKeyTile == 0, what, ": blocks of ",
            block_tokens, " tokens: allowed: a multiple of ", kernels::cpu::kAttentionKeyTile, " (one key tile)");
  TRI_CHECK(blocks.table.dim() == 2 && blocks.table.size(0) == B && blocks.table.dtype() == DType::kI64 &&
                blocks.table.is_contiguous() && !on_device(blocks.table),
            what, ": the block table must be contiguous (B = ", B, ", blocks per row) i64 on the host, got ",
            blocks.table.str());
  TRI_CHECK(blocks.T >= 1 && blocks.T <= blocks.table.size(1) * block_tokens, what, ": ", blocks.T, " keys per row do not fit ",
            blocks.table.size(1), " blocks of ", block_tokens, " tokens");
  // check_inputs sees the pools as one row of (B, NKV, T, HS) would look: only their sizes matter there.
  const Tensor k_shape = views::expand(views::narrow(views::narrow(k_blocks, 0, 0, 1), 2, 0, 1),
                                       {B, k_blocks.size(1), blocks.T, k_blocks.size(3)});
  AttentionShape s = check_inputs(q, k_shape, k_shape, /*causal=*/true, scale, window, nullptr, what, true);
  check_same_dtype(q, v_blocks, what);
  // Every block a row reads (from its first query's first visited tile to its last query's) is in the pool.
  const std::vector<int64_t> table = to_vector<int64_t>(blocks.table), starts = to_vector<int64_t>(query_start);
  TRI_CHECK(static_cast<int64_t>(starts.size()) == B, what, ": query_start must be (B) = (", B, "), got ",
            query_start.str());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = starts[static_cast<size_t>(b)];
    if (first < 0 || first + s.Tq > s.T) continue;  // decode_forward names it
    for (int64_t t = s.first_key(b, first) / block_tokens * block_tokens; t < first + s.Tq; t += block_tokens) {
      const int64_t block = table[static_cast<size_t>(b * blocks.table.size(1) + t / block_tokens)];
      TRI_CHECK(block >= 0 && block < pool, what, ": row ", b, " reads keys ", t, " to ", t + block_tokens - 1,
                " from block ", block, ", not one of the pool's ", pool);
    }
  }
  return decode_forward(q, k_blocks, v_blocks, s, &query_start, &blocks, layout, what);
}

}  // namespace trident::ops
