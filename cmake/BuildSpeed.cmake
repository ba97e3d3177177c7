# What makes a fresh build shorter without changing what is built (CI builds everything on 2
# cores within its time budget, .ci/run).
#
# Note [Precompiled headers in the library]
# A library file's own code is small beside what it includes: checkpoint/manifest.cc preprocesses
# to 134k lines, 104k of them libstdc++'s (C++20's <algorithm> brings the ranges algorithms) and
# 18k nlohmann/json's, and GCC 12 spent 44% of its time there parsing (-ftime-report: 8.5 of 19.1 s
# user; the rest is template instantiation and -O3 code generation, which a header cannot save).
# So every layer compiles those headers once into a precompiled header of its own (each layer's
# flags and definitions differ, and GCC uses a PCH only with the flags it was built with) and its
# files start from it. Tests have theirs (Note [Test code at -O1] in tests/). A file with options
# of its own skips it (set_source_files_properties ... SKIP_PRECOMPILE_HEADERS). Only C++: the
# CUDA layer's .cu files are nvcc's. The headers still need their #include in each file.
# Off by default, as measured: alone, manifest.cc went 18.8 -> 12.9 s, but in a fresh 2-core
# build (ninja's 4 jobs) the 268 library objects took 1908 job-seconds against 1730 without it,
# plus 285 s for the 20 PCHs: each ~110 MB PCH is loaded by every file of its layer, and most
# files (kernels, ops) parse little of what it holds. A PCH of what one layer's files share
# would have to be chosen per layer; not done.
option(TRIDENT_PCH "Precompiled headers for each library layer (Note [Precompiled headers in the library])" OFF)
set(TRIDENT_LIBRARY_PCH_HEADERS
  algorithm array atomic chrono cmath cstdint cstdio cstdlib cstring filesystem fstream functional
  map memory mutex optional set sstream string string_view thread unordered_map utility vector
  nlohmann/json.hpp)

# trident_library_pch(target): the layer's precompiled header (above), unless TRIDENT_PCH is off.
function(trident_library_pch target)
  if(NOT TRIDENT_PCH)
    return()
  endif()
  set(headers)
  foreach(h ${TRIDENT_LIBRARY_PCH_HEADERS})
    # $<ANGLE-R>: a bare '>' would end the generator expression.
    list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:<${h}$<ANGLE-R>>")
  endforeach()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()

# Note [lld]
# A fresh build links ~120 programs and libraries (tests, benchmarks, fuzz targets), each test
# pulling most of the static layers: GNU ld spent ~270 s of the 2-core build's job time on them.
# lld (Debian's lld, installed with the test dependencies) links the same objects several times
# faster. Used when the compiler accepts it; only for C++ links (nvcc links its own programs).
include(CheckLinkerFlag)
check_linker_flag(CXX "-fuse-ld=lld" TRIDENT_HAVE_LLD)
option(TRIDENT_LLD "Link with lld when it is installed (Note [lld])" ON)
if(TRIDENT_LLD AND TRIDENT_HAVE_LLD)
  add_link_options($<$<LINK_LANGUAGE:CXX>:-fuse-ld=lld>)
endif()
