// Text files -> train.bin / val.bin (see prepare.h).
#include "data/prepare.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/check.h"
#include "data/instruction_data.h"
#include "data/loss_mask.h"
#include "data/token_file.h"

namespace trident::data {

// Note [Publishing train.bin and val.bin together]
// Q: A prepare killed (or failing: a full disk) after writing train.bin but before val.bin left
// a new train.bin beside the old val.bin: a run then evaluates on tokens it trains on, or on
// another corpus, and nothing says so. How are the two published together?
// A: POSIX renames one name at a time, so a pair needs a little redo log (leveldb's CURRENT
// idea):
//   1. both files are written in full under temporary names, train.bin.new and val.bin.new
//      (each written, fsynced and renamed into place by write_token_file). A kill or an error
//      here leaves the old pair untouched; the .new files are garbage the next prepare
//      overwrites;
//   2. the marker prepare.pending is written and fsynced: from now on the new pair is decided;
//   3. val.bin.new is renamed to val.bin (or, with val_fraction 0, the old val.bin removed),
//      train.bin.new to train.bin, the directory fsynced, and the marker removed.
// A kill inside step 3 leaves the marker: the next prepare of that directory finishes the
// renames first (finish_interrupted_prepare), whatever it then goes on to do. Between a kill
// in step 3 and that, the pair can be mixed for as long as the marker is there; the window is
// two rename calls, where the old order had a whole val.bin write (the test kills prepare with
// a file-size limit that val.bin passes: tests/train/run_folder_test.py).
// Not chosen: a manifest of both files' sizes and checksums checked by every reader (the
// trainer, eval, and every script that reads nanoGPT's .bin files would all have to know it),
// or a directory swapped by a symlink (train.bin would no longer be a plain file).
namespace {

constexpr const char* kPendingMarker = kPreparePendingMarker;

Status fsync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int rc = fd < 0 ? -1 : ::fsync(fd);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (rc != 0) return Status::io_error("cannot fsync the directory " + dir.string() + ": " + std::strerror(err));
  return Status::ok();
}

Status write_marker(const std::filesystem::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  if (!ok) return Status::io_error("cannot write " + path.string() + ": " + std::strerror(err));
  return fsync_dir(path.parent_path());
}

}  // namespace

Status pending_prepare_error(const std::filesystem::path& token_file, const std::string& key) {
  std::error_code ec;
  const std::filesystem::path marker = token_file.parent_path() / kPendingMarker;
  if (!std::filesystem::exists(marker, ec)) return Status::ok();
  const std::string dir = token_file.parent_path().string();
  return Status::invalid(key + " '" + token_file.string() + "': " + marker.string() +
                         " is there: a `trident prepare` into " + dir +
                         " stopped while publishing train.bin and val.bin together, so the two may come from "
                         "different corpora. Run that `trident prepare` again (it finishes the publication first), "
                         "or finish it by hand: the .new files replace train.bin and val.bin, then remove the marker");
}

Status finish_interrupted_prepare(const std::filesystem::path& out_dir, bool* finished) {
  namespace fs = std::filesystem;
  if (finished != nullptr) *finished = false;
  std::error_code ec;
  const fs::path marker = out_dir / kPendingMarker;
  if (!fs::exists(marker, ec)) return Status::ok();
  // The marker's one line says whether the new pair has a val.bin ("val") or not ("no-val"),
  // and whether it has loss masks (" masks": instruction data) or not.
  std::ifstream in(marker);
  std::string what;
  std::getline(in, what);
  const bool masks = what.ends_with(" masks");
  if (masks) what.resize(what.size() - std::string(" masks").size());
  if (what != "val" && what != "no-val") {  // cut before its fsync: step 3 never began
    fs::remove(marker, ec);
    return Status::ok();
  }
  for (const char* name : {"val.mask", "val.bin", "train.mask", "train.bin"}) {
    const std::string n = name;
    const fs::path from = out_dir / (n + ".new"), to = out_dir / name;
    const bool gone = (n.starts_with("val.") && what == "no-val") || (n.ends_with(".mask") && !masks);
    if (gone) {
      fs::remove(to, ec);
    } else if (fs::exists(from, ec)) {
      fs::rename(from, to, ec);
    }
    if (ec) return Status::io_error("prepare: cannot publish " + to.string() + ": " + ec.message());
  }
  if (Status s = fsync_dir(out_dir); !s.is_ok()) return s;
  fs::remove(marker, ec);
  if (ec) return Status::io_error("prepare: cannot remove " + marker.string() + ": " + ec.message());
  if (finished != nullptr) *finished = true;
  return fsync_dir(out_dir);
}

