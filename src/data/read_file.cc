// Whole-file reads for the data layer's loaders (read_file.h).
#include "data/read_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace trident::data {

StatusOr<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot open '" + path.string() + "': " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::io_error("error reading '" + path.string() + "'");
  return buf.str();
}

}  // namespace trident::data
