// SPDX-License-Identifier: MIT
// Row kernels of tree attention inputs, shared by the host functions of tree/ and the CUDA
// backend: packed ancestor mask rows, node depths and positions, ReDrafter's prefix match. Only
// config.hpp and token.hpp here, so nvcc compiles this header as it is.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

/// Bits per word of a packed mask row.
inline constexpr std::int32_t kMaskWordBits = 32;

/// 32-bit words per packed row for `columns` mask columns: ceil(columns / 32).
SPECDEC_HOST_DEVICE constexpr std::int32_t packed_mask_words(std::int32_t columns) {
  return (columns + kMaskWordBits - 1) / kMaskWordBits;
}

namespace detail {

/// The parent of `node` (`parents[i] < i`, -1 = the root), or -1 where `parents` breaks that
/// rule: unvalidated device trees then end a walk early instead of looping or reading outside.
SPECDEC_HOST_DEVICE std::int32_t parent_of(const std::int32_t* parents, std::int32_t node) {
  const std::int32_t p = parents[node];
  return p < node ? p : -1;
}

/// Row kernel: true when `ancestor` is `node` or one of its ancestors. O(depth).
SPECDEC_HOST_DEVICE bool is_ancestor_or_self(const std::int32_t* parents, std::int32_t ancestor,
                                             std::int32_t node) {
  while (node > ancestor) node = parent_of(parents, node);
  return node == ancestor;
}

/// Row kernel: dense mask row of `node` over `n` tree columns: row[j] = 1 when node j is `node`
/// or one of its ancestors, else 0. O(n + depth).
SPECDEC_HOST_DEVICE void dense_mask_row(const std::int32_t* parents, std::int32_t n,
                                        std::int32_t node, std::uint8_t* row) {
  for (std::int32_t j = 0; j < n; ++j) row[j] = 0;
  for (std::int32_t a = node; a >= 0; a = parent_of(parents, a)) row[a] = 1;
}

/// Row kernel: packed mask row of `node` in `words` 32-bit words; column j is bit (j % 32) of word
/// j / 32, least significant bit first. Same meaning as dense_mask_row.
SPECDEC_HOST_DEVICE void packed_mask_row(const std::int32_t* parents, std::int32_t words,
                                         std::int32_t node, std::uint32_t* row) {
  for (std::int32_t w = 0; w < words; ++w) row[w] = 0u;
  for (std::int32_t a = node; a >= 0; a = parent_of(parents, a)) {
    row[a / kMaskWordBits] |= 1u << static_cast<std::uint32_t>(a % kMaskWordBits);
  }
}

/// Row kernel: depth of `node` (a child of the root has depth 1). O(depth).
SPECDEC_HOST_DEVICE std::int32_t node_depth(const std::int32_t* parents, std::int32_t node) {
  std::int32_t depth = 0;
  for (std::int32_t a = node; a >= 0; a = parent_of(parents, a)) ++depth;
  return depth;
}

/// Row kernel: position id of a node at `depth` after a committed context of `context_length`
/// tokens (the root, the last committed token, sits at context_length - 1).
SPECDEC_HOST_DEVICE std::int32_t node_position(std::int32_t context_length, std::int32_t depth) {
  return context_length + (depth - 1);  // in this order: context + depth may pass INT32_MAX
}

/// Row kernel: prefix match of `width` beams of `length` tokens (row-major, beam j at
/// beams[j * length, (j + 1) * length)). out[i * length + k] = the smallest beam index j whose
/// first k + 1 tokens equal those of beam i (so j <= i). Uses that beams j and i share k + 1 tokens
/// iff they share k tokens (equal match at k - 1) and agree at k. O(W^2 L) worst case, O(W L) when
/// beams agree.
SPECDEC_HOST_DEVICE void prefix_match_kernel(const Token* beams, std::int32_t width,
                                             std::int32_t length, std::int32_t* out) {
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
