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
  if (tokenizer.vocab_size() > 65536)
    return Status::invalid("the tokenizer " + tokenizer.name() + " has " +
                           std::to_string(tokenizer.vocab_size()) +
                           " ids, but token files store uint16 ids (at most 65536)");
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
  std::vector<uint16_t> narrow(ids.begin(), ids.end());  // ids < vocab_size <= 65536

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec)
    return Status::io_error("cannot create " + options.out_dir.string() + ": " + ec.message());
  result.train_path = options.out_dir / "train.bin";
  if (val > 0) result.val_path = options.out_dir / "val.bin";
  result.train_tokens = total - val;
  result.val_tokens = val;
  const std::span<const uint16_t> all(narrow);
  if (Status s = write_token_file(result.train_path, all.first(static_cast<size_t>(total - val)));
      !s.is_ok())
    return s;
  if (val == 0) {
    const fs::path old = options.out_dir / "val.bin";
    result.removed_old_val = fs::remove(old, ec);
    if (ec) return Status::io_error("cannot remove the older " + old.string() + ": " + ec.message());
    return result;
  }
  if (Status s = write_token_file(result.val_path, all.last(static_cast<size_t>(val))); !s.is_ok())
    return s;
  return result;
}

}  // namespace trident::data
