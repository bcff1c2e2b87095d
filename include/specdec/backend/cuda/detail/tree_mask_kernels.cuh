// SPDX-License-Identifier: MIT
// Batched tree attention inputs on the device: packed masks (one block per tree, one thread per
// mask word), positions (one thread per tree) and ReDrafter's prefix match
// (one thread per row of beams), each through the row functions of tree/tree_rows.hpp that the
// CPU backend runs. Device parents are not scanned: a parent that breaks `parents[i] < i` ends
// the walk as a root would.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/core/token.hpp"
#include "specdec/tree/tree_rows.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Threads per block of the tree mask and position kernels.
inline constexpr int kTreeMaskThreads = 128;

/// Block b writes the `words`-word mask rows of tree b's nodes (offsets staged, B + 1 entries)
/// in node order, each row its parent's plus its own bit. Thread t owns words t, t + blockDim.x,
/// ... of every row, so it only reads parent words it wrote itself: no barrier between nodes.
__global__ void packed_tree_masks_kernel(const std::int32_t* offsets, const std::int32_t* parents,
                                         std::uint32_t* masks, int words,
                                         std::int64_t mask_stride) {
  const std::int32_t begin = offsets[blockIdx.x];
  const std::int32_t n = offsets[blockIdx.x + 1] - begin;
  const auto first = static_cast<std::int32_t>(threadIdx.x);
  if (first >= words) return;
  std::uint32_t* tree_masks = masks + static_cast<std::int64_t>(begin) * mask_stride;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t parent = specdec::detail::parent_of(parents + begin, i);
    specdec::detail::packed_mask_row_from_parent(
        parent < 0 ? nullptr : tree_masks + parent * mask_stride, i, tree_masks + i * mask_stride,
        words, first, static_cast<std::int32_t>(blockDim.x));
  }
}

/// Thread b (over the whole grid) writes the position ids of tree b's nodes after
/// context_lengths[b] committed tokens: each node's depth is its parent's plus one, so one thread
/// walks a tree in node order.
__global__ void tree_positions_kernel(const std::int32_t* offsets, int batch,
                                      const std::int32_t* parents,
                                      const std::int32_t* context_lengths,
                                      std::int32_t* positions) {
  const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= batch) return;
  const std::int32_t begin = offsets[b];
  specdec::detail::tree_positions_row(parents + begin, offsets[b + 1] - begin, context_lengths[b],
                                      positions + begin);
}

/// Thread b (over the whole grid) matches the `width` beams of `length` tokens of row b.
__global__ void prefix_match_kernel(const Token* beams, std::int64_t beam_stride, int rows,
                                    int width, int length, std::int32_t* out,
                                    std::int64_t out_stride) {
  const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= rows) return;
  specdec::detail::beam_prefix_match(beams + b * beam_stride, width, length, out + b * out_stride);
}

}  // namespace specdec::backend::cuda_impl::detail
