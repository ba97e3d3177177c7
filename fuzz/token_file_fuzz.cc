// Fuzzes token files (data/token_file.h): the input is a whole train.bin, uint16 or with the
// TRITOK32 header. An accepted file's ids must all be readable.
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "data/token_file.h"
#include "fuzz_util.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch_file("train.bin", fuzz::as_text(data, size));
  auto file = data::TokenFile::open(path);
  if (!file.is_ok()) return 0;
  const data::TokenFile& f = *file.value();
  const int64_t n = f.size();
  if (n < 0 || static_cast<uint64_t>(n) * f.bytes_per_token() > size)
    fuzz::fail("accepted file says it has " + std::to_string(n) + " tokens, more than its bytes hold");
  std::vector<int64_t> ids(static_cast<size_t>(n));
  f.read(0, n, ids.data());
  (void)f.check_vocab_size(50257);
  (void)f.check_vocab_size(1);
  return 0;
}
