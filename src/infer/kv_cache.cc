#include "infer/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "core/views.h"
#include "kernels/cpu/attention.h"
#include "ops/attention.h"

namespace trident::infer {
namespace {

static_assert(KvCache::kBlockTokens % kernels::cpu::kAttentionKeyTile == 0, "a block holds whole key tiles");

int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }

}  // namespace

KvCache::KvCache(const KvCacheShape& shape, int64_t slots, int64_t capacity, int64_t pool_tokens, int64_t window)
    : shape_(shape), capacity_(capacity), window_(window),
      table_(full({std::max<int64_t>(slots, 1), ceil_div(std::max<int64_t>(capacity, 1), kBlockTokens)}, -1.0, DType::kI64)),
      lengths_(static_cast<size_t>(std::max<int64_t>(slots, 0)), 0), reserved_(lengths_.size(), 0),
      held_(lengths_.size(), 0), positions_(zeros({0, 0}, DType::kI64)),
      query_start_(zeros({0}, DType::kI64)) {
  TRI_CHECK(slots >= 1 && capacity >= 1, "KV cache: needs at least one slot of one token, got ", slots, " slots of ",
            capacity);
  TRI_CHECK(window >= 0, "KV cache: sliding window ", window, ": allowed: >= 0 (0: none)");
  TRI_CHECK(pool_tokens >= 0, "KV cache: a pool of ", pool_tokens, " tokens: allowed: >= 0 (0: every slot's longest)");
  TRI_CHECK(shape.device.is_cpu(), "KV cache: generation runs on the CPU only for now; the model is on ", shape.device);
  blocks_per_row_ = ceil_div(capacity, kBlockTokens);
  blocks_ = pool_tokens > 0 ? ceil_div(pool_tokens, kBlockTokens) : slots * blocks_for(capacity, capacity);
  for (int64_t l = 0; l < shape.layers; ++l) {
    keys_.push_back(zeros({blocks_, shape.kv_heads, kBlockTokens, shape.head_size}, shape.dtype, shape.device));
    values_.push_back(zeros({blocks_, shape.kv_heads, kBlockTokens, shape.head_size}, shape.dtype, shape.device));
  }
  for (int64_t b = blocks_; b-- > 0;) free_.push_back(b);  // handed out from block 0 up
}

int64_t KvCache::bytes_per_token() const {
  return 2 * shape_.layers * shape_.kv_heads * shape_.head_size * static_cast<int64_t>(element_size(shape_.dtype));
}

int64_t KvCache::bytes() const { return blocks_ * kBlockTokens * bytes_per_token(); }

int64_t& KvCache::table(int64_t slot, int64_t i) { return table_.data_ptr<int64_t>()[slot * blocks_per_row_ + i]; }

int64_t KvCache::blocks_for(int64_t tokens, int64_t first_step) const {
  const int64_t all = ceil_div(tokens, kBlockTokens);
  if (window_ == 0) return all;
  // A window of W keys spans at most ceil((W - 1) / kBlockTokens) + 1 blocks; the first step
  // writes all of its tokens before any is dropped.
  return std::min(all, std::max(ceil_div(first_step, kBlockTokens), ceil_div(window_ - 1, kBlockTokens) + 1));
}

bool KvCache::reserve(int64_t slot, int64_t tokens, int64_t first_step) {
  TRI_CHECK(slot >= 0 && slot < slots() && held_[static_cast<size_t>(slot)] == 0 && reserved_[static_cast<size_t>(slot)] == 0,
            "KV cache: slot ", slot, " is not an empty slot of ", slots());
  TRI_CHECK(tokens >= first_step && tokens <= capacity_ && first_step >= 1, "KV cache: a sequence of ", tokens,
            " positions whose first step reads ", first_step, ": allowed: 1 <= first step <= positions <= ", capacity_);
  const int64_t need = blocks_for(tokens, first_step);
  if (reserved_total_ + need > blocks_) return false;
  reserved_[static_cast<size_t>(slot)] = need;
  reserved_total_ += need;
  return true;
}

