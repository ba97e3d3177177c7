// The tensor-parallel style registry (tp_style_registry.h): storage, lookup, and the one place
// the library's own styles are registered from.
#include "parallel/tp_style_registry.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>

#include "core/check.h"
#include "parallel/tp_styles.h"

namespace trident::parallel {

void TpStyleRegistry::add(TpStyle style) {
  TRI_CHECK(find(style.name, style.layer) == nullptr, "tensor parallelism: style '", style.name,
            "' is registered twice for ", layer_type_name(style.layer));
  styles_.push_back(std::move(style));
}

const TpStyle* TpStyleRegistry::find(const std::string& name, std::type_index layer) const {
  for (const TpStyle& s : styles_)
    if (s.layer == layer && s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> TpStyleRegistry::styles_for(std::type_index layer) const {
  std::vector<std::string> out;
  for (const TpStyle& s : styles_)
    if (s.layer == layer) out.push_back(s.name);
  std::sort(out.begin(), out.end());
  return out;
}

// Note [Registering styles]
// Why does the library register its styles from a function rather than from static
// initializers, as TRI_REGISTER_OP does ops?
// A static library's object file is linked only when something refers to it; a file whose
// only tie to the program is a static registrar would be dropped, and its styles with it. The
// op registry survives because autograd is linked whole-archive (TRIDENT_AUTOGRAD_WHOLE in
// src/CMakeLists.txt), which every consumer must then repeat. trident_parallel is a plain
// static library, so its styles register explicitly, from here, when the registry is first
// used: one list, in one place, and a new family of styles adds one call to it. Code linked as
// objects (a program's own files, a test) can register statically with TRI_REGISTER_TP_STYLE:
// the function-local registry is built (with the library's styles) on the first use from
// either side, whatever the order of static initialization.
TpStyleRegistry& tp_style_registry() {
  static TpStyleRegistry registry = [] {
    TpStyleRegistry r;
    register_tp_styles(r);
    return r;
  }();
  return registry;
}

std::string layer_type_name(std::type_index type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : type.name();
  std::free(demangled);
  if (name.starts_with("trident::")) name.erase(0, 9);
  return name;
}

}  // namespace trident::parallel
