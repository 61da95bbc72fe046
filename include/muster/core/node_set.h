// A fixed-size bitset over node positions: the scheduler's candidate sets. Intersections and
// counts touch 64 nodes per word, so a filter over 12,500 nodes is ~200 word operations.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace muster::core {

class NodeSet {
 public:
  NodeSet() = default;
  explicit NodeSet(size_t size) : size_(size), words_((size + 63) / 64, 0) {}

  size_t size() const { return size_; }
  bool Test(size_t i) const { return (words_[i >> 6] >> (i & 63)) & 1; }
  void Set(size_t i) { words_[i >> 6] |= uint64_t{1} << (i & 63); }
  void Reset(size_t i) { words_[i >> 6] &= ~(uint64_t{1} << (i & 63)); }
  void Assign(size_t i, bool v) { v ? Set(i) : Reset(i); }
  void Clear() { std::fill(words_.begin(), words_.end(), 0); }

  size_t Count() const {
    size_t n = 0;
    for (uint64_t w : words_) n += static_cast<size_t>(std::popcount(w));
    return n;
  }
  bool Any() const {
    for (uint64_t w : words_) {
      if (w) return true;
    }
    return false;
  }
  // The first set position at or after `from`, or size() when there is none.
  size_t Next(size_t from) const {
    if (from >= size_) return size_;
    size_t wi = from >> 6;
    uint64_t w = words_[wi] & (~uint64_t{0} << (from & 63));
    while (true) {
      if (w) {
        size_t i = (wi << 6) + static_cast<size_t>(std::countr_zero(w));
        return i < size_ ? i : size_;
      }
      if (++wi >= words_.size()) return size_;
      w = words_[wi];
    }
  }
  // Calls f(position) for every set position, in ascending order.
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t wi = 0; wi < words_.size(); ++wi) {
      uint64_t w = words_[wi];
      while (w) {
        f((wi << 6) + static_cast<size_t>(std::countr_zero(w)));
        w &= w - 1;
      }
    }
  }

  // Calls f(position) for every position set in both *this and o, ascending, until f returns
  // true; returns whether it did.
  template <typename F>
  bool FindInBoth(const NodeSet& o, F&& f) const {
    for (size_t wi = 0; wi < words_.size(); ++wi) {
      uint64_t w = words_[wi] & o.words_[wi];
      while (w) {
        if (f((wi << 6) + static_cast<size_t>(std::countr_zero(w)))) return true;
        w &= w - 1;
      }
    }
    return false;
  }

  NodeSet& operator&=(const NodeSet& o) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] &= o.words_[i];
    return *this;
  }
  NodeSet& operator|=(const NodeSet& o) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= o.words_[i];
    return *this;
  }
  NodeSet& AndNot(const NodeSet& o) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] &= ~o.words_[i];
    return *this;
  }
  // *this = a & b, without allocating when the sizes already match.
  void AssignAnd(const NodeSet& a, const NodeSet& b) {
    size_ = a.size_;
    words_.resize(a.words_.size());
    for (size_t i = 0; i < words_.size(); ++i) words_[i] = a.words_[i] & b.words_[i];
  }
  // Every member of `o` is a member of this set.
  bool Contains(const NodeSet& o) const {
    for (size_t i = 0; i < words_.size(); ++i) {
      if (o.words_[i] & ~words_[i]) return false;
    }
    return true;
  }
  bool operator==(const NodeSet& o) const = default;

 private:
  size_t size_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace muster::core
