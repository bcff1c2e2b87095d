// SPDX-License-Identifier: MIT
// Batched tree attention inputs: packed ancestor masks and position ids of B ragged trees, and
// ReDrafter's prefix match of B rows of beams, on any backend.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/backend/policy.hpp"
#include "specdec/backend/sequence_error.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/views.hpp"
#include "specdec/tree/dynamic_tree.hpp"
#include "specdec/tree/tree_mask.hpp"

namespace specdec {
namespace detail {

template <class Backend>
struct TreeMaskBatchImpl {
  static_assert(dependent_false<Backend>,
                "packed_tree_masks_batch / tree_positions_batch / prefix_match_batch: no "
                "implementation for this backend; include "
                "specdec/backend/cpu/tree_mask_batch.hpp");
};

/// Host checks of a CSR batch of trees: offsets non-decreasing from 0, `parents` N entries, each
/// parent -1 or an earlier node of its own tree. Returns the largest tree.
inline std::int32_t check_tree_csr(std::span<const std::int32_t> node_offsets,
                                   std::span<const std::int32_t> parents) {
  if (node_offsets.size() < 2)
    fail("node_offsets", "has {} entries, expected B + 1 >= 2", node_offsets.size());
  if (node_offsets[0] != 0) fail("node_offsets[0]", "is {}, expected 0", node_offsets[0]);
  std::int32_t largest = 0;
  for (std::size_t b = 1; b < node_offsets.size(); ++b) {
    if (node_offsets[b] < node_offsets[b - 1]) {
      fail(fmt::format("node_offsets[{}]", b), "{} is smaller than node_offsets[{}] = {}",
           node_offsets[b], b - 1, node_offsets[b - 1]);
    }
    largest = std::max(largest, node_offsets[b] - node_offsets[b - 1]);
  }
  check_size("parents", parents.size(), static_cast<std::size_t>(node_offsets.back()));
  for (std::size_t b = 0; b + 1 < node_offsets.size(); ++b) {
    const auto begin = static_cast<std::size_t>(node_offsets[b]);
    const auto n = static_cast<std::int32_t>(node_offsets[b + 1] - node_offsets[b]);
    for (std::int32_t i = 0; i < n; ++i) {
      const auto p = parents[begin + static_cast<std::size_t>(i)];
      if (p < -1 || p >= i) {
        fail(fmt::format("parents[{}][{}]", b, i), "{} must be -1 (root) or an earlier node (< {})",
             p, i);
      }
    }
  }
  return largest;
}

}  // namespace detail

/// Packed ancestor masks of B ragged trees (CSR: `node_offsets` B + 1 entries, host memory;
/// `parents` N entries local to each tree, -1 = root): row node_offsets[b] + i of `masks` is
/// packed_mask_row of node i of tree b, column j = bit j % 32 of word j / 32, over the tree's own
/// nodes; `masks` has N rows of at least packed_mask_words(largest tree) words, bits past a tree's
/// size 0. Equal to build_packed_mask per tree (padded with zero words). Takes no random draws.
template <backend::BackendPolicy Backend>
void packed_tree_masks_batch(const Backend& backend, std::span<const std::int32_t> node_offsets,
                             std::span<const std::int32_t> parents,
                             MatrixView<std::uint32_t> masks) {
  detail::TreeMaskBatchImpl<Backend>::masks(backend, node_offsets, parents, masks);
}

/// Position ids of B ragged trees (CSR as packed_tree_masks_batch): positions[node_offsets[b] + i]
/// = context_lengths[b] + depth(i) - 1, as tree_positions gives per tree (context_lengths[b] >= 1
/// counts tree b's committed tokens, its root included).
template <backend::BackendPolicy Backend>
void tree_positions_batch(const Backend& backend, std::span<const std::int32_t> node_offsets,
                          std::span<const std::int32_t> parents,
                          std::span<const std::int32_t> context_lengths,
                          std::span<std::int32_t> positions) {
  detail::TreeMaskBatchImpl<Backend>::positions(backend, node_offsets, parents, context_lengths,
                                                positions);
}

/// ReDrafter's prefix match for B rows of `width` beams: row b of `beams` holds W beams of L
/// tokens (W * L columns, row-major [W, L]); row b of `out` receives prefix_match of that row
/// (out(b, i * L + k) = the smallest beam sharing beam i's first k + 1 tokens). Tokens must lie in
/// [0, vocab).
template <backend::BackendPolicy Backend>
void prefix_match_batch(const Backend& backend, MatrixView<const Token> beams, std::int32_t width,
                        std::int64_t vocab, MatrixView<std::int32_t> out) {
  detail::TreeMaskBatchImpl<Backend>::prefix_match(backend, beams, width, vocab, out);
}

}  // namespace specdec
