// The instruction sets the int8 kernels (int8_quantize.h, int8_gemm.h) run on, chosen at run
// time: the build may target a plain x86-64 (TRIDENT_NATIVE=OFF) and still use AVX-512 VNNI
// where the CPU has it. Each kernel takes the ISA as an argument (kAuto: the widest this CPU
// runs), so tests force every path the CPU can run and benchmarks compare them. All paths give
// the same bits (the sums are exact int32; the fp32 epilogue is the same expression).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace trident::kernels::cpu {

enum class Int8Isa {
  kAuto,        // the widest of the below that this CPU runs
  kScalar,      // portable C++: the reference every other path must match bit for bit
  kAvx2,        // vpmaddubsw / vpmaddwd on 256-bit vectors (Haswell and later)
  kAvxVnni,     // vpdpbusd on 256-bit vectors, VEX-encoded (Alder Lake, Sapphire Rapids)
  kAvx512Vnni,  // vpdpbusd on 512-bit vectors (Cascade Lake, Ice Lake, Zen 4 and later)
};

// Whether this CPU (and build) runs the path; kAuto and kScalar always.
bool int8_isa_supported(Int8Isa isa);
// kAuto resolved to the widest supported path; any other value as given, after checking that
// the CPU runs it (throws naming the path and the CPU's int8 paths otherwise).
Int8Isa int8_isa_resolve(Int8Isa isa);
// "auto", "scalar", "avx2", "avx_vnni", "avx512_vnni".
const char* int8_isa_name(Int8Isa isa);
// The path named by one of those names; throws naming the value, `where` it came from and
// the names allowed.
Int8Isa int8_isa_from_name(std::string_view name, const std::string& where);
// The paths this CPU runs, widest first (never kAuto): what tests force in turn.
std::vector<Int8Isa> int8_isa_supported_paths();
// The same as "avx512_vnni, avx_vnni, avx2, scalar".
std::string int8_isa_supported_names();

}  // namespace trident::kernels::cpu
