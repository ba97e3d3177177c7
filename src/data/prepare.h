// Preparing token files from text: what `trident prepare` does.
//
// Each input file is one document. The documents are tokenized in order (their text is
// ordinary text: a literal "<|endoftext|>" inside a document is not the special token) and
// concatenated, with the tokenizer's end-of-text token between consecutive documents when it
// has one (GPT-2: 50256; the byte tokenizer has none, so documents are simply joined). The
// last val_fraction of the tokens becomes val.bin and the rest train.bin, published together
// into out_dir: a prepare killed or failing leaves the old pair (Note [Publishing train.bin and
// val.bin together] in prepare.cc). With val_fraction 0 every token goes to
// train.bin and no val.bin is left in out_dir (an older one is removed: it would hold tokens
// that are now training data). A single document gives exactly the tokens
// tiktoken's encode_ordinary gives for the file, so a PyTorch script tokenizing the same file
// sees the same stream.
// JSONL inputs (instruction and chat data) are tokenized as data/instruction_data.h says, with
// a loss mask per file published with the pair; a text prepare removes older masks (they would
// describe tokens that are gone).
// Not here: deduplication, shuffling documents, sharding into many files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/status.h"
#include "data/tokenizer.h"

namespace trident::data {

struct PrepareOptions {
  // Text files, one document each, in this order.
  std::vector<std::filesystem::path> inputs;
  // Where train.bin and val.bin go (created if missing; existing files are replaced).
  std::filesystem::path out_dir;
  // The fraction of tokens, taken from the end, that forms val.bin: 0 <= val_fraction < 1
  // (0: no validation split).
  double val_fraction = 0.1;
  // Inputs ending in .jsonl are instruction or chat data (data/instruction_data.h): tokenized
  // with a loss mask, written beside the pair (train.mask, val.mask, data/loss_mask.h), the
  // split at an example's end. "messages" examples are rendered by this template.
  std::string chat_template = "plain";
};

struct PrepareResult {
  int64_t documents = 0;
  int64_t input_bytes = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  std::filesystem::path train_path, val_path;  // val_path empty: no validation split
  bool removed_old_val = false;                // val_fraction 0 removed an older val.bin
  int bytes_per_token = 2;                     // 4: uint32 files (a vocabulary past 65,536 ids)
  bool masks = false;                          // instruction data: train.mask (and val.mask) written
  int64_t trained_tokens = 0;                  // with masks: tokens trained on, both files
};

// Errors name the file and what is wrong: an unreadable input (kIO), text the tokenizer
// rejects (kValue, with the byte offset: invalid UTF-8 for GPT-2), a val_fraction outside
// [0, 1) or one that leaves a split empty, a failed write. A vocabulary past 65,536 ids writes
// uint32 files (data/token_file.h, Note [uint32 token files]).
StatusOr<PrepareResult> prepare_token_files(const Tokenizer& tokenizer,
                                            const PrepareOptions& options);

// Completes the publication of a pair that a prepare killed while renaming left in `out_dir`
// (its prepare.pending marker): renames train.bin.new and val.bin.new over train.bin and
// val.bin, or removes val.bin for a pair without one. Nothing to do (no marker) is OK;
// `finished` (optional) says whether there was. prepare_token_files calls it first. Errors:
// kIO naming the file.
// The marker of a publication in progress (Note [Publishing train.bin and val.bin together]):
// while it is in a directory, its train.bin and val.bin may be from different prepares, so a
// run refuses them (pending_prepare_error).
inline constexpr const char* kPreparePendingMarker = "prepare.pending";
// An error naming the marker and what to do when the directory of `token_file` holds one; ok
// otherwise.
Status pending_prepare_error(const std::filesystem::path& token_file, const std::string& key);
Status finish_interrupted_prepare(const std::filesystem::path& out_dir, bool* finished = nullptr);

}  // namespace trident::data
