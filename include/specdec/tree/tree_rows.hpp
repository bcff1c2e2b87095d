// SPDX-License-Identifier: MIT
// Row functions of tree attention inputs, shared by the host functions of tree/ and the CUDA
// backend: ancestor mask rows (a node's row is its parent's plus its own bit), node depths and
// positions, ReDrafter's prefix match. Only config.hpp and token.hpp here, so nvcc compiles this
// header as it is.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

namespace detail {

/// Bits per word of a packed mask row.
inline constexpr std::int32_t kMaskWordBits = 32;

}  // namespace detail

/// 32-bit words per packed row for `columns` mask columns: ceil(columns / 32).
SPECDEC_HOST_DEVICE constexpr std::int32_t packed_mask_words(std::int32_t columns) {
  return (columns + detail::kMaskWordBits - 1) / detail::kMaskWordBits;
}

namespace detail {

/// The parent of `node` (`parents[i] < i`, -1 = the root), or -1 where `parents` breaks that
/// rule: unvalidated device trees then end a walk early instead of looping or reading outside.
template <class Parents>
SPECDEC_HOST_DEVICE std::int32_t parent_of(const Parents& parents, std::int32_t node) {
  const std::int32_t p = parents[node];
  return p < node ? p : -1;
}

/// Row function: true when `ancestor` is `node` or one of its ancestors. O(depth).
SPECDEC_HOST_DEVICE bool is_ancestor_or_self(const std::int32_t* parents, std::int32_t ancestor,
                                             std::int32_t node) {
  while (node > ancestor) node = parent_of(parents, node);
  return node == ancestor;
}

/// Row function: dense mask row of `node` over `n` tree columns: row[j] = 1 when node j is `node`
/// or one of its ancestors, else 0. O(n + depth).
SPECDEC_HOST_DEVICE void dense_mask_row(const std::int32_t* parents, std::int32_t n,
                                        std::int32_t node, std::uint8_t* row) {
  for (std::int32_t j = 0; j < n; ++j) row[j] = 0;
  for (std::int32_t a = node; a >= 0; a = parent_of(parents, a)) row[a] = 1;
}

/// Sets column `column` of a packed mask row: bit (column % 32) of word column / 32, least
/// significant bit first.
SPECDEC_HOST_DEVICE void set_mask_column(std::uint32_t* row, std::int32_t column) {
  row[column / kMaskWordBits] |= 1u << static_cast<std::uint32_t>(column % kMaskWordBits);
}

/// Row function: packed mask row of `node` in `words` 32-bit words, by walking its ancestors (for
/// one row on its own; whole masks use packed_mask_row_from_parent). Same meaning as
/// dense_mask_row.
SPECDEC_HOST_DEVICE void packed_mask_row(const std::int32_t* parents, std::int32_t words,
                                         std::int32_t node, std::uint32_t* row) {
  for (std::int32_t w = 0; w < words; ++w) row[w] = 0u;
  for (std::int32_t a = node; a >= 0; a = parent_of(parents, a)) set_mask_column(row, a);
}

/// Row function: words first, first + step, ... (< words) of the packed mask row of `node`, whose
/// parent's row (null for a child of the root) is already written: a node's row is its parent's
/// row plus its own bit. Parents come first, so whole masks are built in one pass in node order;
/// the CUDA kernel gives each thread its own words (first = thread, step = block size), so a
/// thread only reads words it wrote itself. Rows are pointers or the kernel's global views.
template <class ParentRow, class Row>
SPECDEC_HOST_DEVICE void packed_mask_row_from_parent(const ParentRow& parent_row, std::int32_t node,
                                                     const Row& row, std::int32_t words,
                                                     std::int32_t first = 0,
                                                     std::int32_t step = 1) {
  const std::int32_t own_word = node / kMaskWordBits;
  const std::uint32_t own_bit = 1u << static_cast<std::uint32_t>(node % kMaskWordBits);
  for (std::int32_t w = first; w < words; w += step) {
    const std::uint32_t inherited = parent_row != nullptr ? parent_row[w] : 0u;
    row[w] = w == own_word ? inherited | own_bit : inherited;
  }
}

/// Row function: the dense form of packed_mask_row_from_parent over `n` columns (one byte each).
SPECDEC_HOST_DEVICE void dense_mask_row_from_parent(const std::uint8_t* parent_row,
                                                    std::int32_t node, std::uint8_t* row,
                                                    std::int32_t n) {
  for (std::int32_t j = 0; j < n; ++j) row[j] = parent_row != nullptr ? parent_row[j] : 0u;
  row[node] = 1;
}

/// Row function: position id of a node at `depth` after a committed context of `context_length`
/// tokens (the root, the last committed token, sits at context_length - 1).
SPECDEC_HOST_DEVICE std::int32_t node_position(std::int32_t context_length, std::int32_t depth) {
  return context_length + (depth - 1);  // in this order: context + depth may pass INT32_MAX
}

/// Row function: depths of the `n` nodes of one tree in node order, each its parent's plus one
/// (parents come first; a parent breaking `parents[i] < i` counts as the root). O(n).
template <class Parents, class Depths>
SPECDEC_HOST_DEVICE void tree_depths_row(const Parents& parents, std::int32_t n,
                                         const Depths& depths) {
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t parent = parent_of(parents, i);
    depths[i] = parent < 0 ? 1 : depths[parent] + 1;
  }
}

/// Row function: position ids of the `n` nodes of one tree after `context_length` committed
/// tokens: node_position of each node's depth. The single definition of tree position ids: the
/// host functions, the CPU batch and the CUDA kernel all call it. The caller checks that
/// context_length + depth - 1 fits in int32. O(n).
template <class Parents, class Positions>
SPECDEC_HOST_DEVICE void tree_positions_row(const Parents& parents, std::int32_t n,
                                            std::int32_t context_length,
                                            const Positions& positions) {
  tree_depths_row(parents, n, positions);
  for (std::int32_t i = 0; i < n; ++i) positions[i] = node_position(context_length, positions[i]);
}

/// Row function: prefix match of `width` beams of `length` tokens (row-major, beam j at
/// beams[j * length, (j + 1) * length)). out[i * length + k] = the smallest beam index j whose
/// first k + 1 tokens equal those of beam i (so j <= i). Uses that beams j and i share k + 1 tokens
/// iff they share k tokens (equal match at k - 1) and agree at k. O(W^2 L) worst case, O(W L) when
/// beams agree.
template <class Beams, class Out>
SPECDEC_HOST_DEVICE void beam_prefix_match(const Beams& beams, std::int32_t width,
                                           std::int32_t length, const Out& out) {
  for (std::int32_t i = 0; i < width; ++i) {
    for (std::int32_t k = 0; k < length; ++k) {
      const std::int32_t previous = k > 0 ? out[i * length + k - 1] : -1;
      const Token token = beams[i * length + k];
      std::int32_t match = i;
      for (std::int32_t j = 0; j < i; ++j) {
        if ((k == 0 || out[j * length + k - 1] == previous) && beams[j * length + k] == token) {
          match = j;
          break;
        }
      }
      out[i * length + k] = match;
    }
  }
}

}  // namespace detail
}  // namespace specdec