void KvCache::drop_before(int64_t slot, int64_t first_key) {
  for (int64_t i = 0; (i + 1) * kBlockTokens <= first_key; ++i) {
    int64_t& block = table(slot, i);
    if (block < 0) continue;
    free_.push_back(block);
    block = -1;
    --held_[static_cast<size_t>(slot)];
  }
}

void KvCache::begin_step(int64_t first, int64_t rows, int64_t new_tokens) {
  TRI_CHECK(first >= 0 && rows >= 1 && first + rows <= slots() && new_tokens >= 1, "KV cache: step over slots [",
            first, ", ", first + rows, ") with ", new_tokens, " new tokens, of ", slots(), " slots");
  std::vector<int64_t> starts, positions;
  longest_ = 0;
  for (int64_t slot = first; slot < first + rows; ++slot) {
    const auto s = static_cast<size_t>(slot);
    const int64_t len = lengths_[s], end = len + new_tokens;
    TRI_CHECK(end <= capacity_, "KV cache: slot ", slot, " holds ", len, " tokens; ", new_tokens,
              " more pass its capacity of ", capacity_);
    if (window_ > 0) drop_before(slot, len - window_ + 1);
    for (int64_t i = len / kBlockTokens; i * kBlockTokens < end; ++i) {
      if (table(slot, i) >= 0) continue;
      TRI_CHECK(held_[s] < reserved_[s] && !free_.empty(), "KV cache: slot ", slot, " needs block ", i,
                " (tokens ", i * kBlockTokens, " to ", (i + 1) * kBlockTokens - 1, ") past its reservation of ",
                reserved_[s], " blocks (", free_.size(), " of ", blocks_, " blocks free)");
      const int64_t block = free_.back();
      free_.pop_back();
      table(slot, i) = block;
      ++held_[s];
      // A reused block holds another sequence's keys: the kernel reads a block's unfilled rows
      // (masked, times 0), which must be finite, and one sequence never sees another's data.
      // Rows this step stores are left alone: zeroing whole blocks cost a batch-8 prefill 75 MB
      // of memset on one thread (5 ms of GPT-2 124M's 230).
      const int64_t lo = std::clamp(len - i * kBlockTokens, int64_t{0}, kBlockTokens);
      const int64_t hi = std::clamp(end - i * kBlockTokens, int64_t{0}, kBlockTokens);
      const size_t es = element_size(shape_.dtype), row_bytes = static_cast<size_t>(shape_.head_size) * es;
      for (std::vector<Tensor>* pool : {&keys_, &values_})
        for (const Tensor& t : *pool)
          for (int64_t h = 0; h < shape_.kv_heads; ++h) {
            char* rows = static_cast<char*>(t.raw_data()) +
                         static_cast<size_t>((block * shape_.kv_heads + h) * kBlockTokens) * row_bytes;
            std::memset(rows, 0, static_cast<size_t>(lo) * row_bytes);
            std::memset(rows + static_cast<size_t>(hi) * row_bytes, 0, static_cast<size_t>(kBlockTokens - hi) * row_bytes);
          }
    }
    starts.push_back(len);
    for (int64_t t = 0; t < new_tokens; ++t) positions.push_back(len + t);
    longest_ = std::max(longest_, end);
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

void KvCache::reset(int64_t slot) {
  const auto s = static_cast<size_t>(slot);
  TRI_CHECK(slot >= 0 && slot < slots(), "KV cache: slot ", slot, " of ", slots());
  drop_before(slot, blocks_per_row_ * kBlockTokens);
  lengths_[s] = 0;
  reserved_total_ -= reserved_[s];
  reserved_[s] = 0;
}

void KvCache::move(int64_t from, int64_t to) {
  if (from == to) return;
  TRI_CHECK(held_.at(static_cast<size_t>(to)) == 0 && reserved_.at(static_cast<size_t>(to)) == 0, "KV cache: slot ",
            to, " is not empty");
  for (int64_t i = 0; i < blocks_per_row_; ++i) std::swap(table(from, i), table(to, i));
  for (std::vector<int64_t>* v : {&lengths_, &reserved_, &held_})
    std::swap((*v)[static_cast<size_t>(from)], (*v)[static_cast<size_t>(to)]);
}

void KvCache::store(int64_t layer, const Tensor& k_in, const Tensor& v_in) {
  const Shape want{rows_, new_tokens_, shape_.kv_heads, shape_.head_size};
  TRI_CHECK(k_in.shape() == want && v_in.shape() == want, "KV cache: layer ", layer, "'s new keys ", k_in.shape(),
            " and values ", v_in.shape(), " must be (rows, new tokens, kv heads, head size) = ", want);
  TRI_CHECK(k_in.dtype() == shape_.dtype && v_in.dtype() == shape_.dtype, "KV cache: layer ", layer, "'s new keys are ",
            dtype_name(k_in.dtype()), " and values ", dtype_name(v_in.dtype()), "; the cache holds ", dtype_name(shape_.dtype));
  const size_t es = element_size(shape_.dtype), row_bytes = static_cast<size_t>(shape_.head_size) * es;
  for (auto [pool, src_in] : {std::pair{&keys_, &k_in}, std::pair{&values_, &v_in}}) {
    const Tensor src = src_in->stride(3) == 1 ? *src_in : core::contiguous(*src_in);
    auto* base = static_cast<char*>((*pool)[static_cast<size_t>(layer)].raw_data());
    const auto* from = static_cast<const char*>(src.raw_data());
    // Every (row, token) on the threads: a prefill stores megabytes per layer (GPT-2 124M at
    // batch 8 and 128 tokens: 6 MB, 8 of its 233 ms on one thread). A decode step's few
    // tokens stay on the calling thread.
    const int64_t token_bytes = shape_.kv_heads * static_cast<int64_t>(row_bytes);
    const int64_t s0 = src.stride(0), s1 = src.stride(1), s2 = src.stride(2);
    parallel_for(0, rows_ * new_tokens_, std::max<int64_t>(1, (int64_t{1} << 16) / token_bytes), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t r = i / new_tokens_, t = i % new_tokens_;
        const int64_t pos = lengths_[static_cast<size_t>(first_ + r)] + t;
        const int64_t block = table(first_ + r, pos / kBlockTokens);
        for (int64_t h = 0; h < shape_.kv_heads; ++h) {
          const int64_t at = ((block * shape_.kv_heads + h) * kBlockTokens + pos % kBlockTokens) * shape_.head_size;
          const int64_t in = r * s0 + t * s1 + h * s2;
          std::memcpy(base + static_cast<size_t>(at) * es, from + static_cast<size_t>(in) * es, row_bytes);
        }
      }
    });
  }
}

Tensor KvCache::attend(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v, int64_t window) {
  TRI_CHECK(rows_ > 0, "KV cache: attend outside a step (begin_step first)");
  TRI_CHECK(layer >= 0 && layer < shape_.layers, "KV cache: layer ", layer, " of ", shape_.layers);
  TRI_CHECK(window == window_, "KV cache: layer ", layer, " attends with a sliding window of ", window,
            " keys, but the cache keeps ", window_ == 0 ? std::string("every key") : std::to_string(window_) + " keys");
  // Timed as the autograd ops' forwards are (the cache calls the op itself), so a profile of
  // decoding shows its attention.
  profiler::ProfileScope scope("attention_decode", profiler::Phase::kForward);
  store(layer, k, v);
  const ops::KvBlocks blocks{views::narrow(table_, 0, first_, rows_), longest_};
  return ops::attention_decode(q, keys_[static_cast<size_t>(layer)], values_[static_cast<size_t>(layer)], blocks,
                               query_start_, window, std::nullopt, ops::AttentionOutputLayout::kTokensFirst)
      .out;
}

}  // namespace trident::infer
