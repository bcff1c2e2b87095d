// SPDX-License-Identifier: MIT
// Batched tree attention inputs on the device: packed masks (one block per tree, one thread per
// mask word), positions (one thread per tree) and ReDrafter's prefix match
// (one thread per row of beams), each through the row functions of tree/tree_rows.hpp that the
// CPU backend runs, over Global views so the traffic ledger sees every access. Device parents are
// not scanned: a parent that breaks `parents[i] < i` ends the walk as a root would.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/core/token.hpp"
#include "specdec/tree/tree_rows.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Threads per block of the tree mask and position kernels.
inline constexpr int kTreeMaskThreads = 128;

/// Block b writes the `words`-word mask rows of tree b's nodes (offsets[b] .. offsets[b + 1]) in
/// node order, each row its parent's plus its own bit. Thread t owns words t, t + blockDim.x, ...
/// of every row, so it only reads parent words it wrote itself: no barrier between nodes.
__global__ void packed_tree_masks_kernel(Global<const std::int32_t> offsets,
                                         Global<const std::int32_t> parents,
                                         Global<std::uint32_t> masks, int words,
                                         std::int64_t mask_stride) {
  const auto first = static_cast<std::int32_t>(threadIdx.x);
  if (first >= words) return;  // before any load: idle threads move no bytes
  const std::int32_t begin = offsets[blockIdx.x];
  const std::int32_t n = offsets[blockIdx.x + 1] - begin;
  const Global<std::uint32_t> tree_masks = masks + static_cast<std::int64_t>(begin) * mask_stride;
  const Global<const std::int32_t> tree_parents = parents + begin;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t parent = specdec::detail::parent_of(tree_parents, i);
    const Global<const std::uint32_t> parent_row =
        parent < 0 ? Global<const std::uint32_t>(nullptr)
                   : Global<const std::uint32_t>(tree_masks + parent * mask_stride);
    specdec::detail::packed_mask_row_from_parent(parent_row, i, tree_masks + i * mask_stride, words,
                                                 first, static_cast<std::int32_t>(blockDim.x));
  }
}

/// Thread b (over the whole grid) writes the position ids of tree b's nodes after
/// context_lengths[b] committed tokens: each node's depth is its parent's plus one, so one thread
/// walks a tree in node order.
__global__ void tree_positions_kernel(Global<const std::int32_t> offsets, int batch,
                                      Global<const std::int32_t> parents,
                                      Global<const std::int32_t> context_lengths,
                                      Global<std::int32_t> positions) {
  const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= batch) return;
  const std::int32_t begin = offsets[b];
  specdec::detail::tree_positions_row(parents + begin, offsets[b + 1] - begin, context_lengths[b],
                                      positions + begin);
}

/// Thread b (over the whole grid) matches the `width` beams of `length` tokens of row b.
__global__ void prefix_match_kernel(Global<const Token> beams, std::int64_t beam_stride, int rows,
                                    int width, int length, Global<std::int32_t> out,
                                    std::int64_t out_stride) {
  const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= rows) return;
  specdec::detail::beam_prefix_match(beams + b * beam_stride, width, length, out + b * out_stride);
}

}  // namespace specdec::backend::cuda_impl::detail
