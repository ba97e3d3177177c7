// The ring schedules (comm/ring_schedule.h) for every rank of a simulated job in one process:
// messages queue per (sender, receiver) pair in order, as MPI's do, and a step completes when
// its send is posted and its receive has arrived. Every collective must give each rank the
// exact result (small integers in f32, so sums are exact in any order), flat and
// hierarchical, on uniform and non-contiguous host layouts and sizes that do not divide; and
// the bytes sent across hosts must be the amounts of Note [Hierarchical collectives].
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>

#include "comm/ring_schedule.h"

namespace trident::comm {
namespace {

HostLayout layout_of(const std::vector<int>& host_of) {
  HostLayout l;
  l.host_of = host_of;
  int hosts = 0;
  for (int h : host_of) hosts = std::max(hosts, h + 1);
  for (int h = 0; h < hosts; ++h) {
    l.names.emplace_back("h");
    l.names.back() += std::to_string(h);
  }
  return l;
}

HostLayout uniform(int hosts, int per_host) {
  std::vector<int> host_of;
  for (int h = 0; h < hosts; ++h)
    for (int i = 0; i < per_host; ++i) host_of.push_back(h);
  return layout_of(host_of);
}

struct Sent {
  int64_t intra = 0, inter = 0;
};

// Runs every rank's schedule on its buffer (f32); returns the bytes sent by link class.
Sent simulate(const HostLayout& layout, const std::vector<RingSchedule>& schedules, std::vector<std::vector<float>>& buf) {
  const int p = static_cast<int>(schedules.size());
  std::map<std::pair<int, int>, std::deque<std::vector<float>>> wire;
  std::vector<size_t> step(static_cast<size_t>(p), 0);
  std::vector<bool> sent(static_cast<size_t>(p), false);
  Sent bytes;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      const auto& steps = schedules[static_cast<size_t>(r)].steps;
      auto& b = buf[static_cast<size_t>(r)];
      while (step[static_cast<size_t>(r)] < steps.size()) {
        const RingStep& st = steps[step[static_cast<size_t>(r)]];
        if (st.send_to >= 0 && !sent[static_cast<size_t>(r)]) {
          EXPECT_LE(st.send.offset + st.send.count, static_cast<int64_t>(b.size()));
          wire[{r, st.send_to}].emplace_back(b.begin() + st.send.offset, b.begin() + st.send.offset + st.send.count);
          (layout.host_of[static_cast<size_t>(r)] == layout.host_of[static_cast<size_t>(st.send_to)] ? bytes.intra
                                                                                                     : bytes.inter) +=
              st.send.count * 4;
          sent[static_cast<size_t>(r)] = true;
          progress = true;
        }
        if (st.recv_from >= 0) {
          auto& q = wire[{st.recv_from, r}];
          if (q.empty()) break;
          const std::vector<float> m = q.front();
          q.pop_front();
          EXPECT_EQ(static_cast<int64_t>(m.size()), st.recv.count) << "rank " << r << " step " << step[static_cast<size_t>(r)];
          if (st.reduce) reduce_into(b.data() + st.recv.offset, m.data(), st.recv.count, DType::kF32, ReduceOp::kSum);
          else if (!m.empty()) std::memcpy(b.data() + st.recv.offset, m.data(), m.size() * 4);  // an empty chunk's data() may be null
        }
        ++step[static_cast<size_t>(r)];
        sent[static_cast<size_t>(r)] = false;
        progress = true;
      }
    }
  }
  for (int r = 0; r < p; ++r) EXPECT_EQ(step[static_cast<size_t>(r)], schedules[static_cast<size_t>(r)].steps.size()) << "rank " << r << " stalled";
  for (const auto& [pair, q] : wire) EXPECT_TRUE(q.empty()) << "unreceived messages " << pair.first << "->" << pair.second;
  return bytes;
}

float value(int rank, int64_t i) { return static_cast<float>((rank + 1) * 1000 + i % 997); }

Sent check_all_reduce(const HostLayout& layout, int64_t n, bool hier) {
  const int p = static_cast<int>(layout.host_of.size());
  std::vector<RingSchedule> s;
  std::vector<std::vector<float>> buf(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    s.push_back(all_reduce_schedule(layout, r, n, hier));
    for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(r)].push_back(value(r, i));
  }
  const Sent sent = simulate(layout, s, buf);
  for (int r = 0; r < p; ++r)
    for (int64_t i = 0; i < n; ++i) {
      float want = 0;
      for (int q = 0; q < p; ++q) want += value(q, i);
      EXPECT_EQ(buf[static_cast<size_t>(r)][static_cast<size_t>(i)], want) << layout.str() << " n " << n << " rank " << r << " i " << i;
    }
  return sent;
}

