// The device mesh: the world's ranks arranged along named axes, as torchtitan's ParallelDims
// and Megatron-Core's rank generator arrange them. It owns the sub-communicators of the axes
// and of the axis sets the strategies use; layers and strategies receive the one they use,
// never a global.
//
// Note [The named mesh]
// The axes, slowest-varying first (Megatron's order "tp-cp-ep-dp-pp" read backwards):
//   pp  pipeline stages: each holds other blocks
//   dp  data-parallel replicas of every parameter, experts included (Megatron's
//       expert-data-parallel group)
//   ep  expert parallelism: ranks that hold other experts of a mixture-of-experts layer, and
//       replicas of every dense parameter
//   cp  context parallelism: ranks that hold other positions of the same sequences
//   tp  tensor parallelism: ranks that hold other slices of a layer (neighbours: on one host
//       whenever they can be)
// rank = (((pp_rank * dp + dp_rank) * ep + ep_rank) * cp + cp_rank) * tp + tp_rank.
// A dense parameter is replicated over dp x ep x cp, so its gradient is averaged over that
// group (data_parallel()); an expert's over dp alone. With ep = cp = 1, today's layouts, the
// ranks sit exactly where the three-axis mesh (pp x dp x tp) put them.
//
// Groups are looked up by axis set: group({kDP, kEP}) is the communicator of the ranks whose
// coordinates differ only along dp and ep. Axes of size 1 add nothing, so sets that differ
// only by them share one communicator.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace trident::parallel {

enum class MeshAxis : int { kPP = 0, kDP = 1, kEP = 2, kCP = 3, kTP = 4 };
inline constexpr int kNumMeshAxes = 5;
inline constexpr std::array<MeshAxis, kNumMeshAxes> kMeshAxes = {MeshAxis::kPP, MeshAxis::kDP, MeshAxis::kEP,
                                                                  MeshAxis::kCP, MeshAxis::kTP};
// "pp", "dp", "ep", "cp", "tp".
const char* mesh_axis_name(MeshAxis axis);

// A set of mesh axes.
class AxisSet {
 public:
  constexpr AxisSet() = default;
  constexpr AxisSet(std::initializer_list<MeshAxis> axes) {
    for (MeshAxis a : axes) bits_ |= bit(a);
  }
  constexpr bool contains(MeshAxis a) const { return (bits_ & bit(a)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr AxisSet with(MeshAxis a) const { return from_bits(bits_ | bit(a)); }
  constexpr AxisSet without(MeshAxis a) const { return from_bits(bits_ & ~bit(a)); }
  constexpr unsigned bits() const { return bits_; }
  constexpr bool operator==(const AxisSet&) const = default;
  // "{dp,ep}"; "{}" when empty.
  std::string str() const;

 private:
  static constexpr unsigned bit(MeshAxis a) { return 1u << static_cast<int>(a); }
  static constexpr AxisSet from_bits(unsigned b) {
    AxisSet s;
    s.bits_ = b;
    return s;
  }
  unsigned bits_ = 0;
};

// The axes a dense parameter is replicated over, and its gradient averaged over.
inline constexpr AxisSet kDataParallelAxes = {MeshAxis::kDP, MeshAxis::kEP, MeshAxis::kCP};

// The degree of each axis.
struct MeshShape {
  int64_t pp = 1, dp = 1, ep = 1, cp = 1, tp = 1;
  int64_t size(MeshAxis axis) const;
  int64_t& size(MeshAxis axis);
  int64_t world() const { return pp * dp * ep * cp * tp; }
  // The product of the axes in `axes`.
  int64_t size(AxisSet axes) const;
  // The coordinates of world rank `rank`, indexed by MeshAxis, and back.
  std::array<int64_t, kNumMeshAxes> coords(int64_t rank) const;
  int64_t rank_at(const std::array<int64_t, kNumMeshAxes>& coords) const;
  // A world of `world` ranks with these tp, pp, ep and cp and dp the rest; throws naming every
  // degree when they do not divide it.
  static MeshShape fill(int64_t world, int64_t tp, int64_t pp, int64_t ep = 1, int64_t cp = 1);
  // "pp 2 x dp 1 x ep 1 x cp 1 x tp 2".
  std::string str() const;
  bool operator==(const MeshShape&) const = default;
};

class DeviceMesh {
 public:
  // Arranges `world` by `shape` (whose world() must equal world's size; throws naming every
  // degree otherwise) and creates the communicators of each axis and of data_parallel()
  // (collective over `world`).
  DeviceMesh(std::shared_ptr<comm::Communicator> world, MeshShape shape);
  // pp x dp x tp, dp = ranks / (tp x pp).
  DeviceMesh(std::shared_ptr<comm::Communicator> world, int64_t tp, int64_t pp = 1);

  const MeshShape& shape() const { return shape_; }
  comm::Communicator& world() const { return *world_; }
  int size(MeshAxis axis) const { return static_cast<int>(shape_.size(axis)); }
  int rank(MeshAxis axis) const { return static_cast<int>(coords_[static_cast<size_t>(axis)]); }
  // The communicator along one axis, and along a set of them. A set not asked for before is
  // created now: collective over the world, so every rank must ask for the same sets in the
  // same order (as torch.distributed.new_group).
  comm::Communicator& axis(MeshAxis axis) const { return group({axis}); }
  comm::Communicator& group(AxisSet axes) const;

  // The group dense parameters are replicated over (dp x ep x cp, kDataParallelAxes): what
  // their gradients are averaged over, and what data parallelism and ZeRO run on.
  comm::Communicator& dp() const { return group(kDataParallelAxes); }
  comm::Communicator& tp() const { return axis(MeshAxis::kTP); }
  comm::Communicator& pp() const { return axis(MeshAxis::kPP); }
  int dp_size() const { return dp().size(); }
  int dp_rank() const { return dp().rank(); }
  int tp_size() const { return size(MeshAxis::kTP); }
  int tp_rank() const { return rank(MeshAxis::kTP); }
  int pp_size() const { return size(MeshAxis::kPP); }
  int pp_rank() const { return rank(MeshAxis::kPP); }
  // The world rank at these coordinates (indexed by MeshAxis); and, with ep = cp = 1, at a
  // pipeline stage, data-parallel rank and tensor-parallel rank.
  int rank_at(const std::array<int64_t, kNumMeshAxes>& coords) const { return static_cast<int>(shape_.rank_at(coords)); }
  int rank_at(int pp_rank, int dp_rank, int tp_rank) const;
  // Bytes this rank handed to collectives on all of the mesh's communicators.
  int64_t total_bytes() const;
  // Bytes this rank sent on all of them to ranks on its own host and on other hosts.
  std::pair<int64_t, int64_t> link_bytes() const;
  // The mesh's communicators, each once, with the axis set each was made for ("world",
  // "dp", "{dp,ep}", ...), in the order they were created.
  std::vector<std::pair<std::string, const comm::Communicator*>> communicators() const;

 private:
  // The set with axes of size 1 removed: sets that differ only by them are the same group.
  AxisSet effective(AxisSet axes) const;

  MeshShape shape_;
  std::array<int64_t, kNumMeshAxes> coords_{};
  std::shared_ptr<comm::Communicator> world_;
  mutable std::map<unsigned, std::shared_ptr<comm::Communicator>> groups_;  // by effective axis set
  mutable std::vector<unsigned> created_;                                    // in creation order
};

}  // namespace trident::parallel
