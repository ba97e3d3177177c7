#include "kernels/cpu/gemm_engine.h"

#include <atomic>
#include <cstdlib>

#include "core/check.h"
#include "kernels/cpu/onednn_gemm.h"

namespace trident::kernels::cpu {

namespace {

// "kernels.f32_gemm = \"fast\"" for a config key, "TRIDENT_CPU_F32_GEMM=fast" for a variable.
std::string setting_text(const std::string& setting, const std::string& value) {
  return setting.find('.') != std::string::npos ? setting + " = \"" + value + "\"" : setting + "=" + value;
}

void check_runs_here(GemmType type, GemmEngine engine, const std::string& what) {
  if (type != GemmType::kBF16 || engine != GemmEngine::kOneDnn) return;  // oneDNN's f32 runs on every x86-64 CPU
  TRI_CHECK(onednn_has_native_bf16(), what,
            ": oneDNN runs bf16 matmuls natively only on CPUs with AVX512_BF16 or AMX, and this CPU's ISA is ",
            onednn_cpu_isa(), " (use auto or widen)");
}

// The process's engine per type: -1 until set or first used.
std::atomic<int> engine_slot[2] = {-1, -1};

std::atomic<int>& slot(GemmType type) { return engine_slot[type == GemmType::kF32 ? 0 : 1]; }

}  // namespace

const char* gemm_engine_variable(GemmType type) {
  return type == GemmType::kF32 ? "TRIDENT_CPU_F32_GEMM" : "TRIDENT_CPU_BF16_GEMM";
}

GemmEngine gemm_engine_by_isa(GemmType type) {
  const bool onednn = type == GemmType::kF32 ? onednn_has_avx512() : onednn_has_native_bf16();
  return onednn ? GemmEngine::kOneDnn : GemmEngine::kOpenBlas;
}

GemmEngine gemm_engine_from(GemmType type, const std::string& value, const std::string& setting) {
  const std::string what = setting.empty() ? gemm_engine_variable(type) : setting;
  if (value == "auto") {
    const char* env = std::getenv(gemm_engine_variable(type));
    if (env == nullptr || std::string(env).empty() || std::string(env) == "auto") return gemm_engine_by_isa(type);
    return gemm_engine_from(type, env, gemm_engine_variable(type));
  }
  const char* other = type == GemmType::kF32 ? "openblas" : "widen";
  GemmEngine engine = GemmEngine::kOneDnn;
  if (value == other) {
    engine = GemmEngine::kOpenBlas;
  } else {
    TRI_CHECK(value == "onednn", setting_text(what, value), ": allowed values are auto, onednn, ", other);
  }
  check_runs_here(type, engine, setting_text(what, value));
  return engine;
}

GemmEngine gemm_engine(GemmType type) {
  std::atomic<int>& s = slot(type);
  const int v = s.load(std::memory_order_acquire);
  if (v >= 0) return static_cast<GemmEngine>(v);
  // First use without a set_gemm_engine: auto's choice. A bad variable throws here, on every
  // GEMM of that type, and never breaks the other type.
  int expected = -1;
  s.compare_exchange_strong(expected, static_cast<int>(gemm_engine_from(type, "auto")), std::memory_order_acq_rel);
  return static_cast<GemmEngine>(s.load(std::memory_order_acquire));  // a concurrent set_gemm_engine wins
}

GemmEngines gemm_engines() { return {gemm_engine(GemmType::kF32), gemm_engine(GemmType::kBF16)}; }

void set_gemm_engine(GemmType type, GemmEngine engine) {
  check_runs_here(type, engine, std::string("set_gemm_engine(bf16, ") + gemm_engine_name(type, engine) + ")");
  slot(type).store(static_cast<int>(engine), std::memory_order_release);
}

void set_gemm_engines(const GemmEngines& engines) {
  check_runs_here(GemmType::kBF16, engines.bf16, "set_gemm_engines(bf16: onednn-bf16)");  // before either changes
  set_gemm_engine(GemmType::kF32, engines.f32);
  set_gemm_engine(GemmType::kBF16, engines.bf16);
}

const char* gemm_type_name(GemmType type) { return type == GemmType::kF32 ? "f32" : "bf16"; }

const char* gemm_engine_name(GemmType type, GemmEngine engine) {
  if (type == GemmType::kF32) return engine == GemmEngine::kOneDnn ? "onednn-f32" : "openblas-f32";
  return engine == GemmEngine::kOneDnn ? "onednn-bf16" : "widened-f32";  // then on the f32 engine
}

const char* gemm_engine_value(GemmType type, GemmEngine engine) {
  if (engine == GemmEngine::kOneDnn) return "onednn";
  return type == GemmType::kF32 ? "openblas" : "widen";
}

}  // namespace trident::kernels::cpu
