// The op suite's whole-binary runs with one f32 GEMM engine forced (op_suite_f32_openblas and
// op_suite_f32_onednn in tests/CMakeLists.txt, through TRIDENT_CPU_F32_GEMM). The per-case
// runs already use the engine auto picks on this CPU (Note [GEMM engines]), so the forced run
// of that same engine would repeat them case for case: it exits with ctest's skip code instead,
// saying so, and only the other engine's run goes through the suite again.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/cpu/gemm_engine.h"

namespace trident::testing {
namespace {

class EngineRun : public ::testing::Environment {
 public:
  void SetUp() override {
    if (std::getenv("TRIDENT_OP_SUITE_ENGINE_RUN") == nullptr) return;
    using kernels::cpu::GemmType;
    const kernels::cpu::GemmEngine forced = kernels::cpu::gemm_engine_from(GemmType::kF32, "auto");
    const kernels::cpu::GemmEngine by_isa = kernels::cpu::gemm_engine_by_isa(GemmType::kF32);
    if (forced != by_isa) return;
    std::printf("op suite: f32 GEMMs on %s are what auto picks on this CPU, and the per-case runs checked "
                "them; skipping this whole-suite run\n",
                kernels::cpu::gemm_engine_value(GemmType::kF32, forced));
    std::fflush(stdout);
    std::exit(77);
  }
};

[[maybe_unused]] ::testing::Environment* const kEngineRun = ::testing::AddGlobalTestEnvironment(new EngineRun);

}  // namespace
}  // namespace trident::testing
