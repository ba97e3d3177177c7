#include "comm/ring_schedule.h"

#include <algorithm>

#include "core/check.h"
#include "core/half.h"

namespace trident::comm {
namespace {

int mod(int a, int q) { return ((a % q) + q) % q; }

Span block(const std::vector<int64_t>& offsets, int i) {
  return {offsets[static_cast<size_t>(i)], offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)]};
}

// This rank's host and position on it, and the two rings through it: the ranks of its host
// (in rank order) and the ranks at its position on every host (in host order).
struct Rings {
  int host = 0, local = 0;
  std::vector<int> intra, inter;
};

Rings rings_of(const HostLayout& layout, int rank) {
  const int per_host = layout.ranks_per_host();
  TRI_CHECK(per_host > 0, "hierarchical collectives need the same number of ranks on every host; this communicator has ",
            layout.str());
  Rings r;
  r.host = layout.host_of[static_cast<size_t>(rank)];
  r.intra = layout.ranks_on(r.host);
  r.local = static_cast<int>(std::find(r.intra.begin(), r.intra.end(), rank) - r.intra.begin());
  for (int h = 0; h < layout.num_hosts(); ++h) r.inter.push_back(layout.ranks_on(h)[static_cast<size_t>(r.local)]);
  return r;
}

std::vector<int> all_ranks(const HostLayout& layout) {
  std::vector<int> ring(layout.host_of.size());
  for (size_t i = 0; i < ring.size(); ++i) ring[i] = static_cast<int>(i);
  return ring;
}

// Hierarchical pays only with several hosts and several ranks on a host.
bool use_hierarchy(const HostLayout& layout, bool hierarchical) {
  return hierarchical && layout.num_hosts() > 1 && static_cast<int>(layout.host_of.size()) > layout.num_hosts();
}

std::vector<int64_t> strided_offsets(int64_t begin, int64_t stride, int parts) {
  std::vector<int64_t> o(static_cast<size_t>(parts) + 1);
  for (int i = 0; i <= parts; ++i) o[static_cast<size_t>(i)] = begin + i * stride;
  return o;
}

template <class T, class Acc>
void reduce_typed(void* dst, const void* src, int64_t n, ReduceOp op) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (int64_t i = 0; i < n; ++i) {
    const Acc a = static_cast<Acc>(d[i]), b = static_cast<Acc>(s[i]);
    d[i] = T(op == ReduceOp::kSum ? a + b : op == ReduceOp::kMax ? std::max(a, b) : std::min(a, b));
  }
}

}  // namespace

void reduce_into(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF32: return reduce_typed<float, float>(dst, src, n, op);
    case DType::kF64: return reduce_typed<double, double>(dst, src, n, op);
    case DType::kBF16: return reduce_typed<bf16, float>(dst, src, n, op);
    case DType::kF16: return reduce_typed<f16, float>(dst, src, n, op);
    case DType::kI32: return reduce_typed<int32_t, int32_t>(dst, src, n, op);
    case DType::kI64: return reduce_typed<int64_t, int64_t>(dst, src, n, op);
    case DType::kU16: break;
  }
  TRI_CHECK(false, "reductions of ", dtype_name(dtype), " are not supported");
}

std::vector<int64_t> even_offsets(int64_t begin, int64_t n, int parts) {
  std::vector<int64_t> o(static_cast<size_t>(parts) + 1);
  for (int i = 0; i <= parts; ++i) o[static_cast<size_t>(i)] = begin + n * i / parts;
  return o;
}

void ring_reduce_scatter(RingSchedule& s, const std::vector<int>& ring, int me, const std::vector<int64_t>& offsets,
                         const std::string& phase) {
  const int q = static_cast<int>(ring.size());
  // Step k: block me-k-1 (holding k+1 contributions) goes on; block me-k-2 comes in and is
  // reduced into ours. After q-1 steps block me holds all q.
  for (int k = 0; k + 1 < q; ++k) {
    RingStep step{ring[static_cast<size_t>(mod(me + 1, q))], block(offsets, mod(me - k - 1, q)),
                  ring[static_cast<size_t>(mod(me - 1, q))], block(offsets, mod(me - k - 2, q)), true, phase};
    s.max_reduce_count = std::max(s.max_reduce_count, step.recv.count);
    s.steps.push_back(step);
  }
}

void ring_all_gather(RingSchedule& s, const std::vector<int>& ring, int me, const std::vector<int64_t>& offsets,
                     const std::string& phase) {
  const int q = static_cast<int>(ring.size());
  for (int k = 0; k + 1 < q; ++k)
    s.steps.push_back({ring[static_cast<size_t>(mod(me + 1, q))], block(offsets, mod(me - k, q)),
                       ring[static_cast<size_t>(mod(me - 1, q))], block(offsets, mod(me - k - 1, q)), false, phase});
}

