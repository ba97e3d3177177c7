# Compiler flags shared by every trident target.
add_library(trident_options INTERFACE)
target_compile_options(trident_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TRIDENT_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TRIDENT_NATIVE}>>:-march=native>
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
endfunction()
