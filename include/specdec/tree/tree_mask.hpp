// SPDX-License-Identifier: MIT
// Attention masks and position ids of a draft tree evaluated after a committed context: the dense
// boolean ancestor mask (seed 000 Alg. 5), packed 32-bit mask rows, and position ids.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_paths.hpp"

namespace specdec {

/// Bits per word of a packed mask row.
inline constexpr std::int32_t kMaskWordBits = 32;

/// 32-bit words per packed row for `columns` mask columns: ceil(columns / 32).
SPECDEC_HOST_DEVICE constexpr std::int32_t packed_mask_words(std::int32_t columns) {
  return (columns + kMaskWordBits - 1) / kMaskWordBits;
}

namespace detail {

/// Row kernel: true when `ancestor` is `node` or one of its ancestors (`parents[i] < i`, -1 = the
/// root). O(depth).
SPECDEC_HOST_DEVICE bool is_ancestor_or_self(const std::int32_t* parents, std::int32_t ancestor,
                                             std::int32_t node) {
  while (node > ancestor) node = parents[node];
  return node == ancestor;
}

/// Row kernel: dense mask row of `node` over `n` tree columns: row[j] = 1 when node j is `node`
/// or one of its ancestors, else 0. `parents[i] < i`, -1 = the root. O(n + depth).
SPECDEC_HOST_DEVICE void dense_mask_row(const std::int32_t* parents, std::int32_t n,
                                        std::int32_t node, std::uint8_t* row) {
  for (std::int32_t j = 0; j < n; ++j) row[j] = 0;
  for (std::int32_t a = node; a >= 0; a = parents[a]) row[a] = 1;
}

/// Row kernel: packed mask row of `node` in `words` 32-bit words; column j is bit (j % 32) of word
/// j / 32, least significant bit first. Same meaning as dense_mask_row.
SPECDEC_HOST_DEVICE void packed_mask_row(const std::int32_t* parents, std::int32_t words,
                                         std::int32_t node, std::uint32_t* row) {
  for (std::int32_t w = 0; w < words; ++w) row[w] = 0u;
  for (std::int32_t a = node; a >= 0; a = parents[a]) {
    row[a / kMaskWordBits] |= 1u << static_cast<std::uint32_t>(a % kMaskWordBits);
  }
}

/// Row kernel: position id of a node at `depth` after a committed context of `context_length`
/// tokens (the root, the last committed token, sits at context_length - 1).
SPECDEC_HOST_DEVICE std::int32_t node_position(std::int32_t context_length, std::int32_t depth) {
  return context_length + depth - 1;
}

/// Position ids must fit in int32: context_length + max_depth - 1 <= INT32_MAX.
inline void check_position_range(std::int32_t context_length, const DraftTree& tree) {
  if (static_cast<std::int64_t>(context_length) + tree.max_depth() - 1 > INT32_MAX) {
    fail("context_length", "{} plus the tree depth {} overflows int32 position ids", context_length,
         tree.max_depth());
  }
}

}  // namespace detail

/// Entries of the dense N x N mask of `tree` (N = tree.size()).
inline std::size_t dense_mask_size(const DraftTree& tree) {
  return static_cast<std::size_t>(tree.size()) * static_cast<std::size_t>(tree.size());
}

/// Dense ancestor mask over the tree part of the keys: `out[i * N + j]` = 1 when node i may attend
/// to node j (j is i or an ancestor of i), else 0. The committed context (the root included) is
/// visible to every node and is not part of this matrix: an engine prepends C all-ones columns.
/// Built as seed 000 Alg. 5 does: the row of a child is the row of its parent plus the diagonal.
/// `out` holds dense_mask_size(tree) bytes.
inline void build_dense_mask(const DraftTree& tree, std::span<std::uint8_t> out) {
  detail::check_tree(tree);
  detail::check_buffer("out", out, dense_mask_size(tree));
  const auto n = static_cast<std::size_t>(tree.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t* row = out.data() + i * n;
    const auto parent = tree.parents[i];
    if (parent < 0) {
      std::memset(row, 0, n);
    } else {
      std::memcpy(row, out.data() + static_cast<std::size_t>(parent) * n, n);
    }
    row[i] = 1;
  }
}

/// Entries of the packed mask of `tree`: N rows of packed_mask_words(N) words.
inline std::size_t packed_mask_size(const DraftTree& tree) {
  return static_cast<std::size_t>(tree.size()) *
         static_cast<std::size_t>(packed_mask_words(tree.size()));
}

/// Packed ancestor mask: row i occupies words [i * W, (i + 1) * W) with W = packed_mask_words(N);
/// column j of the dense mask is bit (j % 32) of word j / 32 (least significant bit first). Bits
/// past column N - 1 are 0. `out` holds packed_mask_size(tree) words.
inline void build_packed_mask(const DraftTree& tree, std::span<std::uint32_t> out) {
  detail::check_tree(tree);
  detail::check_buffer("out", out, packed_mask_size(tree));
  const auto n = static_cast<std::size_t>(tree.size());
  const auto words = static_cast<std::size_t>(packed_mask_words(tree.size()));
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t* row = out.data() + i * words;
    const auto parent = tree.parents[i];
    if (parent < 0) {
      for (std::size_t w = 0; w < words; ++w) row[w] = 0u;
    } else {
      std::memcpy(row, out.data() + static_cast<std::size_t>(parent) * words,
                  words * sizeof(std::uint32_t));
    }
    row[i / kMaskWordBits] |= 1u << static_cast<std::uint32_t>(i % kMaskWordBits);
  }
}

/// Position ids of the nodes: `out[i] = context_length + depths[i] - 1`. `context_length` C counts
/// the committed tokens including the root (the last committed token, at position C - 1), so the
/// first drafted level sits at position C. Needs C >= 1; `out` holds N entries.
inline void tree_positions(const DraftTree& tree, std::int32_t context_length,
                           std::span<std::int32_t> out) {
  detail::check_tree(tree);
  if (context_length < 1) {
    detail::fail("context_length", "{} must be >= 1 (the root is a committed token)",
                 context_length);
  }
  detail::check_position_range(context_length, tree);
  detail::check_buffer("out", out, static_cast<std::size_t>(tree.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = detail::node_position(context_length, tree.depths[i]);
  }
}

}  // namespace specdec
