#include "kernels/cpu/int8_isa.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core/check.h"

namespace trident::kernels::cpu {

namespace {
constexpr Int8Isa kWidestFirst[] = {Int8Isa::kAvx512Vnni, Int8Isa::kAvxVnni, Int8Isa::kAvx2, Int8Isa::kScalar};

#if defined(__x86_64__)
// AVX-VNNI is CPUID leaf 7, sub-leaf 1, EAX bit 4: read directly, as clang 14's
// __builtin_cpu_supports has no name for it. (The OS's saving of the 256-bit state is what the
// avx2 check already needs.)
bool cpu_has_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && ((eax >> 4) & 1u) != 0;
}
#endif
}  // namespace

bool int8_isa_supported(Int8Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Int8Isa::kAuto:
    case Int8Isa::kScalar: return true;
    case Int8Isa::kAvx2: return __builtin_cpu_supports("avx2");
    case Int8Isa::kAvxVnni: return __builtin_cpu_supports("avx2") && cpu_has_avx_vnni();
    case Int8Isa::kAvx512Vnni:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return isa == Int8Isa::kAuto || isa == Int8Isa::kScalar;
#endif
}

Int8Isa int8_isa_resolve(Int8Isa isa) {
  if (isa == Int8Isa::kAuto) {
    for (Int8Isa candidate : kWidestFirst)
      if (int8_isa_supported(candidate)) return candidate;
  }
  TRI_CHECK(int8_isa_supported(isa), "the int8 kernels' ", int8_isa_name(isa),
            " path needs instructions this CPU lacks; it runs: ", int8_isa_supported_names());
  return isa;
}

const char* int8_isa_name(Int8Isa isa) {
  switch (isa) {
    case Int8Isa::kAuto: return "auto";
    case Int8Isa::kScalar: return "scalar";
    case Int8Isa::kAvx2: return "avx2";
    case Int8Isa::kAvxVnni: return "avx_vnni";
    case Int8Isa::kAvx512Vnni: return "avx512_vnni";
  }
  return "?";
}

Int8Isa int8_isa_from_name(std::string_view name, const std::string& where) {
  for (Int8Isa isa : {Int8Isa::kAuto, Int8Isa::kScalar, Int8Isa::kAvx2, Int8Isa::kAvxVnni, Int8Isa::kAvx512Vnni})
    if (name == int8_isa_name(isa)) return isa;
  TRI_CHECK(false, where, " is \"", name, "\": expected auto, scalar, avx2, avx_vnni or avx512_vnni");
  return Int8Isa::kAuto;
}

std::vector<Int8Isa> int8_isa_supported_paths() {
  std::vector<Int8Isa> paths;
  for (Int8Isa isa : kWidestFirst)
    if (int8_isa_supported(isa)) paths.push_back(isa);
  return paths;
}

std::string int8_isa_supported_names() {
  std::string names;
  for (Int8Isa isa : int8_isa_supported_paths()) names += std::string(names.empty() ? "" : ", ") + int8_isa_name(isa);
  return names;
}

}  // namespace trident::kernels::cpu
