#include "monitor/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/crc32c.h"

namespace trident::monitor {
namespace {

// Protobuf wire format: a key is (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-
// delimited, 5 fixed32.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

template <class T>
void put_fixed(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof v);  // little-endian host (x86-64, aarch64)
  out.append(bytes, sizeof bytes);
}

void put_bytes(std::string& out, int field, const std::string& data) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(out, data.size());
  out += data;
}

std::string event(double wall_time, int64_t step) {
  std::string e;
  put_varint(e, (1 << 3) | 1);
  put_fixed(e, wall_time);
  put_varint(e, (2 << 3) | 0);
  put_varint(e, static_cast<uint64_t>(step));
  return e;
}

}  // namespace

uint32_t tfrecord_masked_crc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

StatusOr<TensorBoardWriter> TensorBoardWriter::create(const std::string& dir) {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string path =
      dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host;
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (f == nullptr) return Status::io_error("cannot create TensorBoard event file '" + path + "': " + std::strerror(errno));
  TensorBoardWriter w(f, path);
  std::string e = event(now, 0);
  put_bytes(e, 3, "brain.Event:2");
  w.write_record(e);
  std::fflush(f);
  return w;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string header;
  put_fixed(header, static_cast<uint64_t>(data.size()));
  put_fixed(header, tfrecord_masked_crc(core::crc32c(header)));
  std::string footer;
  put_fixed(footer, tfrecord_masked_crc(core::crc32c(data)));
  std::fwrite(header.data(), 1, header.size(), file_);
  std::fwrite(data.data(), 1, data.size(), file_);
  std::fwrite(footer.data(), 1, footer.size(), file_);
}

void TensorBoardWriter::write_scalars(int64_t step, double wall_time,
                                      const std::vector<std::pair<std::string, double>>& scalars) {
  if (file_ == nullptr) return;
  std::string summary;
  for (const auto& [tag, v] : scalars) {
    if (!std::isfinite(v)) continue;
    std::string value;
    put_bytes(value, 1, tag);
    put_varint(value, (2 << 3) | 5);
    put_fixed(value, static_cast<float>(v));
    put_bytes(summary, 1, value);
  }
  if (summary.empty()) return;
  std::string e = event(wall_time, step);
  put_bytes(e, 5, summary);
  write_record(e);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_flush_ >= std::chrono::seconds(1)) {
    std::fflush(file_);
    last_flush_ = now;
  }
}

}  // namespace trident::monitor
