// SPDX-License-Identifier: MIT
// Caller-owned scratch memory. Size it once (each algorithm has a `*_workspace_size` query, or let
// the first step grow it), then reuse it: after warm-up no step allocates.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <vector>

namespace specdec {

class Workspace {
 public:
  static constexpr std::size_t kAlignment = 64;

  Workspace() = default;
  explicit Workspace(std::size_t bytes) { grow(bytes); }

  Workspace(Workspace&&) noexcept = default;
  Workspace& operator=(Workspace&&) noexcept = default;

  /// Uninitialised storage for `count` values of T, valid until the enclosing Scope ends.
  template <class T>
  std::span<T> take(std::size_t count) {
    static_assert(
        std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
        "Workspace holds trivial types only");
    const std::size_t bytes = round_up(count * sizeof(T));
    if (used_ + bytes > capacity_) {
      // Out of room mid-step: park the request in an overflow block; the next top-level
      // reset folds everything into one buffer, so this happens during warm-up only.
      overflow_.push_back(allocate(bytes));
      overflow_bytes_ += bytes;
      high_water_ = std::max(high_water_, used_ + overflow_bytes_);
      return {reinterpret_cast<T*>(overflow_.back().get()), count};
    }
    T* p = reinterpret_cast<T*>(data_.get() + used_);
    used_ += bytes;
    high_water_ = std::max(high_water_, used_ + overflow_bytes_);
    return {p, count};
  }

  /// Restores the workspace to its state at construction of the Scope.
  class Scope {
   public:
    explicit Scope(Workspace& ws) : ws_(ws), mark_(ws.used_) {}
    ~Scope() { ws_.release(mark_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Workspace& ws_;
    std::size_t mark_;
  };
  [[nodiscard]] Scope scope() { return Scope(*this); }

  /// Makes sure `bytes` are available without allocating during the next steps.
  void reserve(std::size_t bytes) {
    if (bytes > capacity_ && used_ == 0) grow(bytes);
  }

  std::size_t capacity() const { return capacity_; }
  std::size_t high_water() const { return high_water_; }
  /// Heap allocations made so far (a test can check that it stops growing after warm-up).
  std::size_t allocations() const { return allocations_; }

  static constexpr std::size_t round_up(std::size_t bytes) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kAlignment}); }
  };
  using Block = std::unique_ptr<std::byte[], Free>;

  Block allocate(std::size_t bytes) {
    ++allocations_;
    return Block(static_cast<std::byte*>(
        ::operator new[](std::max<std::size_t>(bytes, 1), std::align_val_t{kAlignment})));
  }
  void grow(std::size_t bytes) {
    data_ = allocate(round_up(bytes));
    capacity_ = round_up(bytes);
  }
  void release(std::size_t mark) {
    used_ = mark;
    if (used_ == 0 && !overflow_.empty()) {
      overflow_.clear();
      overflow_bytes_ = 0;
      grow(high_water_);
    }
  }

  Block data_;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::vector<Block> overflow_;
  std::size_t overflow_bytes_ = 0;
  std::size_t high_water_ = 0;
  std::size_t allocations_ = 0;
};

}  // namespace specdec
