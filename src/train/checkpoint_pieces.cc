#include "train/checkpoint_pieces.h"

#include <cctype>
#include <map>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "core/copy.h"
#include "core/views.h"

namespace trident::train {
namespace {

// The boxes of elements [b, e) of the sub-tensor at `prefix` (its coordinates along the axes
// before `axis`), flattened over the axes from `axis` on.
void cover(const std::vector<int64_t>& dims, size_t axis, std::vector<int64_t>& prefix, int64_t b, int64_t e,
           std::vector<parallel::Box>& out) {
  if (b >= e) return;
  const auto box = [&](int64_t first, int64_t count) {  // slices [first, first + count) along `axis`, whole below
    std::vector<int64_t> offsets = prefix, shape(prefix.size(), 1);
    offsets.push_back(first);
    shape.push_back(count);
    for (size_t a = axis + 1; a < dims.size(); ++a) {
      offsets.push_back(0);
      shape.push_back(dims[a]);
    }
    out.push_back({offsets, Shape(shape)});
  };
  int64_t stride = 1;
  for (size_t a = axis + 1; a < dims.size(); ++a) stride *= dims[a];
  const auto inside = [&](int64_t slice, int64_t from, int64_t to) {  // a part of one slice
    prefix.push_back(slice);
    cover(dims, axis + 1, prefix, from, to, out);
    prefix.pop_back();
  };
  if (axis + 1 == dims.size()) return box(b, e - b);
  int64_t first = b / stride;
  if (first == (e - 1) / stride) return inside(first, b - first * stride, e - first * stride);
  if (b % stride != 0) inside(first++, b % stride, stride);
  const int64_t last = e / stride;  // slices [first, last) are whole
  if (last > first) box(first, last - first);
  if (e % stride != 0) inside(last, 0, e % stride);
}

// The flat index of `offsets` in a row-major tensor of `dims`.
int64_t ravel(const std::vector<int64_t>& offsets, const std::vector<int64_t>& dims) {
  int64_t at = 0;
  for (size_t a = 0; a < dims.size(); ++a) at = at * dims[a] + offsets[a];
  return at;
}

// Builds this rank's shards, numbering each tensor's keys.
class ShardList {
 public:
  explicit ShardList(const parallel::PlacementTable& table, int tp_rank) : table_(table), tp_rank_(tp_rank) {}

  // Elements [begin, end) of the flattening of this rank's local tensor of parameter `row`
  // (`values`: those elements; whole: the local tensor itself, any shape), or, when `load` is
  // set, f32 elements read only when the shard is written.
  void add(const std::string& tensor, const parallel::ParamPlacement& row, int64_t begin, int64_t end, bool whole,
           const std::optional<Tensor>& values, const std::function<Tensor()>& load) {
    TRI_ASSERT(values.has_value() != static_cast<bool>(load), "checkpoint: piece '", tensor,
               "' needs either values or a loader");
    const int64_t n = values ? values->numel() : end - begin;
    const DType dtype = values ? values->dtype() : DType::kF32;
    std::optional<Tensor> flat;
    if (values) flat = views::view(core::contiguous(*values), {n});
    // Each shard is a view of the piece's flattening: taken now, or when a lazy piece is read.
    const auto emit = [&](checkpoint::TensorShard shard, std::function<Tensor(const Tensor&)> view) {
      if (flat) {
        out_.push_back({tensor, dtype, row.shape, std::move(shard), core::contiguous(view(*flat)), {}});
        return;
      }
      out_.push_back({tensor, dtype, row.shape, std::move(shard), std::nullopt, [load, view, n] {
                        return core::contiguous(view(views::view(core::contiguous(load()), {n})));
                      }});
    };
    if (!row.tp_split()) {  // the local tensor is the logical one
      if (whole) {
        emit(checkpoint::TensorShard::box("", key(tensor), std::vector<int64_t>(row.shape.size(), 0), row.shape),
             [shape = row.shape](const Tensor& f) { return views::view(f, shape.span()); });
      } else {
        emit(checkpoint::TensorShard::flat("", key(tensor), begin, end), [](const Tensor& f) { return f; });
      }
      return;
    }
    const Shape local = row.local_shape(static_cast<int>(table_.mesh().tp), tp_rank_);
    const std::vector<int64_t> ldims = local.vec();
    const parallel::Placement& split = row.on_axis(parallel::MeshAxis::kTP);
    const size_t d = static_cast<size_t>(split.dim);
    const int64_t length = ldims[d] / split.blocks;  // each block's extent along d on this rank
    const std::vector<parallel::Box> blocks = table_.tp_boxes(row.name, tp_rank_);
    for (const parallel::Box& lb : flat_range_boxes(local, begin, end)) {
      const int64_t start = ravel(lb.offsets, ldims) - begin;
      // Cut along the split dim where the blocks meet; each piece's offset in the logical
      // tensor is its block's there.
      const int64_t lo = lb.offsets[d], hi = lo + lb.shape[static_cast<int64_t>(d)];
      for (int64_t k = 0; k < split.blocks; ++k) {
        const int64_t s = std::max(lo, k * length), e = std::min(hi, (k + 1) * length);
        if (s >= e) continue;
        std::vector<int64_t> offsets = lb.offsets, shape = lb.shape.vec();
        offsets[d] = blocks[static_cast<size_t>(k)].offsets[d] + (s - k * length);
        shape[d] = e - s;
        emit(checkpoint::TensorShard::box("", key(tensor), offsets, Shape(shape)),
             [start, box = lb.shape, d, from = s - lo, len = e - s](const Tensor& f) {
               const Tensor part = views::view(views::narrow(f, 0, start, box.product()), box.span());
               return views::narrow(part, static_cast<int64_t>(d), from, len);
             });
      }
    }
  }

