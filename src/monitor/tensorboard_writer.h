// TensorBoard scalar event files, written without TensorFlow: `events.out.tfevents.<unix
// seconds>.<host>` in a run directory, which `tensorboard --logdir` reads.
//
// The format (TensorFlow's record_writer.cc and event.proto): a sequence of TFRecords,
//   uint64 length (little-endian) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8, and each data is a
// serialized tensorflow.Event protobuf, encoded here by hand:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2", as TensorFlow's writers do.
//
// Not here: images, histograms, or reading files back (the test parses them itself).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace trident::monitor {

// TFRecord's CRC mask, exposed for tests.
uint32_t tfrecord_masked_crc(uint32_t crc);

class TensorBoardWriter {
 public:
  // Creates a new event file in `dir` (which must exist) and writes the file-version event.
  static StatusOr<TensorBoardWriter> create(const std::string& dir);
  TensorBoardWriter(TensorBoardWriter&& other) noexcept
      : file_(std::exchange(other.file_, nullptr)), path_(std::move(other.path_)), last_flush_(other.last_flush_) {}
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;
  ~TensorBoardWriter();

  // One event holding every (tag, value) pair at `step`; non-finite values are left out
  // (TensorBoard plots them as gaps anyway). Flushed when a second has passed since the last
  // flush (a write(2) per step costs a fast run ~1% of its CPU), so a crashed run loses at
  // most its last second of events; destruction flushes the rest.
  void write_scalars(int64_t step, double wall_time, const std::vector<std::pair<std::string, double>>& scalars);
  const std::string& path() const { return path_; }

 private:
  TensorBoardWriter(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  void write_record(const std::string& data);
  std::FILE* file_;
  std::string path_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
};

}  // namespace trident::monitor
