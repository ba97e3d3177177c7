# Third-party libraries, all from Debian's packages (scripts/install-deps.sh installs them).
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)

# OpenBLAS, OpenMP flavour: inside our own parallel regions it runs single-threaded, which
# is how trident makes GEMMs deterministic across thread counts
# (Note [Deterministic GEMM] in src/kernels/cpu/matmul.cc).
find_library(OPENBLAS_LIBRARY NAMES openblas
  PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH)
find_path(OPENBLAS_INCLUDE_DIR cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH)
if(NOT OPENBLAS_LIBRARY OR NOT OPENBLAS_INCLUDE_DIR)
  message(FATAL_ERROR "OpenBLAS (OpenMP flavour) not found: run scripts/install-deps.sh "
                      "(Debian package libopenblas-openmp-dev)")
endif()
add_library(trident_blas INTERFACE)
target_include_directories(trident_blas SYSTEM INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(trident_blas INTERFACE ${OPENBLAS_LIBRARY})

# oneDNN (Debian's 2.6): bf16 GEMMs on CPUs with native bf16 dot products
# (src/kernels/cpu/onednn_gemm.h). Its OpenMP runtime is the one OpenBLAS and trident use.
find_library(DNNL_LIBRARY NAMES dnnl)
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
if(NOT DNNL_LIBRARY OR NOT DNNL_INCLUDE_DIR)
  message(FATAL_ERROR "oneDNN not found: run scripts/install-deps.sh (Debian package libdnnl-dev)")
endif()
add_library(trident_onednn INTERFACE)
target_include_directories(trident_onednn SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(trident_onednn INTERFACE ${DNNL_LIBRARY})

find_package(nlohmann_json 3 REQUIRED)

# MPI (OpenMPI): the communication engine between processes and hosts (src/comm). Only its
# C library is linked.
find_package(MPI REQUIRED COMPONENTS C)

find_package(tomlplusplus 3 REQUIRED)

# PCRE2 (UTF, JIT): the GPT-2 pre-tokenization pattern needs Unicode classes and lookahead.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# SentencePiece (Debian's libsentencepiece-dev): Llama 2 and Mistral tokenizer.model files are
# encoded by the library itself (data/sentencepiece_tokenizer.h); its trainer, in the same
# package, makes the test models.
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
# Monitoring (src/monitor): cpp-httplib serves /metrics and the control API; libcurl sends
# alert notifications (webhooks, SMTP). Debian's libcpp-httplib-dev and libcurl4-openssl-dev.
# Debian builds cpp-httplib as a shared library (httplib.h declares, libcpp-httplib defines).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
if(TRIDENT_BUILD_TESTS)
  find_package(GTest)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "GoogleTest not found, and the tests are on: run scripts/install-deps.sh (all of it: "
                        "--main installs only what the trident binary needs), or configure with "
                        "-DTRIDENT_BUILD_TESTS=OFF")
  endif()
endif()
