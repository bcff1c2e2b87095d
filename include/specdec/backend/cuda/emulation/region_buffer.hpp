// SPDX-License-Identifier: MIT
// RegionBuffer<T>: host memory that the emulation sees as device memory, a named region of the
// traffic ledger while the buffer lives, so a program hands a launcher rows it filled itself and
// reads the ledger per name.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "specdec/backend/cuda/emulation/ledger.hpp"

namespace specdec::emulation {

template <class T>
class RegionBuffer {
 public:
  /// A copy of `values`, its bytes written unless `written` is false.
  RegionBuffer(std::string name, const std::vector<T>& values, bool written = true)
      : size_(values.size()),
        // 256-byte aligned, as cudaMalloc's (the sectors fall where they would), with 256 bytes
        // past the end that no region holds.
        data_(static_cast<T*>(
            std::aligned_alloc(256, (size_ * sizeof(T) + 255) / 256 * 256 + 256))) {
    std::copy(values.begin(), values.end(), data_);
    ledger.add(std::move(name), data_, size_ * sizeof(T), written);
  }
  /// `count` entries no one has written yet (a fresh device allocation).
  RegionBuffer(std::string name, std::size_t count)
      : RegionBuffer(std::move(name), std::vector<T>(count), false) {}
  RegionBuffer(const RegionBuffer&) = delete;
  RegionBuffer& operator=(const RegionBuffer&) = delete;
  ~RegionBuffer() {
    ledger.remove(data_);
    std::free(data_);
  }

  T* get() { return data_; }
  std::size_t size() const { return size_; }
  T operator[](std::size_t i) const { return data_[i]; }
  std::vector<T> values() const { return {data_, data_ + size_}; }
  /// Overwrites the first values.size() entries from the host (no ledger event, as a test's setup).
  void assign(const std::vector<T>& values) { std::copy(values.begin(), values.end(), data_); }

 private:
  std::size_t size_;
  T* data_;
};

}  // namespace specdec::emulation