RingSchedule all_reduce_schedule(const HostLayout& layout, int rank, int64_t n, bool hierarchical) {
  RingSchedule s;
  if (!use_hierarchy(layout, hierarchical)) {
    const std::vector<int> ring = all_ranks(layout);
    const std::vector<int64_t> blocks = even_offsets(0, n, static_cast<int>(ring.size()));
    ring_reduce_scatter(s, ring, rank, blocks, "flat ring");
    ring_all_gather(s, ring, rank, blocks, "flat ring");
    return s;
  }
  // Note [Hierarchical collectives]: reduce-scatter inside the host, all-reduce of this rank's
  // chunk with its peers on the other hosts, all-gather inside the host.
  const Rings r = rings_of(layout, rank);
  const std::vector<int64_t> chunks = even_offsets(0, n, static_cast<int>(r.intra.size()));
  const Span mine = block(chunks, r.local);
  const std::vector<int64_t> parts = even_offsets(mine.offset, mine.count, static_cast<int>(r.inter.size()));
  ring_reduce_scatter(s, r.intra, r.local, chunks, "inside the host");
  ring_reduce_scatter(s, r.inter, r.host, parts, "across hosts");
  ring_all_gather(s, r.inter, r.host, parts, "across hosts");
  ring_all_gather(s, r.intra, r.local, chunks, "inside the host");
  return s;
}

int64_t block_offset(const HostLayout& layout, int r, int64_t n, bool hierarchical) {
  if (!use_hierarchy(layout, hierarchical)) return r * n;
  const Rings rr = rings_of(layout, r);
  return (static_cast<int64_t>(rr.local) * layout.num_hosts() + rr.host) * n;
}

RingSchedule reduce_scatter_schedule(const HostLayout& layout, int rank, int64_t n, bool hierarchical) {
  RingSchedule s;
  const int size = static_cast<int>(layout.host_of.size());
  if (!use_hierarchy(layout, hierarchical)) {
    ring_reduce_scatter(s, all_ranks(layout), rank, strided_offsets(0, n, size), "flat ring");
    return s;
  }
  // The buffer holds the blocks grouped by local index: chunk l (H blocks, one per host) is
  // what position l of each host's ring ends with; across hosts, block h of chunk l is rank
  // (h, l)'s.
  const Rings r = rings_of(layout, rank);
  const int hosts = layout.num_hosts();
  ring_reduce_scatter(s, r.intra, r.local, strided_offsets(0, hosts * n, static_cast<int>(r.intra.size())),
                      "inside the host");
  ring_reduce_scatter(s, r.inter, r.host, strided_offsets(r.local * hosts * n, n, hosts), "across hosts");
  return s;
}

RingSchedule all_gather_schedule(const HostLayout& layout, int rank, int64_t n, bool hierarchical) {
  RingSchedule s;
  const int size = static_cast<int>(layout.host_of.size());
  if (!use_hierarchy(layout, hierarchical)) {
    ring_all_gather(s, all_ranks(layout), rank, strided_offsets(0, n, size), "flat ring");
    return s;
  }
  const Rings r = rings_of(layout, rank);
  const int hosts = layout.num_hosts();
  ring_all_gather(s, r.inter, r.host, strided_offsets(r.local * hosts * n, n, hosts), "across hosts");
  ring_all_gather(s, r.intra, r.local, strided_offsets(0, hosts * n, static_cast<int>(r.intra.size())),
                  "inside the host");
  return s;
}

RingSchedule broadcast_schedule(const HostLayout& layout, int rank, int root, int64_t n, int64_t chunk) {
  RingSchedule s;
  const int size = static_cast<int>(layout.host_of.size());
  const int pos = mod(rank - root, size);  // position in the chain root, root+1, ...
  const int next = pos + 1 < size ? mod(rank + 1, size) : -1;
  const int prev = pos > 0 ? mod(rank - 1, size) : -1;
  const int64_t chunks = std::max<int64_t>(1, (n + chunk - 1) / chunk);
  auto piece = [&](int64_t c) { return Span{c * chunk, std::min(chunk, n - c * chunk)}; };
  // Step c: chunk c comes in while chunk c-1 goes on, so the chain is busy at every link.
  for (int64_t c = 0; c <= chunks; ++c) {
    RingStep step;
    step.phase = "broadcast chain";
    if (pos == 0) {
      if (c == chunks) break;
      step.send_to = next;
      step.send = piece(c);
    } else {
      if (c < chunks) {
        step.recv_from = prev;
        step.recv = piece(c);
      }
      if (next >= 0 && c > 0) {
        step.send_to = next;
        step.send = piece(c - 1);
      }
    }
    if (step.send_to >= 0 || step.recv_from >= 0) s.steps.push_back(step);
  }
  return s;
}

}  // namespace trident::comm
