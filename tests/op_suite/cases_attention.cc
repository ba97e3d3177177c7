// Op-suite cases: fused scaled-dot-product attention. Sizes straddle the kernels' 64-row
// tiles (T = 1, 37, 67, 130), head sizes 8/12/16/64 (12 is not a multiple of the 16-column
// padding), causal and not, grouped-query (NKV = 2 and 1), a scale override, and inputs that
// are strided views: slices of a permuted (B, T, 3, NH, HS) projection, a transposed layout
// whose HS dim is not unit-stride, and k/v broadcast over the batch. Sliding windows (Mistral):
// one key, shorter than a tile, a tile exactly, one past it, across three tiles, with GQA and
// MQA, and one as long as the sequence (the plain causal mask).
//
// Thread-count check: cases with a single (batch, kv head) pair run the backward's fused
// schedule with 1 thread and the two-pass schedule with 2, so the bitwise comparison also
// checks that the two schedules agree (Note [Backward schedules] in
// kernels/cpu/attention_backward.cc).
#include "autograd/functions.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/shape.h"
#include "op_case.h"

namespace trident::testing {

namespace {
const std::vector<DType> kAttentionTypes = {DType::kF32, DType::kBF16, DType::kF16};

struct Sizes {
  int64_t B, NH, NKV, T, HS;
};

// Forward: a score sums HS products, then the softmax and P V sum over T keys. Backward:
// dP sums HS products, dq sums over T keys, dk and dv over the T queries of each of the
// NH / NKV query heads sharing the kv head. The longest chain is the backward's.
// A sliding window shortens each sum over keys and queries to `window` terms.
int64_t reduction_length(const Sizes& s, int64_t window = 0) {
  return s.NH / s.NKV * (window > 0 ? std::min(window, s.T) : s.T) + s.HS;
}

// qk_grad false: q and k get no gradient check (see the T = 1 case). window > 0: a sliding window.
void attention_case(const std::string& name, const Sizes& s, bool causal,
                    std::optional<double> scale = std::nullopt, bool qk_grad = true, int64_t window = 0) {
  InputSpec q = normal({s.B, s.NH, s.T, s.HS}), k = normal({s.B, s.NKV, s.T, s.HS});
  if (!qk_grad) {
    q.no_grad();
    k.no_grad();
  }
  add_case(OpCase("attention", name)
               .input(q)
               .input(k)
               .input(normal({s.B, s.NKV, s.T, s.HS}))
               .forward([causal, scale, window](const TensorList& x) {
                 return TensorList{trident::attention(x[0], x[1], x[2], causal, scale,
                                                      AttentionOutputLayout::kHeadsFirst, window)};
               })
               .reference([causal, scale, window](const Arrays& x) {
                 return Arrays{reference::attention(x[0], x[1], x[2], causal, scale, window)};
               })
               .reduction_length(reduction_length(s, window))
               .dtypes(kAttentionTypes));
}

// q, k, v of a (B, T, 3, NH, HS) projection as (B, NH, T, HS) arrays.
Arrays split_qkv(const reference::Array& x) {
  const int64_t B = x.shape[0], T = x.shape[1], NH = x.shape[3], HS = x.shape[4];
  Arrays qkv;
  for (int64_t i = 0; i < 3; ++i) {
    const reference::Array slice = reference::reshape(reference::narrow(x, 2, i, 1), Shape{B, T, NH, HS});
    qkv.push_back(reference::transpose(slice, 1, 2));
  }
  return qkv;
}

}  // namespace

TRI_OP_CASES(attention_cases) {
  attention_case("causal T=37 HS=16", {2, 3, 3, 37, 16}, true);
  attention_case("non-causal T=37 HS=16", {2, 3, 3, 37, 16}, false);
  // One key per query: out = v, and the gradients of q and k are identically zero, which a
  // tolerance relative to the reference's size cannot check (finite differences of zero
  // give roundoff noise, and rounding noise of dP - D makes f32's ~1e-8). Only dv is checked.
  attention_case("causal T=1", {2, 2, 2, 1, 8}, true, std::nullopt, /*qk_grad=*/false);
  attention_case("causal T=130 (3 tiles) HS=8", {1, 2, 2, 130, 8}, true);
  attention_case("non-causal T=130 (3 tiles) HS=8", {1, 2, 2, 130, 8}, false);
  attention_case("causal T=67 HS=64", {1, 2, 2, 67, 64}, true);
  attention_case("causal HS=12 (padded columns)", {2, 2, 2, 37, 12}, true);
  attention_case("GQA NH=4 NKV=2", {2, 4, 2, 37, 16}, true);
  attention_case("GQA NH=4 NKV=2 non-causal", {1, 4, 2, 70, 8}, false);
  attention_case("MQA NH=4 NKV=1, one kv head, 2 tiles", {1, 4, 1, 67, 8}, true);
  attention_case("one head, 3 tiles", {1, 1, 1, 130, 16}, true);
  attention_case("scale override", {2, 2, 2, 37, 16}, true, 0.3);
  // Scales well above 1/sqrt(HS) make the softmax nearly one-hot, and then dS = P (dP - D)
  // is a small difference of O(|dP|) numbers: the gradient is ill-conditioned for any f32
  // implementation (a plain f32 one that materializes the scores errs up to 2.3x the
  // tolerance at scale 1.7, HS = 8, over 20 seeds; this kernel likewise). 0.5 is 1.4x the
  // default 1/sqrt(8): the override is exercised and the problem stays well-conditioned.
  attention_case("scale override non-causal", {1, 2, 1, 67, 8}, false, 0.5);
  // The op takes any finite scale. bf16 tiles fold a positive one into the softmax's exponent
  // after the causal mask's -inf (Note [bf16 forward]); a negative or zero one must be applied
  // before it (-inf * 0 is NaN), so both are cases.
  attention_case("negative scale", {1, 2, 2, 70, 16}, true, -0.3);
  attention_case("zero scale (uniform over visible keys)", {1, 2, 2, 70, 16}, true, 0.0);

  // Sliding windows. A window of one key is T = 1's case at every position: only dv is checked.
  attention_case("window 1 (each query sees itself)", {2, 2, 2, 70, 8}, true, std::nullopt, false, 1);
  attention_case("window 5 T=37", {2, 3, 3, 37, 16}, true, std::nullopt, true, 5);
  attention_case("window 64 (one tile) T=130", {1, 2, 2, 130, 8}, true, std::nullopt, true, 64);
  attention_case("window 65 T=130 HS=16", {1, 2, 2, 130, 16}, true, std::nullopt, true, 65);
  attention_case("window 30 over 3 tiles, GQA NH=4 NKV=2", {1, 4, 2, 150, 8}, true, std::nullopt, true, 30);
  attention_case("window 50 MQA, one kv head", {1, 4, 1, 140, 8}, true, std::nullopt, true, 50);
  attention_case("window 100 >= T=37 (causal)", {1, 2, 2, 37, 16}, true, std::nullopt, true, 100);

  // q, k, v sliced out of one (B, T, 3, NH, HS) projection and permuted to (B, NH, T, HS):
  // strided views (time stride 3 * NH * HS) that the kernels read without a copy.
  for (bool causal : {true, false}) {
    const int64_t B = 2, T = 67, NH = 2, HS = 16;
    add_case(OpCase("attention", causal ? "q, k, v slices of a projection" : "slices of a projection, non-causal")
                 .input(normal({B, T, 3, NH, HS}))
                 .forward([causal, B, T, NH, HS](const TensorList& x) {
                   TensorList qkv;
                   for (int64_t i = 0; i < 3; ++i)
                     qkv.push_back(trident::transpose(trident::squeeze(trident::narrow(x[0], 2, i, 1), 2), 1, 2));
                   return TensorList{trident::attention(qkv[0], qkv[1], qkv[2], causal)};
                 })
                 .reference([causal](const Arrays& x) {
                   const Arrays qkv = split_qkv(x[0]);
                   return Arrays{reference::attention(qkv[0], qkv[1], qkv[2], causal)};
                 })
                 .reduction_length(reduction_length({B, NH, NH, T, HS}))
                 .dtypes(kAttentionTypes));
  }

  // HS not unit-stride (stored transposed): the front end makes such inputs contiguous.
  {
    const Sizes s{1, 2, 2, 37, 8};
    add_case(OpCase("attention", "transposed storage (HS not unit-stride)")
                 .input(normal({s.B, s.NH, s.T, s.HS}).transposed())
                 .input(normal({s.B, s.NKV, s.T, s.HS}).transposed())
                 .input(normal({s.B, s.NKV, s.T, s.HS}))
                 .forward([](const TensorList& x) { return TensorList{trident::attention(x[0], x[1], x[2])}; })
                 .reference([](const Arrays& x) { return Arrays{reference::attention(x[0], x[1], x[2], true)}; })
                 .reduction_length(reduction_length(s))
                 .dtypes(kAttentionTypes));
  }

  // k and v shared by every sequence of the batch (batch stride 0).
  {
    const Sizes s{3, 2, 1, 37, 8};
    add_case(OpCase("attention", "k, v broadcast over the batch")
                 .input(normal({s.B, s.NH, s.T, s.HS}))
                 .input(normal({1, s.NKV, s.T, s.HS}).broadcast(s.B))
                 .input(normal({1, s.NKV, s.T, s.HS}).broadcast(s.B))
                 .forward([](const TensorList& x) { return TensorList{trident::attention(x[0], x[1], x[2])}; })
                 .reference([](const Arrays& x) { return Arrays{reference::attention(x[0], x[1], x[2], true)}; })
                 .reduction_length(reduction_length(s))
                 .dtypes(kAttentionTypes));
  }

  // The tokens-first output layout, followed by what a transformer does next: merge the
  // heads into (B, T, C), a free view in this layout.
  {
    const Sizes s{2, 3, 3, 67, 8};
    add_case(OpCase("attention", "tokens-first output, heads merged")
                 .input(normal({s.B, s.NH, s.T, s.HS}))
                 .input(normal({s.B, s.NKV, s.T, s.HS}))
                 .input(normal({s.B, s.NKV, s.T, s.HS}))
                 .forward([s](const TensorList& x) {
                   const Tensor out = trident::attention(x[0], x[1], x[2], true, std::nullopt,
                                                         AttentionOutputLayout::kTokensFirst);
                   return TensorList{trident::view(trident::transpose(out, 1, 2), {s.B, s.T, s.NH * s.HS})};
                 })
                 .reference([s](const Arrays& x) {
                   const reference::Array out = reference::attention(x[0], x[1], x[2], true);
                   return Arrays{reference::reshape(reference::transpose(out, 1, 2), Shape{s.B, s.T, s.NH * s.HS})};
                 })
                 .reduction_length(reduction_length(s))
                 .dtypes(kAttentionTypes));
  }
}

}  // namespace trident::testing
