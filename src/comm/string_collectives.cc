#include "comm/string_collectives.h"

#include <algorithm>
#include <cstring>

#include "core/factory.h"

namespace trident::comm {
namespace {

constexpr int kStringTag = 7311;  // any tag: the pairs are matched by source

// The string's bytes in int32 words (zero-padded), the dtype every communicator carries.
Tensor pack(const std::string& s) {
  const int64_t words = (static_cast<int64_t>(s.size()) + 3) / 4;
  std::vector<int32_t> w(static_cast<size_t>(words), 0);
  if (!s.empty()) std::memcpy(w.data(), s.data(), s.size());
  return from_vector(w, Shape{words});
}

}  // namespace

std::vector<std::string> gather_strings(Communicator& comm, const std::string& mine, int root) {
  const int n = comm.size(), me = comm.rank();
  Tensor length = from_vector(std::vector<int64_t>{static_cast<int64_t>(mine.size())}, Shape{1});
  Tensor lengths = zeros({n}, DType::kI64);
  comm.all_gather(length, lengths);
  const std::vector<int64_t> len = to_vector<int64_t>(lengths);
  if (me != root) {
    if (!mine.empty()) comm.send(pack(mine), root, kStringTag);
    return {};
  }
  std::vector<std::string> out(static_cast<size_t>(n));
  std::vector<std::pair<int, Tensor>> incoming;
  std::vector<std::unique_ptr<Work>> works;
  for (int r = 0; r < n; ++r) {
    if (r == me || len[static_cast<size_t>(r)] == 0) continue;
    Tensor buf = zeros({(len[static_cast<size_t>(r)] + 3) / 4}, DType::kI32);
    works.push_back(comm.recv_async(buf, r, kStringTag));
    incoming.emplace_back(r, buf);
  }
  for (auto& w : works) w->wait();
  out[static_cast<size_t>(me)] = mine;
  for (const auto& [r, buf] : incoming) {
    out[static_cast<size_t>(r)].resize(static_cast<size_t>(len[static_cast<size_t>(r)]));
    std::memcpy(out[static_cast<size_t>(r)].data(), buf.data_ptr<int32_t>(), out[static_cast<size_t>(r)].size());
  }
  return out;
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  const int n = comm.size();
  Tensor length = from_vector(std::vector<int64_t>{static_cast<int64_t>(mine.size())}, Shape{1});
  Tensor lengths = zeros({n}, DType::kI64);
  comm.all_gather(length, lengths);
  const std::vector<int64_t> len = to_vector<int64_t>(lengths);
  int64_t words = 0;
  for (int64_t l : len) words = std::max(words, (l + 3) / 4);
  std::vector<std::string> out(static_cast<size_t>(n));
  if (words == 0) return out;
  std::vector<int32_t> padded(static_cast<size_t>(words), 0);
  if (!mine.empty()) std::memcpy(padded.data(), mine.data(), mine.size());
  Tensor all = zeros({n * words}, DType::kI32);
  comm.all_gather(from_vector(padded, Shape{words}), all);
  for (int r = 0; r < n; ++r) {
    out[static_cast<size_t>(r)].resize(static_cast<size_t>(len[static_cast<size_t>(r)]));
    std::memcpy(out[static_cast<size_t>(r)].data(), all.data_ptr<int32_t>() + r * words,
                out[static_cast<size_t>(r)].size());
  }
  return out;
}

}  // namespace trident::comm
