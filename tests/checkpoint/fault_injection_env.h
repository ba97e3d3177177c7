// FaultInjectionEnv: an Env for tests, over a real directory, that can make chosen operations
// fail and can simulate a crash (power loss) by forgetting everything that was not made
// durable, after leveldb's fault_injection_test.cc.
//
// The durability model (pessimistic, what POSIX promises and no more):
//   - bytes appended to a file are durable once WritableFile::sync() returns; a crash cuts
//     every file back to its size at its last sync (a file truncated on open loses its old
//     contents);
//   - creating, renaming or removing an entry in a directory is durable once sync_dir() of that
//     directory returns; a crash undoes the others, newest first (a rename is renamed back,
//     restoring a file it replaced; a removed file or directory comes back; a created one goes).
// Renames must stay within one directory (the checkpoint protocol's only kind), so one
// directory sync decides their fate.
//
// Faults: mutating operations (open for write, append, sync, close, create/remove/rename,
// sync_dir) are numbered from 0. fail_from(k) makes operation k and every later one fail, as
// if the process died at k; fail_only(k) fails just k (a transient error), fail_first("rename")
// the first operation of that description. Reads never fail.
//
// Single-threaded: tests drive it from one thread.
//
// Not modelled: torn writes inside a synced range, reordering of synced data, an empty
// directory replaced by a rename (it is not restored), files that keep unsynced data after a
// crash (a test gets that case by not calling crash() at all).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/env.h"
#include "core/check.h"

namespace trident::checkpoint::testing {

class FaultInjectionEnv final : public Env {
 public:
  explicit FaultInjectionEnv(Env* base = default_env()) : base_(base) {}

  // ---- faults ----
  // Each of these replaces the faults set before.
  void fail_from(int64_t op) {
    clear_faults();
    fail_from_ = op;
  }
  void fail_only(int64_t op) {
    clear_faults();
    fail_only_ = op;
  }
  // Fails the first operation whose op_log() line contains `what` ("rename", "sync ", a path).
  void fail_first(std::string what) {
    clear_faults();
    fail_first_ = std::move(what);
  }
  void clear_faults() {
    fail_from_ = fail_only_ = -1;
    fail_first_.clear();
  }
  // Mutating operations so far (the number the next one gets).
  int64_t op_count() const { return op_count_; }
  // One line per mutating operation, for messages: "7 rename a -> b".
  const std::vector<std::string>& op_log() const { return op_log_; }

  // ---- crashes ----
  // Power loss now: drops unsynced data and undoes unsynced directory changes, on disk. Files
  // still open become unusable. Afterwards everything on disk counts as durable.
  void crash() {
    for (auto& [id, f] : files_) {
      if (f.size > f.synced && base_->file_type(f.path) == FileType::kFile) {
        rewrite(f.path, read_all(f.path).substr(0, f.synced));
      }
    }
    for (auto it = journal_.rbegin(); it != journal_.rend(); ++it) undo(*it);
    forget_history();
  }
  // Declares everything on disk durable (after a test's setup).
  void forget_history() {
    files_.clear();
    journal_.clear();
  }

  // ---- Env ----
  StatusOr<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) override {
    if (Status s = fault("open for writing", path); !s.is_ok()) return s;
    const bool existed = exists(base_, path);
    auto file = base_->new_writable_file(path);
    if (!file.is_ok()) return file.status();
    forget_file(path);
    if (!existed)
      journal_.push_back({DirOp::kCreateFile, parent_dir(path), base_name(path), "", {}});
    const int64_t id = next_file_id_++;
    files_[id] = FileState{path, 0, 0};
    return std::unique_ptr<WritableFile>(new File(this, id, std::move(file).value()));
  }
  StatusOr<std::unique_ptr<RandomAccessFile>> new_random_access_file(
      const std::string& path) override {
    return base_->new_random_access_file(path);
  }
  StatusOr<uint64_t> file_size(const std::string& path) override { return base_->file_size(path); }
  FileType file_type(const std::string& path) override { return base_->file_type(path); }
  StatusOr<std::vector<std::string>> list_dir(const std::string& dir) override {
    return base_->list_dir(dir);
  }
  Status create_dir(const std::string& dir) override {
    if (Status s = fault("create directory", dir); !s.is_ok()) return s;
    Status s = base_->create_dir(dir);
    if (s.is_ok()) journal_.push_back({DirOp::kCreateDir, parent_dir(dir), base_name(dir), "", {}});
    return s;
  }
  Status remove_file(const std::string& path) override {
    if (Status s = fault("remove file", path); !s.is_ok()) return s;
    std::optional<std::string> saved;
    if (base_->file_type(path) == FileType::kFile) saved = durable_contents(path);
    Status s = base_->remove_file(path);
    if (!s.is_ok()) return s;
    forget_file(path);
    journal_.push_back(
        {DirOp::kRemoveFile, parent_dir(path), base_name(path), "", std::move(saved)});
    return s;
  }
  Status remove_dir(const std::string& dir) override {
    if (Status s = fault("remove directory", dir); !s.is_ok()) return s;
    Status s = base_->remove_dir(dir);
    if (s.is_ok()) journal_.push_back({DirOp::kRemoveDir, parent_dir(dir), base_name(dir), "", {}});
    return s;
  }
  Status rename(const std::string& from, const std::string& to) override {
    if (Status s = fault("rename", from + " -> " + to); !s.is_ok()) return s;
    TRI_CHECK(parent_dir(from) == parent_dir(to),
              "FaultInjectionEnv models renames within one "
              "directory only: '",
              from, "' -> '", to, "'");
    std::optional<std::string> replaced;
    if (base_->file_type(to) == FileType::kFile) replaced = durable_contents(to);
    Status s = base_->rename(from, to);
    if (!s.is_ok()) return s;
    forget_file(to);
    for (auto& [id, f] : files_) f.path = moved(f.path, from, to);
    // Entries name the directory by its current path (a renamed directory is the same
    // directory: syncing it under its new name makes its entries durable) and the entries in
    // it by the names they had then (undo runs newest first, restoring those names).
    for (DirOp& op : journal_) op.dir = moved(op.dir, from, to);
    journal_.push_back(
        {DirOp::kRename, parent_dir(to), base_name(from), base_name(to), std::move(replaced)});
    return s;
  }
  Status sync_dir(const std::string& dir) override {
    if (Status s = fault("sync directory", dir); !s.is_ok()) return s;
    Status s = base_->sync_dir(dir);
    if (s.is_ok()) {
      std::erase_if(journal_, [&](const DirOp& op) { return op.dir == dir; });
    }
    return s;
  }

