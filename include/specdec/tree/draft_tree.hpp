// SPDX-License-Identifier: MIT
// The draft tree: flat nodes in level order. Masks, positions, paths and KV maps are derived from
// it, never stored beside it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/tree/tree_view.hpp"

namespace specdec {

/// Nodes of a draft tree in level order: `tokens[i]`, `parents[i]` (-1 = the committed context,
/// i.e. the root, which is the last committed token and is not stored), `depths[i]` (1 for
/// children of the root). Children of a node keep their sampling order (the order verifiers
/// must visit them in).
struct DraftTree {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<std::int32_t> depths;

  std::int32_t size() const { return static_cast<std::int32_t>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  /// The tokens and parents as a TreeView (valid while this tree is alive and unchanged).
  TreeView view() const { return {tokens, parents}; }
  /// A DraftTree passes wherever a TreeView is taken; not from a temporary, whose view would
  /// dangle.
  operator TreeView() const& { return view(); }  // NOLINT(google-explicit-constructor)
  operator TreeView() const&& = delete;

  void clear() {
    tokens.clear();
    parents.clear();
    depths.clear();
  }
  /// Keeps capacity, so rebuilding a tree of the same size each step does not allocate.
  void reserve(std::size_t n) {
    tokens.reserve(n);
    parents.reserve(n);
    depths.reserve(n);
  }

  /// Appends a child of `parent` (-1 for the root) and returns its node id.
  std::int32_t add(Token token, std::int32_t parent) {
    if (parent < -1 || parent >= size()) {
      detail::fail("parent", "{} is not an existing node (tree has {} nodes)", parent, size());
    }
    tokens.push_back(token);
    parents.push_back(parent);
    depths.push_back(parent < 0 ? 1 : depths[static_cast<std::size_t>(parent)] + 1);
    return size() - 1;
  }

  /// Deepest level (0 for an empty tree).
  std::int32_t max_depth() const {
    std::int32_t d = 0;
    for (auto x : depths) d = x > d ? x : d;
    return d;
  }

  /// Throws specdec::Error unless: sizes agree, every parent precedes its child (so no cycles),
  /// depth = parent depth + 1, levels are in order, and every token is in [0, vocab).
  void validate(std::int64_t vocab) const {
    detail::check_size("parents", parents.size(), tokens.size());
    detail::check_size("depths", depths.size(), tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      // Format the argument name only on failure: validation runs on every step.
      if (tokens[i] < 0 || tokens[i] >= vocab) {
        detail::check_token(ArgName("tokens", i), tokens[i], vocab);
      }
      const auto parent = parents[i];
      detail::check_parent(ArgName("parents", i), parent, static_cast<std::int64_t>(i));
      const std::int32_t expected = parent < 0 ? 1 : depths[static_cast<std::size_t>(parent)] + 1;
      if (depths[i] != expected) {
        detail::fail(fmt::format("depths[{}]", i), "{} should be {} (parent's depth + 1)",
                     depths[i], expected);
      }
      if (i > 0 && depths[i] < depths[i - 1]) {
        detail::fail(fmt::format("depths[{}]", i),
                     "{} follows depth {}: nodes must be in level order", depths[i], depths[i - 1]);
      }
    }
  }
};

}  // namespace specdec
