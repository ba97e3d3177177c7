// all_reduce_bench: trident's MPI all-reduce (comm::Communicator::all_reduce, what data and
// tensor parallelism call) against MPI_Allreduce and a single MPI_Iallreduce, side by side in
// one run, on one host. Run under mpirun:
//
//   mpirun -np 2 --oversubscribe all_reduce_bench [--mb 4,16,26,51,132] [--reps 7]
//
// Each size in MB of f32, fastest of --reps runs on the slowest rank, after a barrier. Prints
// JSON: per size the three times (ms) and trident's ratio to each peer (Note [Chunked
// all-reduce on one host] in comm/mpi_chunked_all_reduce.h).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/mpi_communicator.h"
#include "core/factory.h"

using namespace trident;

namespace {

double fastest(comm::Communicator& world, int reps, const std::function<void()>& run) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    world.barrier();
    const double t0 = MPI_Wtime();
    run();
    best = std::min(best, MPI_Wtime() - t0);
  }
  MPI_Allreduce(MPI_IN_PLACE, &best, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return best * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  comm::MpiRuntime::init(&argc, &argv);
  std::vector<double> sizes{4, 16, 26, 51, 132};
  int reps = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) {
      sizes.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::atof(item.c_str()));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "all_reduce_bench: unknown argument %s (--mb LIST, --reps N)\n", a.c_str());
      return 2;
    }
  }
  const std::unique_ptr<comm::Communicator> world = comm::MpiRuntime::world();
  nlohmann::ordered_json out;
  out["ranks"] = world->size();
  out["peers"] = "MPI_Allreduce (blocking, coll/tuned) and one MPI_Iallreduce tested to completion";
  for (double mb : sizes) {
    const auto n = static_cast<int64_t>(mb * 1e6 / 4.0);
    Tensor t = full({n}, 1.0, DType::kF32);
    auto* p = t.data_ptr<float>();
    const double ours = fastest(*world, reps, [&] { world->all_reduce(t); });
    const double blocking =
        fastest(*world, reps, [&] { MPI_Allreduce(MPI_IN_PLACE, p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
    const double single = fastest(*world, reps, [&] {
      MPI_Request r;
      MPI_Iallreduce(MPI_IN_PLACE, p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
      int done = 0;
      while (!done) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    });
    out["sizes"].push_back({{"mb", mb},
                            {"trident_ms", ours},
                            {"mpi_allreduce_ms", blocking},
                            {"mpi_iallreduce_ms", single},
                            {"trident_over_allreduce", ours / blocking},
                            {"trident_over_iallreduce", ours / single}});
  }
  if (world->rank() == 0) std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
