// SPDX-License-Identifier: MIT
// Attention masks and position ids of a draft tree evaluated after a committed context: the dense
// boolean ancestor mask (seed 000 Alg. 5), packed 32-bit mask rows, and position ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_rows.hpp"
#include "specdec/tree/tree_paths.hpp"

namespace specdec {

namespace detail {

/// Position ids must fit in int32: context_length + max_depth - 1 <= INT32_MAX.
inline void check_position_range(std::int32_t context_length, std::int32_t max_depth) {
  if (static_cast<std::int64_t>(context_length) + max_depth - 1 > INT32_MAX) {
    fail("context_length", "{} plus the tree depth {} overflows int32 position ids", context_length,
         max_depth);
  }
}

/// A whole mask of `n` rows `width` entries apart, in node order (a parent before its children):
/// each row from its parent's (parents[i] < 0: none) by the dense (bytes) or packed (32-bit
/// words) row function.
template <class W>
void mask_rows_from_parents(std::span<const std::int32_t> parents, std::int32_t n,
                            std::int32_t width, W* out) {
  for (std::int32_t i = 0; i < n; ++i) {
    const auto parent = parents[static_cast<std::size_t>(i)];
    W* parent_row = parent < 0 ? nullptr : out + static_cast<std::size_t>(parent) * width;
    W* row = out + static_cast<std::size_t>(i) * width;
    if constexpr (std::is_same_v<W, std::uint8_t>) {
      dense_mask_row_from_parent(parent_row, i, row, width);
    } else {
      packed_mask_row_from_parent(parent_row, i, row, width);
    }
  }
}

}  // namespace detail

/// Entries of the dense N x N mask of `tree` (N = tree.size()).
inline std::size_t dense_mask_size(TreeView tree) {
  return static_cast<std::size_t>(tree.size()) * static_cast<std::size_t>(tree.size());
}

/// Dense ancestor mask over the tree part of the keys: `out[i * N + j]` = 1 when node i may attend
/// to node j (j is i or an ancestor of i), else 0. The committed context (the root included) is
/// visible to every node and is not part of this matrix: an engine prepends C all-ones columns.
/// Built as seed 000 Alg. 5 does: the row of a child is the row of its parent plus the diagonal.
/// `out` holds dense_mask_size(tree) bytes.
/// Complexity: O(N^2): each row is its parent's row plus the diagonal (N = tree.size()).
inline void build_dense_mask(TreeView tree, std::span<std::uint8_t> out) {
  detail::check_tree(tree);
  detail::check_buffer("out", out, dense_mask_size(tree));
  detail::mask_rows_from_parents(tree.parents, tree.size(), tree.size(), out.data());
}

/// The same mask of a DraftTree, after checking its depths too.
inline void build_dense_mask(const DraftTree& tree, std::span<std::uint8_t> out) {
  detail::check_tree(tree);
  build_dense_mask(tree.view(), out);
}

/// Entries of the packed mask of `tree`: N rows of packed_mask_words(N) words.
inline std::size_t packed_mask_size(TreeView tree) {
  return static_cast<std::size_t>(tree.size()) *
         static_cast<std::size_t>(packed_mask_words(tree.size()));
}

/// Packed ancestor mask: row i occupies words [i * W, (i + 1) * W) with W = packed_mask_words(N);
/// column j of the dense mask is bit (j % 32) of word j / 32 (least significant bit first). Bits
/// past column N - 1 are 0. `out` holds packed_mask_size(tree) words.
/// Complexity: O(N x ceil(N / 32)): each row is its parent's row plus one bit.
inline void build_packed_mask(TreeView tree, std::span<std::uint32_t> out) {
  detail::check_tree(tree);
  detail::check_buffer("out", out, packed_mask_size(tree));
  detail::mask_rows_from_parents(tree.parents, tree.size(), packed_mask_words(tree.size()),
                                 out.data());
}

/// The same mask of a DraftTree, after checking its depths too.
inline void build_packed_mask(const DraftTree& tree, std::span<std::uint32_t> out) {
  detail::check_tree(tree);
  build_packed_mask(tree.view(), out);
}

/// Position ids of the nodes: `out[i] = context_length + depth(i) - 1` (detail::tree_positions_row).
/// `context_length` C counts the committed tokens including the root (the last committed token, at
/// position C - 1), so the first drafted level sits at position C. Needs C >= 1 and C + depth - 1
/// <= INT32_MAX; `out` holds N entries.
/// Complexity: O(N).
inline void tree_positions(TreeView tree, std::int32_t context_length,
                           std::span<std::int32_t> out) {
  detail::check_tree(tree);
  if (context_length < 1) {
    detail::fail("context_length", "{} must be >= 1 (the root is a committed token)",
                 context_length);
  }
  detail::check_buffer("out", out, static_cast<std::size_t>(tree.size()));
  // The depths first (they fit: depth <= N), to check the deepest position before writing any.
  detail::tree_depths_row(tree.parents.data(), tree.size(), out.data());
  std::int32_t max_depth = 0;
  for (const auto depth : out) max_depth = depth > max_depth ? depth : max_depth;
  detail::check_position_range(context_length, max_depth);
  detail::tree_positions_row(tree.parents.data(), tree.size(), context_length, out.data());
}

/// The same position ids of a DraftTree, after checking its depths too.
inline void tree_positions(const DraftTree& tree, std::int32_t context_length,
                           std::span<std::int32_t> out) {
  detail::check_tree(tree);
  tree_positions(tree.view(), context_length, out);
}

}  // namespace specdec
