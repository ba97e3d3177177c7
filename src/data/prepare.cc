// Text files -> train.bin / val.bin (see prepare.h).
#include "data/prepare.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "core/check.h"
#include "data/token_file.h"

namespace trident::data {

StatusOr<PrepareResult> prepare_token_files(const Tokenizer& tokenizer,
                                            const PrepareOptions& options) {
  namespace fs = std::filesystem;
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0))
    return Status::invalid("val_fraction must be in [0, 1) (0: no validation split), got " +
                           std::to_string(options.val_fraction));
  if (options.inputs.empty()) return Status::invalid("no input files to prepare");

  PrepareResult result;
  std::vector<TokenId> ids;
  for (const fs::path& input : options.inputs) {
    std::ifstream in(input, std::ios::binary);
    if (!in) return Status::io_error("cannot open input " + input.string());
    std::ostringstream buf;
    buf << in.rdbuf();
    if (in.bad()) return Status::io_error("cannot read input " + input.string());
    const std::string text = std::move(buf).str();
    if (result.documents > 0 && tokenizer.eot_id()) ids.push_back(*tokenizer.eot_id());
    try {
      tokenizer.encode_append(text, /*allow_special=*/false, ids);
    } catch (const Error& e) {
      return Status::invalid(input.string() + ": " + e.message());
    }
    ++result.documents;
    result.input_bytes += static_cast<int64_t>(text.size());
  }

  const auto total = static_cast<int64_t>(ids.size());
  if (total == 0) return Status::invalid("the input files hold no text: nothing to prepare");
  const auto val =
      static_cast<int64_t>(std::llround(static_cast<double>(total) * options.val_fraction));
  if ((val == 0 && options.val_fraction > 0.0) || val == total)
    return Status::invalid("val_fraction " + std::to_string(options.val_fraction) + " of " +
                           std::to_string(total) + " tokens leaves " +
                           (val == 0 ? "val.bin" : "train.bin") + " empty");
  // nanoGPT's uint16 files while the ids fit, else uint32 with the header (Note [uint32 token files]).
  const bool wide = tokenizer.vocab_size() > 65536;
  result.bytes_per_token = wide ? 4 : 2;
  std::vector<uint16_t> narrow;
  std::vector<uint32_t> wide_ids;
  if (wide) wide_ids.assign(ids.begin(), ids.end());
  else narrow.assign(ids.begin(), ids.end());
  auto write = [&](const fs::path& path, size_t first, size_t count) {
    return wide ? write_token_file32(path, std::span<const uint32_t>(wide_ids).subspan(first, count))
                : write_token_file(path, std::span<const uint16_t>(narrow).subspan(first, count));
  };

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec)
    return Status::io_error("cannot create " + options.out_dir.string() + ": " + ec.message());
  result.train_path = options.out_dir / "train.bin";
  if (val > 0) result.val_path = options.out_dir / "val.bin";
  result.train_tokens = total - val;
  result.val_tokens = val;
  if (Status s = write(result.train_path, 0, static_cast<size_t>(total - val)); !s.is_ok()) return s;
  if (val == 0) {
    const fs::path old = options.out_dir / "val.bin";
    result.removed_old_val = fs::remove(old, ec);
    if (ec) return Status::io_error("cannot remove the older " + old.string() + ": " + ec.message());
    return result;
  }
  if (Status s = write(result.val_path, static_cast<size_t>(total - val), static_cast<size_t>(val)); !s.is_ok())
    return s;
  return result;
}

}  // namespace trident::data
