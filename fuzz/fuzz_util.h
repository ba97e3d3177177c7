// Helpers shared by the libFuzzer targets in fuzz/: a scratch directory for parsers that read
// files, and splitting one input into the several files some formats come as.
// Not here: anything a parser's own checks should do (a target only feeds bytes and, where the
// parser accepted them, checks what the accepted value promises).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

namespace trident::fuzz {

// A directory of this process's own (made once, under $TMPDIR or /tmp; left behind on exit, as a
// crashing process cannot clean up anyway: scripts/fuzz.sh removes them).
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/trident-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    return pattern;
  }();
  return dir;
}

// Writes `bytes` to scratch_dir()/name (replacing it) and returns its path.
inline std::string write_scratch_file(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

// The input as two files: the bytes before its first NUL and those after it (the second is empty
// when there is no NUL). Seeds of two-file formats are written as first + '\0' + second.
inline std::pair<std::string_view, std::string_view> split_at_nul(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, {}};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A broken promise of an accepted input: prints it and aborts, which the fuzzer records as a crash.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace trident::fuzz
