# Compiler flags shared by every trident target.
#
# Note [GCC's int8 dot products]
# GCC 12 (Debian 12's) miscompiles a plain C++ sum of int8 x int8 products when VNNI is enabled
# (-march=native on Zen 4/5, Ice Lake and later): the vectorizer emits vpdpbusd, which reads one
# operand as unsigned bytes, so a negative code counts as code + 256. Seen on Zen 5: a 32-term
# dot product with a -127 x 127 term gave -868 instead of -16228 (clang 14, and GCC without
# VNNI, give -16228). The scalar reference of the Q8_0 decode kernel was hit
# (tests/quantization/ggml_weight_test.cc, FusedKernelsOnEveryPath..., scalar path). So GCC
# builds turn VNNI off for the compiler's own code; the int8 kernels that use vpdpbusd on purpose
# (kernels/cpu/int8_gemm.cc, ggml_block_matvec.cc) enable it per function with target
# attributes and choose their path at run time, as they must for TRIDENT_NATIVE=OFF anyway.
add_library(trident_options INTERFACE)
target_compile_options(trident_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TRIDENT_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TRIDENT_NATIVE}>>:-march=native>
  # No VNNI for GCC's vectorizer (Note [GCC's int8 dot products] above).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<BOOL:${TRIDENT_NATIVE}>>:-mno-avxvnni -mno-avx512vnni>
  # Release code at -O3; test programs' own code at -O1 (Note [Test code at -O1], tests/).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release>>:$<IF:$<BOOL:$<TARGET_PROPERTY:TRIDENT_TEST_CODE>>,-O1,-O3>>
  # Math functions never set errno and float ops never trap in trident: lets loops over
  # sqrt/exp-style code vectorize without -ffast-math (IEEE results are unchanged).
  $<$<COMPILE_LANGUAGE:CXX>:-fno-math-errno -fno-trapping-math>)
if(TRIDENT_SANITIZE)
  target_compile_options(trident_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(trident_options INTERFACE -fsanitize=address,undefined)
endif()
# TRIDENT_FUZZ: every library gets libFuzzer's coverage hooks, ASan and UBSan (a UB report stops
# the run, so the fuzzer records it as a crash), at -O1 with debug info (after the -O3 above:
# the last -O wins). Only the targets in fuzz/ link libFuzzer itself (-fsanitize=fuzzer).
if(TRIDENT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TRIDENT_FUZZ needs clang (libFuzzer): configure with CC=clang CXX=clang++ "
                        "in a build dir of its own (scripts/fuzz.sh does)")
  endif()
  target_compile_options(trident_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
                              -fno-sanitize-recover=undefined>)
  target_link_options(trident_options INTERFACE -fsanitize=address,undefined)
endif()

# trident_layer(name SOURCES... DEPS...): one library per layer of the architecture.
function(trident_layer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC trident_options ${ARG_DEPS})
  trident_library_pch(${name})
endfunction()
