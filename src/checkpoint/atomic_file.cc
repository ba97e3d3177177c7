#include "checkpoint/atomic_file.h"

#include <utility>

#include "core/crc32c.h"
#include "checkpoint/status_macros.h"

namespace trident::checkpoint {

std::string AtomicFileWriter::temp_path_for(std::string_view path) {
  // Built by appending: GCC 12 warns falsely (-Wrestrict, PR 105329) on "literal" + string&&.
  std::string name = ".";
  name += base_name(path);
  name += ".tmp";
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? name : join_path(path.substr(0, slash + 1), name);
}

StatusOr<AtomicFileWriter> AtomicFileWriter::create(Env* env, std::string path) {
  std::string temp = temp_path_for(path);
  // new_writable_file truncates a stale temporary from an earlier crash.
  CKPT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->new_writable_file(temp));
  return AtomicFileWriter(env, std::move(path), std::move(temp), std::move(file));
}

AtomicFileWriter::AtomicFileWriter(Env* env, std::string path, std::string temp_path,
                                   std::unique_ptr<WritableFile> file)
    : env_(env), path_(std::move(path)), temp_path_(std::move(temp_path)), file_(std::move(file)) {}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : env_(other.env_),
      path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      file_(std::move(other.file_)),
      size_(other.size_),
      crc32c_(other.crc32c_) {}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& other) noexcept {
  if (this != &other) {
    abandon();
    env_ = other.env_;
    path_ = std::move(other.path_);
    temp_path_ = std::move(other.temp_path_);
    file_ = std::move(other.file_);
    size_ = other.size_;
    crc32c_ = other.crc32c_;
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() {
  abandon();
}

void AtomicFileWriter::abandon() {
  if (!file_) return;
  // Best effort: if the disk is failing these fail too, and the stale temporary is replaced by
  // the next writer of this path or removed with its checkpoint directory.
  (void)file_->close();
  file_.reset();
  (void)env_->remove_file(temp_path_);
}

Status AtomicFileWriter::append(std::string_view data) {
  if (!file_) return Status::io_error("append to '" + path_ + "' after commit");
  CKPT_RETURN_IF_ERROR(file_->append(data));
  size_ += data.size();
  crc32c_ = core::crc32c_extend(crc32c_, data.data(), data.size());
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  if (!file_) return Status::io_error("commit of '" + path_ + "' twice");
  Status s = file_->sync();
  if (s.is_ok()) s = file_->close();
  if (s.is_ok()) s = env_->rename(temp_path_, path_);
  if (!s.is_ok()) {
    abandon();
    return s;
  }
  file_.reset();
  return env_->sync_dir(parent_dir(path_));
}

StatusOr<WrittenFile> write_file_atomically(Env* env, const std::string& path,
                                            std::string_view data) {
  CKPT_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::create(env, path));
  CKPT_RETURN_IF_ERROR(writer.append(data));
  CKPT_RETURN_IF_ERROR(writer.commit());
  return WrittenFile{path, writer.size(), writer.crc32c()};
}

}  // namespace trident::checkpoint
