#include "parallel/placement.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"

namespace trident::parallel {

std::string Placement::str() const {
  switch (kind) {
    case Kind::kReplicate: return "replicate";
    case Kind::kShard:
      return "shard(" + std::to_string(dim) + (blocks > 1 ? ", " + std::to_string(blocks) + " blocks" : "") + ")";
    case Kind::kStage: return "stage " + std::to_string(stage);
    case Kind::kFlat: return "flat";
  }
  return "?";
}

std::pair<int64_t, int64_t> shard_range(int64_t extent, int n, int r) {
  const int64_t base = extent / n, extra = extent % n;
  return {r * base + std::min<int64_t>(r, extra), base + (r < extra ? 1 : 0)};
}

Tensor shard_of_full(const Tensor& full, const Placement& split, int n, int r) {
  TRI_ASSERT(split.is_shard(), "shard_of_full: ", split.str(), " is not a split");
  const int64_t block = full.size(split.dim) / split.blocks;
  const auto [begin, length] = shard_range(block, n, r);
  std::vector<int64_t> shape = full.shape().vec();
  shape[static_cast<size_t>(split.dim)] = length * split.blocks;
  Tensor local = empty(Shape(shape), full.dtype());
  for (int64_t b = 0; b < split.blocks; ++b)
    core::copy_(views::narrow(local, split.dim, b * length, length),
                views::narrow(full, split.dim, b * block + begin, length));
  return local;
}

Shape ParamPlacement::local_shape(int tp, int tp_rank) const {
  const Placement& p = on_axis(MeshAxis::kTP);
  if (!p.is_shard() || tp == 1) return shape;
  std::vector<int64_t> dims = shape.vec();
  const int64_t block = dims[static_cast<size_t>(p.dim)] / p.blocks;
  dims[static_cast<size_t>(p.dim)] = shard_range(block, tp, tp_rank).second * p.blocks;
  return Shape(dims);
}

AxisSet ParamPlacement::sharded_over() const {
  AxisSet s;
  for (MeshAxis a : kMeshAxes)
    if (on_axis(a).kind != Placement::Kind::kReplicate) s = s.with(a);
  return s;
}

ParamPlacement place_parameter(const ParamSpec& spec, const MeshShape& mesh, int stage, int64_t zero_stage,
                               DType compute, DType frozen_storage) {
  TRI_CHECK(spec.tp.kind == Placement::Kind::kReplicate || spec.tp.kind == Placement::Kind::kShard,
            "placement of '", spec.name, "': tensor parallelism replicates or shards a parameter, not ", spec.tp.str());
  if (spec.tp.is_shard())
    TRI_CHECK(spec.tp.dim >= 0 && spec.tp.dim < static_cast<int64_t>(spec.shape.size()) && spec.tp.blocks >= 1 &&
                  spec.shape[spec.tp.dim] % spec.tp.blocks == 0,
              "placement of '", spec.name, "': ", spec.tp.str(), " does not fit its shape ", spec.shape);
  ParamPlacement row;
  row.name = spec.name;
  row.shape = spec.shape;
  row.block = spec.block;
  row.trainable = spec.trainable;
  row.storage = spec.trainable ? compute : frozen_storage;
  row.on[static_cast<size_t>(MeshAxis::kTP)] = mesh.tp > 1 ? spec.tp : Placement::replicate();
  row.on[static_cast<size_t>(MeshAxis::kPP)] = mesh.pp > 1 ? Placement::on_stage(stage) : Placement::replicate();
  AxisSet replicas = kDataParallelAxes;
  if (spec.expert >= 0 && mesh.ep > 1) {
    TRI_CHECK(spec.experts % mesh.ep == 0 && spec.expert < spec.experts, "placement of '", spec.name, "': expert ",
              spec.expert, " of ", spec.experts, " cannot be placed on ", mesh.ep,
              " expert-parallel ranks (they must divide the experts)");
    row.on[static_cast<size_t>(MeshAxis::kEP)] = Placement::on_stage(static_cast<int>(spec.expert / (spec.experts / mesh.ep)));
    replicas = replicas.without(MeshAxis::kEP);
  }
  TRI_CHECK(spec.trainable || row.on_axis(MeshAxis::kEP).kind != Placement::Kind::kStage, "placement of '", spec.name,
            "': a frozen expert (train.freeze, LoRA's or QLoRA's base) with parallel.ep = ", mesh.ep,
            " is not supported yet: its checkpoint pieces are written by data-parallel rank 0 of every ep rank "
            "(issue #51); train it with parallel.ep = 1");
  if (spec.trainable) {
    row.reduce_over = replicas;
    row.state_sharded = zero_stage >= 1;
    // ZeRO-3 partitions the parameter itself over the ranks that hold it alike.
    if (zero_stage == 3 && mesh.size(replicas) > 1) row.on[static_cast<size_t>(MeshAxis::kDP)] = Placement::flat();
  }
  return row;
}

void PlacementTable::add(ParamPlacement row) {
  TRI_CHECK(!index_.contains(row.name), "placement table: parameter '", row.name, "' is listed twice");
  index_.emplace(row.name, params_.size());
  params_.push_back(std::move(row));
}

const ParamPlacement* PlacementTable::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &params_[it->second];
}