StatusOr<PrepareResult> prepare_token_files(const Tokenizer& tokenizer,
                                            const PrepareOptions& options) {
  namespace fs = std::filesystem;
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0))
    return Status::invalid("val_fraction must be in [0, 1) (0: no validation split), got " +
                           std::to_string(options.val_fraction));
  if (options.inputs.empty()) return Status::invalid("no input files to prepare");

  PrepareResult result;
  std::vector<TokenId> ids;
  std::vector<uint8_t> mask;            // instruction data only
  std::vector<int64_t> example_ends;    // where the split may fall (instruction data)
  int64_t jsonl = 0;
  for (const fs::path& input : options.inputs) jsonl += input.extension() == ".jsonl" ? 1 : 0;
  if (jsonl > 0 && jsonl < static_cast<int64_t>(options.inputs.size()))
    return Status::invalid("prepare: some inputs are .jsonl (instruction or chat data, trained with a loss mask) and "
                           "some are text: prepare them into separate directories");
  if (jsonl > 0) {
    auto tokens = tokenize_instruction_files(tokenizer, options.inputs, options.chat_template);
    if (!tokens.is_ok()) return tokens.status();
    ids = std::move(tokens.value().ids);
    mask = std::move(tokens.value().mask);
    example_ends = std::move(tokens.value().example_ends);
    result.documents = static_cast<int64_t>(example_ends.size());
    result.input_bytes = tokens.value().bytes;
    result.masks = true;
  }
  for (const fs::path& input : jsonl > 0 ? std::vector<fs::path>{} : options.inputs) {
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
  auto val = static_cast<int64_t>(std::llround(static_cast<double>(total) * options.val_fraction));
  if (val > 0 && !example_ends.empty()) {  // instruction data: split at the first example end past the share
    int64_t at = total;
    for (int64_t end : example_ends)
      if (end >= total - val) {
        at = end;
        break;
      }
    if (at == total)  // the last example is longer than the share: split before it
      at = example_ends.size() > 1 ? example_ends[example_ends.size() - 2] : total;
    val = total - at;
  }
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
  // An earlier prepare killed while publishing: its pair first (Note [Publishing train.bin and val.bin together]).
  if (Status s = finish_interrupted_prepare(options.out_dir); !s.is_ok()) return s;
  result.train_path = options.out_dir / "train.bin";
  if (val > 0) result.val_path = options.out_dir / "val.bin";
  result.train_tokens = total - val;
  result.val_tokens = val;
  // 1. Both files under temporary names; 2. the marker; 3. the renames.
  const fs::path train_new = options.out_dir / "train.bin.new", val_new = options.out_dir / "val.bin.new";
  if (Status s = write(train_new, 0, static_cast<size_t>(total - val)); !s.is_ok()) return s;
  if (val > 0) {
    if (Status s = write(val_new, static_cast<size_t>(total - val), static_cast<size_t>(val)); !s.is_ok()) {
      fs::remove(train_new, ec);
      return s;
    }
  }
  if (result.masks) {
    const std::span<const uint8_t> m(mask);
    Status s = write_loss_mask(options.out_dir / "train.mask.new", m.subspan(0, static_cast<size_t>(total - val)));
    if (s.is_ok() && val > 0)
      s = write_loss_mask(options.out_dir / "val.mask.new", m.subspan(static_cast<size_t>(total - val)));
    if (!s.is_ok()) return s;
    for (uint8_t b : mask) result.trained_tokens += b;
  }
  result.removed_old_val = val == 0 && fs::exists(options.out_dir / "val.bin", ec);
  const std::string marker = std::string(val > 0 ? "val" : "no-val") + (result.masks ? " masks" : "") + "\n";
  if (Status s = write_marker(options.out_dir / kPendingMarker, marker); !s.is_ok()) return s;
  if (Status s = finish_interrupted_prepare(options.out_dir); !s.is_ok()) return s;
  return result;
}

}  // namespace trident::data
