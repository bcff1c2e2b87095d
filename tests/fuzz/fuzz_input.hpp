// SPDX-License-Identifier: MIT
// What the libFuzzer harnesses share: how a finding is reported and how the input is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

/// A result that contradicts the contract: say which check failed, then crash for libFuzzer.
[[noreturn]] inline void finding(const char* check) {
  std::fprintf(stderr, "finding: %s\n", check);
  std::abort();
}

namespace specdec::fuzz {

/// Reads the fuzz input front to back; zeros once it runs out.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  /// Four bytes, big-endian.
  std::uint32_t word() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }
  std::int32_t int32() { return static_cast<std::int32_t>(word()); }
  /// Any float bit pattern: NaN, infinities, subnormals included.
  float raw_float() {
    const std::uint32_t bits = word();
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  bool empty() const { return at_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

}  // namespace specdec::fuzz
