// ByteStringMap<V>: a hash map from byte strings to small values, for the tokenizer's hot
// lookups (is this piece a token? what is the merge rank of these bytes? is this piece in the
// cache?). Open addressing with linear probing over a flat slot array, keys stored back to
// back in one buffer: a lookup is one hash, usually one slot and one memcmp, with no pointer
// chasing (std::unordered_map spent most of the encoding time walking its nodes).
// Supports insert, find and clear; no erase. Not thread-safe for writes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trident::data {

template <class V>
class ByteStringMap {
 public:
  explicit ByteStringMap(size_t expected_size = 0) { rehash(capacity_for(expected_size)); }

  size_t size() const { return entries_.size(); }

  const V* find(std::string_view key) const {
    const uint64_t h = hash(key);
    const uint32_t tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.entry == 0) return nullptr;
      if (s.tag == tag) {
        const Entry& e = entries_[s.entry - 1];
        if (e.length == key.size() &&
            std::memcmp(keys_.data() + e.offset, key.data(), key.size()) == 0)
          return &e.value;
      }
    }
  }
  V* find(std::string_view key) {
    return const_cast<V*>(static_cast<const ByteStringMap*>(this)->find(key));
  }

  // Inserts (key, value) unless key is present. Returns the stored value and whether it is new.
  std::pair<V*, bool> insert(std::string_view key, V value) {
    if (V* existing = find(key)) return {existing, false};
    if (2 * (entries_.size() + 1) > slots_.size()) rehash(2 * slots_.size());
    entries_.push_back(Entry{keys_.size(), static_cast<uint32_t>(key.size()), std::move(value)});
    keys_.append(key);
    place(hash(key), static_cast<uint32_t>(entries_.size()));
    return {&entries_.back().value, true};
  }

  void clear() {
    entries_.clear();
    keys_.clear();
    std::fill(slots_.begin(), slots_.end(), Slot{});
  }

  // Keys and values in insertion order.
  template <class Fn>
  void for_each(const Fn& fn) const {
    for (const Entry& e : entries_) fn(std::string_view(keys_).substr(e.offset, e.length), e.value);
  }

  static uint64_t hash(std::string_view key) {
    auto mix = [](uint64_t x) {
      x ^= x >> 32;
      x *= 0xd6e8feb86659fd93ull;
      x ^= x >> 32;
      return x;
    };
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (key.size() * 0xff51afd7ed558ccdull);
    size_t i = 0;
    for (; i + 8 <= key.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, key.data() + i, 8);
      h = mix(h ^ w);
    }
    if (i < key.size()) {
      uint64_t w = 0;
      std::memcpy(&w, key.data() + i, key.size() - i);
      h = mix(h ^ w);
    }
    return mix(h);
  }

 private:
  struct Slot {
    uint32_t tag = 0;    // high bits of the hash, to skip most key comparisons
    uint32_t entry = 0;  // 1 + index into entries_; 0: empty
  };
  struct Entry {
    size_t offset;  // of the key in keys_
    uint32_t length;
    V value;
  };

  static size_t capacity_for(size_t n) {
    size_t c = 16;
    while (c < 2 * n) c *= 2;
    return c;
  }
  void place(uint64_t h, uint32_t entry) {
    size_t i = h & mask_;
    while (slots_[i].entry != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{static_cast<uint32_t>(h >> 32), entry};
  }
  void rehash(size_t capacity) {
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (uint32_t k = 0; k < entries_.size(); ++k) {
      const Entry& e = entries_[k];
      place(hash(std::string_view(keys_).substr(e.offset, e.length)), k + 1);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::vector<Entry> entries_;
  std::string keys_;
};

}  // namespace trident::data