Sent check_reduce_scatter_and_all_gather(const HostLayout& layout, int64_t n, bool hier) {
  const int p = static_cast<int>(layout.host_of.size());
  std::vector<RingSchedule> rs, ag;
  std::vector<std::vector<float>> buf(static_cast<size_t>(p), std::vector<float>(static_cast<size_t>(p * n)));
  for (int r = 0; r < p; ++r) {
    rs.push_back(reduce_scatter_schedule(layout, r, n, hier));
    for (int q = 0; q < p; ++q)  // input block q at its place in the working buffer
      for (int64_t i = 0; i < n; ++i)
        buf[static_cast<size_t>(r)][static_cast<size_t>(block_offset(layout, q, n, hier) + i)] = value(r, q * n + i);
  }
  Sent sent = simulate(layout, rs, buf);
  std::vector<std::vector<float>> gathered(static_cast<size_t>(p), std::vector<float>(static_cast<size_t>(p * n), -1));
  for (int r = 0; r < p; ++r) {
    const int64_t mine = block_offset(layout, r, n, hier);
    for (int64_t i = 0; i < n; ++i) {
      float want = 0;
      for (int q = 0; q < p; ++q) want += value(q, r * n + i);
      EXPECT_EQ(buf[static_cast<size_t>(r)][static_cast<size_t>(mine + i)], want) << layout.str() << " rank " << r;
      gathered[static_cast<size_t>(r)][static_cast<size_t>(mine + i)] = value(r, i);
    }
    ag.push_back(all_gather_schedule(layout, r, n, hier));
  }
  const Sent more = simulate(layout, ag, gathered);
  for (int r = 0; r < p; ++r)
    for (int q = 0; q < p; ++q)
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(gathered[static_cast<size_t>(r)][static_cast<size_t>(block_offset(layout, q, n, hier) + i)], value(q, i))
            << layout.str() << " rank " << r << " block " << q;
  sent.intra += more.intra;
  sent.inter += more.inter;
  return sent;
}

TEST(RingSchedule, AllReduceIsExactOnEveryLayout) {
  for (const HostLayout& l : {uniform(1, 4), uniform(2, 2), uniform(3, 2), uniform(2, 3), uniform(4, 1),
                              layout_of({0, 1, 0, 1}), layout_of({0, 0, 1, 1, 2, 2, 3, 3})})
    for (int64_t n : {0, 1, 5, 7, 1000})
      for (bool hier : {false, true}) check_all_reduce(l, n, hier);
}

TEST(RingSchedule, ReduceScatterAndAllGatherAreExactOnEveryLayout) {
  for (const HostLayout& l : {uniform(2, 2), uniform(3, 2), uniform(2, 3), layout_of({0, 1, 0, 1}), uniform(1, 3)})
    for (int64_t n : {1, 3, 64})
      for (bool hier : {false, true}) check_reduce_scatter_and_all_gather(l, n, hier);
}

TEST(RingSchedule, HierarchicalSendsFewerBytesAcrossHosts) {
  // 2 hosts x 2 ranks, N bytes: the flat ring's two crossing edges carry 2(p-1)/p N = 1.5 N
  // each (3 N in all); hierarchical, each rank all-reduces N/2 with its peer: 2 N in all.
  const int64_t n = 1200, bytes = n * 4;
  const Sent flat = check_all_reduce(uniform(2, 2), n, false), hier = check_all_reduce(uniform(2, 2), n, true);
  EXPECT_EQ(flat.inter, 3 * bytes);
  EXPECT_EQ(hier.inter, 2 * bytes);
  EXPECT_EQ(flat.intra + flat.inter, 4 * 2 * 3 * bytes / 4);  // every rank sends 2(p-1)/p N
  // 2 hosts x 8 ranks: 2(HL-1)/L N = 3.75 N against 2(H-1) N = 2 N.
  const Sent flat8 = check_all_reduce(uniform(2, 8), 1600, false), hier8 = check_all_reduce(uniform(2, 8), 1600, true);
  EXPECT_EQ(flat8.inter, 1600 * 4 * 15 / 4);
  EXPECT_EQ(hier8.inter, 2 * 1600 * 4);
  // Reduce-scatter then all-gather: half an all-reduce each.
  const Sent rs_flat = check_reduce_scatter_and_all_gather(uniform(2, 2), 300, false);
  const Sent rs_hier = check_reduce_scatter_and_all_gather(uniform(2, 2), 300, true);
  EXPECT_EQ(rs_flat.inter, 3 * 4 * 300 * 4);  // p x n elements all-reduced: 3 N, N = 4 n x 4 bytes
  EXPECT_EQ(rs_hier.inter, 2 * 4 * 300 * 4);
}

TEST(RingSchedule, HierarchicalNeedsTheSameRanksOnEveryHost) {
  const HostLayout l = layout_of({0, 0, 0, 1});
  EXPECT_THROW(all_reduce_schedule(l, 0, 8, true), Error);
  check_all_reduce(l, 8, false);  // the flat ring does not care
}

TEST(RingSchedule, BroadcastChainDeliversEveryChunk) {
  for (const HostLayout& l : {uniform(2, 2), uniform(3, 1)})
    for (int root = 0; root < static_cast<int>(l.host_of.size()); ++root)
      for (int64_t n : {0, 1, 10, 33}) {
        const int p = static_cast<int>(l.host_of.size());
        std::vector<RingSchedule> s;
        std::vector<std::vector<float>> buf(static_cast<size_t>(p), std::vector<float>(static_cast<size_t>(n)));
        for (int r = 0; r < p; ++r) {
          s.push_back(broadcast_schedule(l, r, root, n, 4));
          for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(r)][static_cast<size_t>(i)] = r == root ? value(r, i) : -1;
        }
        simulate(l, s, buf);
        for (int r = 0; r < p; ++r)
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(buf[static_cast<size_t>(r)][static_cast<size_t>(i)], value(root, i));
      }
}

TEST(HostLayout, NamesRunsOfRanks) {
  EXPECT_EQ(uniform(2, 2).str(), "h0 (ranks 0-1), h1 (ranks 2-3)");
  EXPECT_EQ(layout_of({0, 1, 0}).str(), "h0 (ranks 0,2), h1 (rank 1)");
  EXPECT_EQ(uniform(2, 2).ranks_per_host(), 2);
  EXPECT_EQ(layout_of({0, 0, 1}).ranks_per_host(), 0);
}

}  // namespace
}  // namespace trident::comm