  void push_whole(const std::string& tensor, const Tensor& values) {
    out_.push_back({tensor, values.dtype(), values.shape(),
                    checkpoint::TensorShard::box("", key(tensor), std::vector<int64_t>(values.dim(), 0), values.shape()),
                    core::contiguous(values), {}});
  }

  std::vector<WrittenShard> take() { return std::move(out_); }

 private:
  std::string key(const std::string& tensor) { return tensor + "#" + std::to_string(count_[tensor]++); }

  const parallel::PlacementTable& table_;
  const int tp_rank_;
  std::map<std::string, int> count_;
  std::vector<WrittenShard> out_;
};

}  // namespace

std::vector<parallel::Box> flat_range_boxes(const Shape& shape, int64_t begin, int64_t end) {
  TRI_CHECK(0 <= begin && begin <= end && end <= shape.product(), "flat_range_boxes: [", begin, ", ", end,
            ") is not a range of a tensor of shape ", shape);
  std::vector<parallel::Box> out;
  if (begin == end) return out;
  if (shape.size() == 0) return {{{}, shape}};
  std::vector<int64_t> prefix;
  cover(shape.vec(), 0, prefix, begin, end, out);
  return out;
}

std::vector<WrittenShard> rank_shards(const parallel::PlacementTable& table, const RankCoords& at,
                                      const std::vector<parallel::HeldPiece>& held,
                                      const std::vector<nn::NamedTensor>& frozen,
                                      const std::vector<nn::NamedTensor>& rank_state) {
  ShardList list(table, at.tp_rank);
  // A tensor replicated over tensor parallelism comes from tp rank 0, one held whole by a
  // group from the group's rank 0.
  const auto writes = [&](const parallel::ParamPlacement& row, bool partitioned, parallel::AxisSet group) {
    TRI_ASSERT(row.stage() == at.stage, "checkpoint: rank holds '", row.name, "' of stage ", row.stage(),
               " on stage ", at.stage);
    return (row.tp_split() || at.tp_rank == 0) && (partitioned || at.group_rank(group) == 0);
  };
  for (const parallel::HeldPiece& p : held) {
    const parallel::ParamPlacement& row = table.at(p.param);
    if (writes(row, p.partitioned, row.reduce_over))
      list.add(p.tensor, row, p.begin, p.end, !p.partitioned, p.values, p.load);
  }
  for (const auto& [name, t] : frozen) {
    const parallel::ParamPlacement& row = table.at(name);
    // A frozen expert (expert parallelism) is held alike only by its own ep rank's replicas.
    const parallel::AxisSet replicas =
        row.on_ep_rank() ? parallel::kDataParallelAxes.without(parallel::MeshAxis::kEP) : parallel::kDataParallelAxes;
    if (writes(row, false, replicas)) list.add(name, row, 0, t.numel(), true, t, {});
  }
  for (const auto& [name, t] : rank_state) list.push_whole(rank_state_name(at.world_rank, name), t);
  return list.take();
}

std::string rank_state_name(int rank, const std::string& name) { return "rank" + std::to_string(rank) + "." + name; }

bool is_rank_state(const std::string& name) {
  size_t i = 4;
  if (!name.starts_with("rank")) return false;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i > 4 && i < name.size() && name[i] == '.';
}

std::string shards_to_json(const std::vector<WrittenShard>& shards) {
  nlohmann::json out = nlohmann::json::array();
  for (const WrittenShard& s : shards) {
    nlohmann::json j = {{"tensor", s.tensor},
                        {"dtype", checkpoint::safetensors_dtype_name(s.dtype)},
                        {"shape", s.shape.vec()},
                        {"key", s.shard.key}};
    if (s.shard.kind == checkpoint::TensorShard::Kind::kBox) {
      j["offsets"] = s.shard.offsets;
      j["box"] = s.shard.shape.vec();
    } else {
      j["flat"] = {s.shard.flat_begin, s.shard.flat_end};
    }
    out.push_back(std::move(j));
  }
  return out.dump();
}

std::vector<WrittenShard> shards_from_json(const std::string& text, const std::string& file) {
  std::vector<WrittenShard> out;
  for (const nlohmann::json& j : nlohmann::json::parse(text)) {
    WrittenShard s;
    s.tensor = j.at("tensor").get<std::string>();
    const std::optional<DType> dtype = checkpoint::dtype_from_safetensors(j.at("dtype").get<std::string>());
    TRI_ASSERT(dtype.has_value(), "checkpoint: a rank described '", s.tensor, "' with dtype ", j.at("dtype").dump());
    s.dtype = *dtype;
    s.shape = Shape(j.at("shape").get<std::vector<int64_t>>());
    const std::string key = j.at("key").get<std::string>();
    if (j.contains("flat")) {
      s.shard = checkpoint::TensorShard::flat(file, key, j.at("flat").at(0).get<int64_t>(), j.at("flat").at(1).get<int64_t>());
    } else {
      s.shard = checkpoint::TensorShard::box(file, key, j.at("offsets").get<std::vector<int64_t>>(),
                                             Shape(j.at("box").get<std::vector<int64_t>>()));
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace trident::train
