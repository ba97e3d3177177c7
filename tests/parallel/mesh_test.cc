// The named device mesh (parallel/mesh.h) under mpirun on 1, 2, 4 and 8 ranks: every way of
// arranging the world as pp x dp x ep x cp x tp, each axis's and each axis set's group holding
// exactly the ranks that differ only along those axes, in world order; today's three-axis
// placement unchanged when ep = cp = 1; errors that name every degree.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/check.h"
#include "core/factory.h"
#include "parallel/mesh.h"

namespace trident::parallel {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// Every shape of `world` ranks.
std::vector<MeshShape> shapes_of(int64_t world) {
  std::vector<MeshShape> out;
  for (int64_t pp : divisors(world))
    for (int64_t dp : divisors(world / pp))
      for (int64_t ep : divisors(world / (pp * dp)))
        for (int64_t cp : divisors(world / (pp * dp * ep))) out.push_back({pp, dp, ep, cp, world / (pp * dp * ep * cp)});
  return out;
}

// The world ranks of `group` (collective over it).
std::vector<int64_t> members(comm::Communicator& group, int world_rank) {
  Tensor mine = from_vector(std::vector<int64_t>{world_rank}, Shape{1});
  Tensor all = zeros({group.size()}, DType::kI64);
  group.all_gather(mine, all);
  return to_vector<int64_t>(all);
}

// The ranks whose coordinates equal `rank`'s outside `axes`, in world order.
std::vector<int64_t> expected_members(const MeshShape& shape, int64_t rank, AxisSet axes) {
  const auto mine = shape.coords(rank);
  std::vector<int64_t> out;
  for (int64_t r = 0; r < shape.world(); ++r) {
    const auto c = shape.coords(r);
    bool same = true;
    for (MeshAxis a : kMeshAxes)
      if (!axes.contains(a)) same = same && c[static_cast<size_t>(a)] == mine[static_cast<size_t>(a)];
    if (same) out.push_back(r);
  }
  return out;
}

class MeshTest : public ::testing::Test {
 protected:
  void SetUp() override { world = std::shared_ptr<comm::Communicator>(comm::MpiRuntime::world()); }
  std::shared_ptr<comm::Communicator> world;
};

TEST_F(MeshTest, EveryShapeGroupsTheRightRanks) {
  const int rank = world->rank();
  const std::vector<AxisSet> sets = {{MeshAxis::kPP},
                                     {MeshAxis::kDP},
                                     {MeshAxis::kEP},
                                     {MeshAxis::kCP},
                                     {MeshAxis::kTP},
                                     kDataParallelAxes,
                                     {MeshAxis::kDP, MeshAxis::kEP},
                                     {MeshAxis::kCP, MeshAxis::kTP},
                                     {MeshAxis::kPP, MeshAxis::kTP},
                                     {},
                                     {MeshAxis::kPP, MeshAxis::kDP, MeshAxis::kEP, MeshAxis::kCP, MeshAxis::kTP}};
  for (const MeshShape& shape : shapes_of(world->size())) {
    SCOPED_TRACE(shape.str());
    DeviceMesh mesh(world, shape);
    const auto coords = shape.coords(rank);
    EXPECT_EQ(shape.rank_at(coords), rank);
    EXPECT_EQ(mesh.rank_at(coords), rank);
    for (MeshAxis a : kMeshAxes) {
      EXPECT_EQ(mesh.size(a), shape.size(a)) << mesh_axis_name(a);
      EXPECT_EQ(mesh.rank(a), coords[static_cast<size_t>(a)]) << mesh_axis_name(a);
      EXPECT_EQ(mesh.axis(a).rank(), coords[static_cast<size_t>(a)]) << mesh_axis_name(a);
    }
    for (const AxisSet& axes : sets) {
      comm::Communicator& g = mesh.group(axes);
      EXPECT_EQ(g.size(), shape.size(axes)) << axes.str();
      EXPECT_EQ(members(g, rank), expected_members(shape, rank, axes)) << axes.str();
    }
    // The data-parallel group: dense parameters' replicas.
    EXPECT_EQ(mesh.dp_size(), shape.dp * shape.ep * shape.cp);
    EXPECT_EQ(&mesh.dp(), &mesh.group(kDataParallelAxes));
    // Sets that differ only by axes of size 1 are one group.
    AxisSet padded = {MeshAxis::kTP};
    for (MeshAxis a : kMeshAxes)
      if (shape.size(a) == 1) padded = padded.with(a);
    EXPECT_EQ(&mesh.group(padded), &mesh.group({MeshAxis::kTP}));
    // Each communicator once in the byte counts.
    std::set<const comm::Communicator*> seen;
    for (const auto& [name, c] : mesh.communicators()) EXPECT_TRUE(seen.insert(c).second) << name;
  }
}

TEST_F(MeshTest, ThreeAxisLayoutsKeepTheirRanks) {
  // rank = (pp_rank * dp + dp_rank) * tp + tp_rank, as before the axes had names.
  const int n = world->size(), rank = world->rank();
  for (int64_t tp : divisors(n))
    for (int64_t pp : divisors(n / tp)) {
      DeviceMesh mesh(world, tp, pp);
      const int64_t dp = n / (tp * pp);
      EXPECT_EQ(mesh.tp_rank(), rank % tp);
      EXPECT_EQ(mesh.dp_rank(), (rank / tp) % dp);
      EXPECT_EQ(mesh.pp_rank(), rank / (tp * dp));
      EXPECT_EQ(mesh.rank_at(mesh.pp_rank(), mesh.dp_rank(), mesh.tp_rank()), rank);
      // Pure data parallelism runs on the world itself (its traffic counted there, as before).
      if (tp == 1 && pp == 1) {
        EXPECT_EQ(&mesh.dp(), &mesh.world());
      } else if (tp > 1) {
        EXPECT_NE(&mesh.tp(), &mesh.world());
      }
    }
}

TEST_F(MeshTest, ErrorsNameTheDegrees) {
  const int n = world->size();
  try {
    DeviceMesh mesh(world, MeshShape{1, 1, 1, 1, n + 1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tp " + std::to_string(n + 1)), std::string::npos) << m;
    EXPECT_NE(m.find("the world has " + std::to_string(n)), std::string::npos) << m;
  }
  try {
    MeshShape::fill(n, n + 1, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be a multiple of parallel.tp (" + std::to_string(n + 1) + ")"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ((AxisSet{MeshAxis::kEP, MeshAxis::kDP}).str(), "{dp,ep}");
  EXPECT_EQ(AxisSet{}.str(), "{}");
  EXPECT_EQ((MeshShape{2, 1, 1, 1, 4}).str(), "pp 2 x dp 1 x ep 1 x cp 1 x tp 4");
}

}  // namespace
}  // namespace trident::parallel