const ParamPlacement& PlacementTable::at(const std::string& name) const {
  const ParamPlacement* p = find(name);
  TRI_CHECK(p != nullptr, "placement table: no parameter '", name, "' (", params_.size(), " parameters)");
  return *p;
}

std::vector<const ParamPlacement*> PlacementTable::on_stage(int stage) const {
  std::vector<const ParamPlacement*> out;
  for (const ParamPlacement& p : params_)
    if (p.stage() == stage) out.push_back(&p);
  return out;
}

std::vector<std::pair<AxisSet, std::vector<std::string>>> PlacementTable::reduction_groups(int stage) const {
  std::vector<std::pair<AxisSet, std::vector<std::string>>> out;
  for (const ParamPlacement* p : on_stage(stage)) {
    if (!p->trainable) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == p->reduce_over; });
    if (it == out.end()) it = out.insert(out.end(), {p->reduce_over, {}});
    it->second.push_back(p->name);
  }
  return out;
}

std::vector<Box> PlacementTable::tp_boxes(const std::string& name, int tp_rank) const {
  const ParamPlacement& p = at(name);
  const Placement& s = p.on_axis(MeshAxis::kTP);
  if (!s.is_shard()) return {{std::vector<int64_t>(p.shape.size(), 0), p.shape}};
  const int64_t block = p.shape[s.dim] / s.blocks;
  const auto [begin, length] = shard_range(block, static_cast<int>(mesh_.tp), tp_rank);
  std::vector<Box> out;
  for (int64_t b = 0; b < s.blocks; ++b) {
    std::vector<int64_t> offsets(p.shape.size(), 0), dims = p.shape.vec();
    offsets[static_cast<size_t>(s.dim)] = b * block + begin;
    dims[static_cast<size_t>(s.dim)] = length;
    out.push_back({offsets, Shape(dims)});
  }
  return out;
}

Tensor PlacementTable::local_from_full(const std::string& name, const Tensor& full, int tp_rank) const {
  const ParamPlacement& p = at(name);
  TRI_CHECK(full.shape() == p.shape, "'", name, "' has shape ", full.shape(), "; the model's is ", p.shape);
  const Placement& s = p.on_axis(MeshAxis::kTP);
  return s.is_shard() ? shard_of_full(full, s, static_cast<int>(mesh_.tp), tp_rank) : full;
}

int64_t PlacementTable::numel() const {
  int64_t n = 0;
  for (const ParamPlacement& p : params_) n += p.shape.product();
  return n;
}

int64_t PlacementTable::trainable_numel() const {
  int64_t n = 0;
  for (const ParamPlacement& p : params_)
    if (p.trainable) n += p.shape.product();
  return n;
}

std::string PlacementTable::str() const {
  std::ostringstream os;
  os << "parameter placements on " << mesh_.str() << (zero_stage_ > 0 ? ", ZeRO-" + std::to_string(zero_stage_) : "")
     << "\n";
  for (const ParamPlacement& p : params_) {
    os << "  " << p.name << " " << p.shape;
    for (MeshAxis a : kMeshAxes)
      if (mesh_.size(a) > 1) os << " " << mesh_axis_name(a) << ":" << p.on_axis(a).str();
    os << " " << (p.trainable ? "trains" : "frozen") << " " << p.storage;
    if (p.trainable) os << " reduce " << p.reduce_over.str() << (p.state_sharded ? " state flat" : "");
    os << "\n";
  }
  return os.str();
}

}  // namespace trident::parallel
