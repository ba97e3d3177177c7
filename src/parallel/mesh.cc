#include "parallel/mesh.h"

#include <sstream>

#include "core/check.h"

namespace trident::parallel {

const char* mesh_axis_name(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kPP: return "pp";
    case MeshAxis::kDP: return "dp";
    case MeshAxis::kEP: return "ep";
    case MeshAxis::kCP: return "cp";
    case MeshAxis::kTP: return "tp";
  }
  return "?";
}

std::string AxisSet::str() const {
  std::string s = "{";
  for (MeshAxis a : kMeshAxes)
    if (contains(a)) s += std::string(s.size() > 1 ? "," : "") + mesh_axis_name(a);
  return s + "}";
}

int64_t MeshShape::size(MeshAxis axis) const { return const_cast<MeshShape*>(this)->size(axis); }

int64_t& MeshShape::size(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kPP: return pp;
    case MeshAxis::kDP: return dp;
    case MeshAxis::kEP: return ep;
    case MeshAxis::kCP: return cp;
    case MeshAxis::kTP: return tp;
  }
  TRI_ASSERT(false, "MeshShape::size: axis ", static_cast<int>(axis));
  return tp;
}

int64_t MeshShape::size(AxisSet axes) const {
  int64_t n = 1;
  for (MeshAxis a : kMeshAxes)
    if (axes.contains(a)) n *= size(a);
  return n;
}

std::array<int64_t, kNumMeshAxes> MeshShape::coords(int64_t rank) const {
  // tp varies fastest, pp slowest (Note [The named mesh]).
  std::array<int64_t, kNumMeshAxes> c{};
  for (int i = kNumMeshAxes - 1; i >= 0; --i) {
    const int64_t n = size(kMeshAxes[static_cast<size_t>(i)]);
    c[static_cast<size_t>(i)] = rank % n;
    rank /= n;
  }
  return c;
}

int64_t MeshShape::rank_at(const std::array<int64_t, kNumMeshAxes>& coords) const {
  int64_t r = 0;
  for (int i = 0; i < kNumMeshAxes; ++i) r = r * size(kMeshAxes[static_cast<size_t>(i)]) + coords[static_cast<size_t>(i)];
  return r;
}

MeshShape MeshShape::fill(int64_t world, int64_t tp, int64_t pp, int64_t ep, int64_t cp) {
  const int64_t model = tp * pp * ep * cp;
  TRI_CHECK(tp >= 1 && pp >= 1 && ep >= 1 && cp >= 1 && world % model == 0, "the number of ranks (", world,
            ") must be a multiple of parallel.tp (", tp, ") x parallel.pp (", pp, ")",
            ep > 1 ? " x ep (" + std::to_string(ep) + ")" : std::string(),
            cp > 1 ? " x cp (" + std::to_string(cp) + ")" : std::string(),
            ": the ranks form pp x dp x ep x cp x tp, dp = ranks / (tp x pp x ep x cp)");
  return MeshShape{pp, world / model, ep, cp, tp};
}

std::string MeshShape::str() const {
  std::ostringstream os;
  for (MeshAxis a : kMeshAxes) os << (a == MeshAxis::kPP ? "" : " x ") << mesh_axis_name(a) << " " << size(a);
  return os.str();
}

DeviceMesh::DeviceMesh(std::shared_ptr<comm::Communicator> world, MeshShape shape)
    : shape_(shape), world_(std::move(world)) {
  for (MeshAxis a : kMeshAxes)
    TRI_CHECK(shape_.size(a) >= 1, "device mesh: ", mesh_axis_name(a), " = ", shape_.size(a), " must be >= 1 (",
              shape_.str(), ")");
  TRI_CHECK(shape_.world() == world_->size(), "device mesh ", shape_.str(), " has ", shape_.world(),
            " ranks; the world has ", world_->size());
  coords_ = shape_.coords(world_->rank());
  AxisSet all;
  for (MeshAxis a : kMeshAxes) all = all.with(a);
  // The data-parallel group is the world itself when it spans it (pure data parallelism);
  // every other group is a communicator of its own, so its traffic is counted apart.
  if (effective(kDataParallelAxes) == effective(all)) {
    groups_.emplace(effective(all).bits(), world_);
    created_.push_back(effective(all).bits());
  }
  // The groups every run uses, in a fixed order (their numbers in flight records follow it).
  group({MeshAxis::kTP});
  group({MeshAxis::kPP});
  dp();
}

DeviceMesh::DeviceMesh(std::shared_ptr<comm::Communicator> world, int64_t tp, int64_t pp)
    : DeviceMesh(world, MeshShape::fill(world->size(), tp, pp)) {}

AxisSet DeviceMesh::effective(AxisSet axes) const {
  for (MeshAxis a : kMeshAxes)
    if (shape_.size(a) == 1) axes = axes.without(a);
  return axes;
}

comm::Communicator& DeviceMesh::group(AxisSet axes) const {
  const AxisSet key = effective(axes);
  auto it = groups_.find(key.bits());
  if (it != groups_.end()) return *it->second;
  // The ranks that agree on every coordinate outside `axes`: the color is the world rank with
  // those coordinates zeroed, the key the world rank (so group ranks follow world order).
  std::array<int64_t, kNumMeshAxes> c = coords_;
  for (MeshAxis a : kMeshAxes)
    if (key.contains(a)) c[static_cast<size_t>(a)] = 0;
  std::shared_ptr<comm::Communicator> sub =
      world_->split(static_cast<int>(shape_.rank_at(c)), world_->rank());
  TRI_ASSERT(sub->size() == shape_.size(key), "device mesh: group ", key.str(), " has ", sub->size(), " ranks, not ",
             shape_.size(key));
  created_.push_back(key.bits());
  return *groups_.emplace(key.bits(), std::move(sub)).first->second;
}

int DeviceMesh::rank_at(int pp_rank, int dp_rank, int tp_rank) const {
  TRI_ASSERT(shape_.ep == 1 && shape_.cp == 1, "DeviceMesh::rank_at(pp, dp, tp) on a mesh with ep or cp: ",
             shape_.str());
  return rank_at({pp_rank, dp_rank, 0, 0, tp_rank});
}

std::vector<std::pair<std::string, const comm::Communicator*>> DeviceMesh::communicators() const {
  std::vector<std::pair<std::string, const comm::Communicator*>> out = {{"world", world_.get()}};
  for (unsigned bits : created_) {
    const comm::Communicator* c = groups_.at(bits).get();
    std::string name;
    if (c == world_.get()) {
      continue;
    } else {
      AxisSet s;
      for (MeshAxis a : kMeshAxes)
        if (bits & (1u << static_cast<int>(a))) s = s.with(a);
      // One axis: its name ("tp"); the dense data-parallel group: "dp" (what it always was).
      int n = 0;
      MeshAxis only = MeshAxis::kPP;
      for (MeshAxis a : kMeshAxes)
        if (s.contains(a)) ++n, only = a;
      name = n == 0 ? "self" : n == 1 ? mesh_axis_name(only) : s == effective(kDataParallelAxes) ? "dp" : s.str();
    }
    out.emplace_back(name, c);
  }
  return out;
}

int64_t DeviceMesh::total_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, c] : communicators()) bytes += c->stats().total_bytes();
  return bytes;
}

std::pair<int64_t, int64_t> DeviceMesh::link_bytes() const {
  std::pair<int64_t, int64_t> sum{0, 0};
  for (const auto& [name, c] : communicators()) {
    sum.first += c->stats().intra_host_bytes;
    sum.second += c->stats().inter_host_bytes;
  }
  return sum;
}

}  // namespace trident::parallel
