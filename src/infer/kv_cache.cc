#include "infer/kv_cache.h"

#include <algorithm>

#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"

namespace trident::infer {

KvCache::KvCache(const KvCacheShape& shape, int64_t slots, int64_t capacity)
    : shape_(shape), capacity_(capacity), lengths_(static_cast<size_t>(slots), 0),
      positions_(zeros({0, 0}, DType::kI64)), query_start_(zeros({0}, DType::kI64)) {
  TRI_CHECK(slots >= 1 && capacity >= 1, "KV cache: needs at least one slot of one token, got ", slots, " slots of ",
            capacity);
  for (int64_t l = 0; l < shape.layers; ++l) {
    keys_.push_back(zeros({slots, shape.kv_heads, capacity, shape.head_size}, shape.dtype, shape.device));
    values_.push_back(zeros({slots, shape.kv_heads, capacity, shape.head_size}, shape.dtype, shape.device));
  }
}

int64_t KvCache::bytes() const {
  int64_t n = 0;
  for (const Tensor& t : keys_) n += 2 * t.numel() * static_cast<int64_t>(element_size(t.dtype()));
  return n;
}

void KvCache::begin_step(int64_t first, int64_t rows, int64_t new_tokens) {
  TRI_CHECK(first >= 0 && rows >= 1 && first + rows <= slots() && new_tokens >= 1, "KV cache: step over slots [",
            first, ", ", first + rows, ") with ", new_tokens, " new tokens, of ", slots(), " slots");
  std::vector<int64_t> starts, positions;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t len = lengths_[static_cast<size_t>(first + r)];
    TRI_CHECK(len + new_tokens <= capacity_, "KV cache: slot ", first + r, " holds ", len, " tokens; ", new_tokens,
              " more pass its capacity of ", capacity_);
    starts.push_back(len);
    for (int64_t t = 0; t < new_tokens; ++t) positions.push_back(len + t);
  }
  first_ = first;
  rows_ = rows;
  new_tokens_ = new_tokens;
  query_start_ = from_vector(starts, {rows});
  positions_ = core::to_device(from_vector(positions, {rows, new_tokens}), shape_.device);
}

void KvCache::end_step() {
  for (int64_t r = 0; r < rows_; ++r) lengths_[static_cast<size_t>(first_ + r)] += new_tokens_;
  rows_ = 0;
}

void KvCache::reset(int64_t slot) { lengths_.at(static_cast<size_t>(slot)) = 0; }

void KvCache::move(int64_t from, int64_t to) {
  if (from == to) return;
  const int64_t n = length(from);
  for (std::vector<Tensor>* store : {&keys_, &values_})
    for (const Tensor& t : *store)
      core::copy_(views::narrow(views::narrow(t, 0, to, 1), 2, 0, n), views::narrow(views::narrow(t, 0, from, 1), 2, 0, n));
  lengths_[static_cast<size_t>(to)] = n;
  lengths_[static_cast<size_t>(from)] = 0;
}

std::pair<Tensor, Tensor> KvCache::append(int64_t layer, const Tensor& k, const Tensor& v) {
  TRI_CHECK(rows_ > 0, "KV cache: append outside a step (begin_step first)");
  TRI_CHECK(layer >= 0 && layer < shape_.layers, "KV cache: layer ", layer, " of ", shape_.layers);
  const Shape want{rows_, new_tokens_, shape_.kv_heads, shape_.head_size};
  TRI_CHECK(k.shape() == want && v.shape() == want, "KV cache: layer ", layer, "'s new keys ", k.shape(),
            " and values ", v.shape(), " must be (rows, new tokens, kv heads, head size) = ", want);
  int64_t longest = 0;
  for (int64_t r = 0; r < rows_; ++r) {
    const int64_t len = lengths_[static_cast<size_t>(first_ + r)];
    longest = std::max(longest, len + new_tokens_);
    for (auto [store, src] : {std::pair{&keys_, &k}, std::pair{&values_, &v}}) {
      const Tensor dst = views::narrow(views::select((*store)[static_cast<size_t>(layer)], 0, first_ + r), 1, len, new_tokens_);
      core::copy_(dst, views::transpose(views::select(*src, 0, r), 0, 1));  // (NKV, Tq, HS)
    }
  }
  auto step_view = [&](const Tensor& t) { return views::narrow(views::narrow(t, 0, first_, rows_), 2, 0, longest); };
  return {step_view(keys_[static_cast<size_t>(layer)]), step_view(values_[static_cast<size_t>(layer)])};
}

}  // namespace trident::infer
