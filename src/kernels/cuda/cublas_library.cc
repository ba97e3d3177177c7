#include "kernels/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "core/check.h"

namespace trident::cuda {
namespace {

#define TRI_STRINGIFY_EXPANDED(x) TRI_STRINGIFY(x)
#define TRI_STRINGIFY(x) #x

// The library by its soname ("libcublas.so.13": the toolkit's major version, as linking would
// record it), then by the path CMake found at configure time (a toolkit outside the loader's
// search path). TRIDENT_CUBLAS_SONAME and friends come from src/CMakeLists.txt.
void* open_library(const std::vector<std::string>& names) {
  std::string tried;
  for (const std::string& name : names) {
    if (name.empty()) continue;
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + name + ": " + (why ? why : "unknown error");
  }
  TRI_CHECK(false, "the CUDA backend cannot open cuBLAS for a GPU product (Note [cuBLAS loaded on first use]): ", tried);
}

template <class F>
void resolve(void* library, const char* symbol, const char* library_name, F& out) {
  dlerror();
  void* f = dlsym(library, symbol);
  const char* why = dlerror();
  TRI_CHECK(f != nullptr && why == nullptr, "the CUDA backend: ", library_name, " has no function ", symbol, " (",
            why ? why : "null", "); is it older than the toolkit trident was built with?");
  out = reinterpret_cast<F>(f);
}

CublasLibrary load() {
  void* blas = open_library({TRIDENT_CUBLAS_SONAME, TRIDENT_CUBLAS_PATH});
  void* lt = open_library({TRIDENT_CUBLASLT_SONAME, TRIDENT_CUBLASLT_PATH});
  CublasLibrary l{};
  // TRI_STRINGIFY_EXPANDED: the symbol after cublas_v2.h's macros (cublasCreate -> cublasCreate_v2).
#define TRI_RESOLVE(lib, f) resolve(lib, TRI_STRINGIFY_EXPANDED(f), lib == blas ? "cuBLAS" : "cuBLASLt", l.f)
  TRI_RESOLVE(blas, cublasCreate);
  TRI_RESOLVE(blas, cublasSetMathMode);
  TRI_RESOLVE(blas, cublasGemmEx);
  TRI_RESOLVE(blas, cublasGemmStridedBatchedEx);
  TRI_RESOLVE(blas, cublasGetStatusName);
  TRI_RESOLVE(blas, cublasGetStatusString);
  TRI_RESOLVE(lt, cublasLtCreate);
  TRI_RESOLVE(lt, cublasLtMatmulDescCreate);
  TRI_RESOLVE(lt, cublasLtMatmulDescSetAttribute);
  TRI_RESOLVE(lt, cublasLtMatrixLayoutCreate);
  TRI_RESOLVE(lt, cublasLtMatrixLayoutSetAttribute);
  TRI_RESOLVE(lt, cublasLtMatmulPreferenceCreate);
  TRI_RESOLVE(lt, cublasLtMatmulPreferenceSetAttribute);
  TRI_RESOLVE(lt, cublasLtMatmulPreferenceDestroy);
  TRI_RESOLVE(lt, cublasLtMatmulAlgoGetHeuristic);
  TRI_RESOLVE(lt, cublasLtMatmul);
#undef TRI_RESOLVE
  return l;  // the libraries stay open for the process, as the handles made from them
}

}  // namespace

const CublasLibrary& cublas() {
  static const CublasLibrary library = load();
  return library;
}

}  // namespace trident::cuda
