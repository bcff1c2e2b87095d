// SPDX-License-Identifier: MIT
// The ragged batch layout's arithmetic, once for the host and the kernels: where sequence b's
// entries and rows lie, and which of a batch's warps is its own.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"

namespace specdec::detail {

/// Sequence b of a ragged batch in CSR offsets (ChainBatchArgs, TreeBatchArgs): its `count`
/// entries (draft tokens, tree nodes) from `first`, and its count + 1 rows (target rows, emitted
/// tokens) from first + b, one more per earlier sequence.
struct RaggedSlice {
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t index = 0;

  /// From `offsets` (B + 1 CSR offsets: a pointer, or a kernel's Global view), each read once.
  template <class Offsets>
  SPECDEC_HOST_DEVICE static RaggedSlice of(const Offsets& offsets, std::int64_t b) {
    const std::int64_t first = offsets[b];
    return {first, offsets[b + 1] - first, b};
  }
  /// Its first row with one more per sequence (target rows, emitted tokens, a tree's root row).
  SPECDEC_HOST_DEVICE std::int64_t first_row() const { return first + index; }
};

/// The warp of sequence (or row) b when a batch gives `count` warps: one shared, or one each.
SPECDEC_HOST_DEVICE std::int64_t warp_of(std::int64_t count, std::int64_t b) {
  return count == 1 ? 0 : b;
}

}  // namespace specdec::detail