 private:
  struct FileState {
    std::string path;
    uint64_t size = 0;    // bytes appended
    uint64_t synced = 0;  // bytes durable
  };
  struct DirOp {
    enum Kind { kCreateFile, kCreateDir, kRemoveFile, kRemoveDir, kRename } kind;
    std::string dir;  // the directory whose sync makes this durable, by its current path
    std::string a;    // the name created/removed in it, or the rename's source name
    std::string b;    // the rename's destination name
    std::optional<std::string> saved;  // contents of a removed or replaced file
  };

  class File final : public WritableFile {
   public:
    File(FaultInjectionEnv* env, int64_t id, std::unique_ptr<WritableFile> base)
        : env_(env), id_(id), base_(std::move(base)) {}
    Status append(std::string_view data) override {
      FileState* f = state();
      if (f == nullptr) return Status::io_error("write to a file opened before a crash");
      if (Status s = env_->fault("append to", f->path); !s.is_ok()) return s;
      Status s = base_->append(data);
      if (s.is_ok()) f->size += data.size();
      return s;
    }
    Status sync() override {
      FileState* f = state();
      if (f == nullptr) return Status::io_error("sync of a file opened before a crash");
      if (Status s = env_->fault("sync", f->path); !s.is_ok()) return s;
      Status s = base_->sync();
      if (s.is_ok()) f->synced = f->size;
      return s;
    }
    Status close() override {
      // The descriptor is released either way: a failed close has no effect on durability.
      Status closed = base_->close();
      FileState* f = state();
      if (f != nullptr) {
        if (Status s = env_->fault("close", f->path); !s.is_ok()) return s;
      }
      return closed;
    }

   private:
    FileState* state() {
      auto it = env_->files_.find(id_);
      return it == env_->files_.end() ? nullptr : &it->second;
    }
    FaultInjectionEnv* env_;
    int64_t id_;
    std::unique_ptr<WritableFile> base_;
  };

  Status fault(const char* what, const std::string& path) {
    const int64_t op = op_count_++;
    op_log_.push_back(std::to_string(op) + " " + what + " " + path);
    bool fail = (fail_from_ >= 0 && op >= fail_from_) || op == fail_only_;
    if (!fail_first_.empty() && op_log_.back().find(fail_first_) != std::string::npos) {
      fail = true;
      fail_first_.clear();
    }
    if (fail) {
      return Status::io_error(std::string("injected fault at operation ") + std::to_string(op) +
                              ": " + what + " '" + path + "'");
    }
    return Status::ok();
  }

  // `path` with a leading `from` (the path itself or a directory above it) replaced by `to`.
  static std::string moved(const std::string& path, const std::string& from,
                           const std::string& to) {
    if (path == from) return to;
    if (path.size() > from.size() && path.compare(0, from.size(), from) == 0 &&
        path[from.size()] == '/') {
      return to + path.substr(from.size());
    }
    return path;
  }

  void forget_file(const std::string& path) {
    std::erase_if(files_, [&](const auto& entry) { return entry.second.path == path; });
  }

  std::string read_all(const std::string& path) { return read_file(base_, path).value(); }

  // What a crash now would leave of `path`'s contents.
  std::string durable_contents(const std::string& path) {
    std::string data = read_all(path);
    for (const auto& [id, f] : files_)
      if (f.path == path) data.resize(std::min<uint64_t>(data.size(), f.synced));
    return data;
  }

  void rewrite(const std::string& path, const std::string& data) {
    auto file = base_->new_writable_file(path).value();
    file->append(data).throw_if_error();
    file->close().throw_if_error();
  }

  void undo(const DirOp& op) {
    const std::string a = join_path(op.dir, op.a), b = join_path(op.dir, op.b);
    switch (op.kind) {
      case DirOp::kCreateFile:
      case DirOp::kCreateDir:
        if (exists(base_, a)) remove_tree(base_, a).throw_if_error();
        break;
      case DirOp::kRemoveFile:
        if (op.saved) rewrite(a, *op.saved);
        break;
      case DirOp::kRemoveDir:
        if (!exists(base_, a)) base_->create_dir(a).throw_if_error();
        break;
      case DirOp::kRename:
        TRI_ASSERT(exists(base_, b), "FaultInjectionEnv: undoing rename to '", b,
                   "', which is gone");
        base_->rename(b, a).throw_if_error();
        if (op.saved) rewrite(b, *op.saved);
        break;
    }
  }

  Env* base_;
  int64_t op_count_ = 0;
  int64_t fail_from_ = -1;
  int64_t fail_only_ = -1;
  std::string fail_first_;
  std::vector<std::string> op_log_;
  int64_t next_file_id_ = 0;
  std::map<int64_t, FileState> files_;  // files opened for writing since the last crash
  std::vector<DirOp> journal_;          // unsynced directory changes, oldest first
};

}  // namespace trident::checkpoint::testing
