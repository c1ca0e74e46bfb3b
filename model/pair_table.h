// PairTable<V>: a V for each ordered pair of ranks (a, b) that asks for one, made on first use.
// The simulated network keeps a flow per link that carried a message: a few per rank for most
// algorithms, every peer for the direct all-reduce. A hash table with open addressing over a
// power-of-two number of slots (a multiplicative hash, no division), values in a deque so that a
// reference stays valid while others are added.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace ringlet::model {

template <class V>
class PairTable {
 public:
  V& at(int a, int b) {
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
                              static_cast<std::uint32_t>(b);
    if (2 * (values_.size() + 1) > slots_.size()) grow();
    std::size_t i = slot(key);
    for (; slots_[i].value != kEmpty; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return values_[slots_[i].value];
    }
    slots_[i] = {key, values_.size()};
    return values_.emplace_back();
  }
  std::size_t size() const { return values_.size(); }

 private:
  static constexpr std::size_t kEmpty = ~std::size_t{0};
  struct Slot {
    std::uint64_t key = 0;
    std::size_t value = kEmpty;  // index in values_
  };

  std::size_t mask() const { return slots_.size() - 1; }
  // Fibonacci hashing: the top bits of the key times 2^64 / golden ratio.
  std::size_t slot(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> (64 - bits_));
  }
  // Twice the slots, every key placed again (the values stay where they are).
  void grow() {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(std::size_t{1} << ++bits_));
    for (const Slot& s : old) {
      if (s.value == kEmpty) continue;
      std::size_t i = slot(s.key);
      while (slots_[i].value != kEmpty) i = (i + 1) & mask();
      slots_[i] = s;
    }
  }

  int bits_ = 3;  // slots_ has 2^bits_
  std::vector<Slot> slots_ = std::vector<Slot>(std::size_t{1} << bits_);
  std::deque<V> values_;
};

}  // namespace ringlet::model
