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

/// Node ids are int32: a tree has at most INT32_MAX nodes.
inline void check_node_count(const ArgName& name, std::size_t nodes) {
  if (nodes > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    fail(name, "has {} nodes (at most {})", nodes, std::numeric_limits<std::int32_t>::max());
  }
}

}  // namespace detail
}  // namespace specdec
