// SPDX-License-Identifier: MIT
// TreeView: the non-owning form of a draft tree (node tokens and parents), the one shape every
// function that walks a tree's structure takes. A DraftTree gives one with view().
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

/// A draft tree as two spans of N entries each, in level order: `tokens[i]` and `parents[i]` (-1 =
/// the root, the last committed token, which is not stored; otherwise an earlier node). Batched
/// calls take the B trees of a batch as one TreeView of N = node_offsets[B] nodes, CSR in
/// `node_offsets`, with parents local to each tree. Host or device memory, as the callee says.
struct TreeView {
  std::span<const Token> tokens{};
  std::span<const std::int32_t> parents{};

  /// Nodes of the tree (tokens.size(); callees check that parents has as many).
  std::int32_t size() const { return static_cast<std::int32_t>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  /// Nodes [begin, begin + count) as a tree of their own (a tree of a CSR batch).
  TreeView subtree(std::size_t begin, std::size_t count) const {
    return {tokens.subspan(begin, count), parents.subspan(begin, count)};
  }
};

namespace detail {

/// Throws specdec::Error naming `name` unless `parent` is -1 (the root) or a node before `node`:
/// the rule every tree of the library keeps, so that walks end and never leave the tree.
inline void check_parent(const ArgName& name, std::int32_t parent, std::int64_t node) {
  if (parent < -1 || parent >= node) {
    fail(name, "{} must be -1 (root) or an earlier node (< {})", parent, node);
  }
}

/// Throws specdec::Error naming `node_offsets` unless it holds B + 1 >= 2 non-decreasing CSR
/// offsets from 0, as the batched tree calls take them. Returns the largest tree.
inline std::int32_t check_tree_offsets(std::span<const std::int32_t> node_offsets) {
  if (node_offsets.size() < 2) {
    fail("node_offsets", "has {} entries, expected B + 1 >= 2", node_offsets.size());
  }
  if (node_offsets[0] != 0) fail("node_offsets[0]", "is {}, expected 0", node_offsets[0]);
  std::int32_t largest = 0;
  for (std::size_t b = 1; b < node_offsets.size(); ++b) {
    if (node_offsets[b] < node_offsets[b - 1]) {
      fail(ArgName("node_offsets", static_cast<std::int64_t>(b)),
           "{} is smaller than node_offsets[{}] = {}", node_offsets[b], b - 1, node_offsets[b - 1]);
    }
    const auto size = node_offsets[b] - node_offsets[b - 1];
    largest = size > largest ? size : largest;
  }
  return largest;
}

/// Node ids are int32: a tree has at most INT32_MAX nodes.
inline void check_node_count(const ArgName& name, std::size_t nodes) {
  if (nodes > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    fail(name, "has {} nodes (at most {})", nodes, std::numeric_limits<std::int32_t>::max());
  }
}

}  // namespace detail
}  // namespace specdec
