// Parses the event file back byte by byte, as TensorBoard's reader would: TFRecord framing
// with both masked CRCs checked, then the Event protobufs' fields.
#include "monitor/tensorboard_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "core/crc32c.h"

namespace trident::monitor {
namespace {

struct Value {
  std::string tag;
  float simple_value = 0;
};
struct Event {
  double wall_time = 0;
  int64_t step = -1;
  std::string file_version;
  std::vector<Value> values;
};

// A minimal protobuf reader over [p, end).
struct Reader {
  const unsigned char* p;
  const unsigned char* end;
  bool done() const { return p >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      EXPECT_LT(p, end);
      const unsigned char b = *p++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  template <class T>
  T fixed() {
    T v;
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  std::string bytes() {
    const uint64_t n = varint();
    std::string s(reinterpret_cast<const char*>(p), n);
    p += n;
    return s;
  }
};

Reader reader_of(const std::string& s) {
  auto* b = reinterpret_cast<const unsigned char*>(s.data());
  return {b, b + s.size()};
}

Value parse_value(const std::string& data) {
  Value v;
  Reader r = reader_of(data);
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == ((1 << 3) | 2)) v.tag = r.bytes();
    else if (key == ((2 << 3) | 5)) v.simple_value = r.fixed<float>();
    else ADD_FAILURE() << "unexpected key in Summary.Value: " << key;
  }
  return v;
}

Event parse_event(const std::string& data) {
  Event e;
  Reader r = reader_of(data);
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == ((1 << 3) | 1)) {
      e.wall_time = r.fixed<double>();
    } else if (key == ((2 << 3) | 0)) {
      e.step = static_cast<int64_t>(r.varint());
    } else if (key == ((3 << 3) | 2)) {
      e.file_version = r.bytes();
    } else if (key == ((5 << 3) | 2)) {
      const std::string summary = r.bytes();  // outlives the reader over it
      Reader s = reader_of(summary);
      while (!s.done()) {
        EXPECT_EQ(s.varint(), (1u << 3) | 2) << "Summary holds only values";
        e.values.push_back(parse_value(s.bytes()));
      }
    } else {
      ADD_FAILURE() << "unexpected key in Event: " << key;
      return e;
    }
  }
  return e;
}

std::vector<Event> parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  std::vector<Event> events;
  size_t pos = 0;
  while (pos < file.size()) {
    EXPECT_LE(pos + 12, file.size()) << "truncated record header at " << pos;
    uint64_t len;
    uint32_t len_crc, data_crc;
    std::memcpy(&len, file.data() + pos, 8);
    std::memcpy(&len_crc, file.data() + pos + 8, 4);
    EXPECT_EQ(len_crc, tfrecord_masked_crc(core::crc32c(file.data() + pos, 8))) << "length CRC at " << pos;
    EXPECT_LE(pos + 12 + len + 4, file.size()) << "truncated record at " << pos;
    const std::string data = file.substr(pos + 12, len);
    std::memcpy(&data_crc, file.data() + pos + 12 + len, 4);
    EXPECT_EQ(data_crc, tfrecord_masked_crc(core::crc32c(data))) << "data CRC at " << pos;
    events.push_back(parse_event(data));
    pos += 12 + len + 4;
  }
  return events;
}

TEST(TensorBoardWriter, MaskedCrcMatchesTensorFlow) {
  // TensorFlow's masked CRC of an empty string's CRC-32C (0): ((0 >> 15) | (0 << 17)) + 0xa282ead8.
  EXPECT_EQ(tfrecord_masked_crc(0), 0xa282ead8u);
  // crc32c("123456789") = 0xe3069283 (the standard check value); rotated right by 15 plus the delta.
  const uint32_t crc = 0xe3069283u;
  EXPECT_EQ(tfrecord_masked_crc(crc), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
  EXPECT_EQ(core::crc32c("123456789"), crc);
}

TEST(TensorBoardWriter, FileParsesBackRecordByRecord) {
  const std::string dir = ::testing::TempDir() + "/tb_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string path;
  {
    auto w = TensorBoardWriter::create(dir);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    path = w.value().path();
    w.value().write_scalars(1, 1000.5, {{"train/loss", 4.25}, {"train/lr", 6e-4}});
    w.value().write_scalars(2, 1001.5, {{"train/loss", std::nan("")}, {"val/loss", 3.5}});
    w.value().write_scalars(3, 1002.5, {{"train/loss", std::nan("")}});  // nothing finite: no event
  }
  EXPECT_TRUE(std::filesystem::path(path).filename().string().starts_with("events.out.tfevents."));
  const std::vector<Event> events = parse_file(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].step, 1);
  EXPECT_EQ(events[1].wall_time, 1000.5);
  ASSERT_EQ(events[1].values.size(), 2u);
  EXPECT_EQ(events[1].values[0].tag, "train/loss");
  EXPECT_EQ(events[1].values[0].simple_value, 4.25f);
  EXPECT_EQ(events[1].values[1].tag, "train/lr");
  EXPECT_EQ(events[1].values[1].simple_value, 6e-4f);
  EXPECT_EQ(events[2].step, 2);
  ASSERT_EQ(events[2].values.size(), 1u);
  EXPECT_EQ(events[2].values[0].tag, "val/loss");
  EXPECT_EQ(events[2].values[0].simple_value, 3.5f);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trident::monitor
