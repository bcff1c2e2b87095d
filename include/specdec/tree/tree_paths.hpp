// SPDX-License-Identifier: MIT
// Tree navigation: child links (first child / next sibling), root-to-node paths, leaves and
// root-to-leaf paths of a tree (a TreeView; a DraftTree converts to one).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_rows.hpp"
#include "specdec/tree/tree_view.hpp"

namespace specdec {

namespace detail {

/// Checks the structure of a tree (sizes, parents before children, depths, level order) without
/// a vocabulary: every non-negative token is accepted.
/// Complexity: O(N).
inline void check_tree(const DraftTree& tree) {
  tree.validate(std::numeric_limits<std::int64_t>::max());
}

/// Checks the structure of a TreeView: as many parents as tokens, every token >= 0, every parent
/// -1 (root) or an earlier node. Level order is checked where it matters (verify_tree).
/// Complexity: O(N).
inline void check_tree(TreeView tree) {
  detail::check_size("parents", tree.parents.size(), tree.tokens.size());
  if (tree.tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    fail("tokens", "has {} nodes, at most {}", tree.tokens.size(),
         std::numeric_limits<std::int32_t>::max());
  }
  for (std::size_t i = 0; i < tree.tokens.size(); ++i) {
    if (tree.tokens[i] < 0) {
      detail::check_token(ArgName("tokens", i), tree.tokens[i],
                          std::numeric_limits<std::int64_t>::max());
    }
    check_parent(ArgName("parents", i), tree.parents[i], static_cast<std::int64_t>(i));
  }
}

/// Checks the CSR cut of a batch of trees: the offsets, and as many tokens and parents as the
/// last offset.
inline void check_tree_batch(std::span<const std::int32_t> node_offsets, TreeView trees) {
  check_tree_offsets(node_offsets);
  const auto total = static_cast<std::size_t>(node_offsets.back());
  check_size("trees.tokens", trees.tokens.size(), total);
  check_size("trees.parents", trees.parents.size(), total);
}

/// Tree b of a CSR batch.
inline TreeView tree_of_batch(std::span<const std::int32_t> node_offsets, TreeView trees,
                              std::size_t b) {
  const auto begin = static_cast<std::size_t>(node_offsets[b]);
  return trees.subtree(begin, static_cast<std::size_t>(node_offsets[b + 1]) - begin);
}

inline void check_node(std::string_view name, std::int32_t node, TreeView tree) {
  if (node < 0 || node >= tree.size()) {
    fail(name, "{} is not a node of the tree (it has {} nodes)", node, tree.size());
  }
}

template <class T>
void check_buffer(std::string_view name, std::span<T> buffer, std::size_t expected) {
  if (buffer.size() != expected) {
    fail(name, "has {} elements, expected {}", buffer.size(), expected);
  }
}

/// Row function: writes the root-to-node path of `node` (node ids, the root excluded, so
/// `depth` entries ending with `node`) into `out[0, depth)`. `parents[i] < i`, -1 = root.
SPECDEC_HOST_DEVICE void path_to_node_row(const std::int32_t* parents, std::int32_t node,
                                          std::int32_t depth, std::int32_t* out) {
  for (std::int32_t k = depth - 1; k >= 0; --k) {
    out[k] = node;
    node = parents[node];
  }
}

}  // namespace detail

/// Child links of a tree in sampling order: `first_child[i]` is the first child of node i and
/// `next_sibling[i]` the next child of i's parent (both -1 when there is none). Returns the first
/// child of the root (-1 for an empty tree). Both buffers hold `tree.size()` entries.
/// Complexity: O(N).
inline std::int32_t build_child_links(TreeView tree, std::span<std::int32_t> first_child,
                                      std::span<std::int32_t> next_sibling) {
  detail::check_tree(tree);
  const auto n = static_cast<std::size_t>(tree.size());
  detail::check_buffer("first_child", first_child, n);
  detail::check_buffer("next_sibling", next_sibling, n);
  std::int32_t root_first = -1;
  for (std::size_t i = 0; i < n; ++i) first_child[i] = -1;
  // Walking backwards and pushing at the head leaves every list in increasing (sampling) order.
  for (std::int32_t i = tree.size() - 1; i >= 0; --i) {
    const auto parent = tree.parents[static_cast<std::size_t>(i)];
    std::int32_t& head = parent < 0 ? root_first : first_child[static_cast<std::size_t>(parent)];
    next_sibling[static_cast<std::size_t>(i)] = head;
    head = i;
  }
  return root_first;
}

/// The children of `node` (-1 = the root) in sampling order. Allocates; for setup code and tests.
/// Complexity: O(N).
inline std::vector<std::int32_t> children_of(TreeView tree, std::int32_t node) {
  detail::check_tree(tree);
  if (node != -1) detail::check_node("node", node, tree);
  std::vector<std::int32_t> out;
  for (std::int32_t i = 0; i < tree.size(); ++i) {
    if (tree.parents[static_cast<std::size_t>(i)] == node) out.push_back(i);
  }
  return out;
}

namespace detail {

/// Depth of `node` (1 for a child of the root), counted along its parents (`parents[i] < i`).
inline std::int32_t node_depth(TreeView tree, std::int32_t node) {
  std::int32_t depth = 0;
  for (; node >= 0; node = tree.parents[static_cast<std::size_t>(node)]) ++depth;
  return depth;
}

/// Deepest level of a checked tree (0 when empty), from the depths of its parents. Allocates.
inline std::int32_t max_depth(TreeView tree) {
  std::vector<std::int32_t> depths(static_cast<std::size_t>(tree.size()));
  tree_depths_row(tree.parents.data(), tree.size(), depths.data());
  std::int32_t deepest = 0;
  for (const auto depth : depths) deepest = depth > deepest ? depth : deepest;
  return deepest;
}

}  // namespace detail

/// Root-to-node path of `node`: depth(node) node ids, the first a child of the root, the last
/// `node` itself (the root, i.e. the last committed token, is not a node). `out` must hold exactly
/// depth(node) entries (`tree.depths[node]` of a DraftTree).
/// Complexity: O(N) for the tree's validation, then O(depth).
inline void path_to_node(TreeView tree, std::int32_t node, std::span<std::int32_t> out) {
  detail::check_tree(tree);
  detail::check_node("node", node, tree);
  const auto depth = detail::node_depth(tree, node);
  detail::check_buffer("out", out, static_cast<std::size_t>(depth));
  detail::path_to_node_row(tree.parents.data(), node, depth, out.data());
}

/// Convenience form of path_to_node that allocates.
inline std::vector<std::int32_t> path_to_node(TreeView tree, std::int32_t node) {
  detail::check_tree(tree);
  detail::check_node("node", node, tree);
  std::vector<std::int32_t> out(static_cast<std::size_t>(detail::node_depth(tree, node)));
  path_to_node(tree, node, out);
  return out;
}

namespace detail {

/// Row function: `is_leaf[i]` = 1 when node i has no child, else 0 (n nodes, `parents[i] < i`).
SPECDEC_HOST_DEVICE void leaf_flags_row(const std::int32_t* parents, std::int32_t n,
                                        std::int32_t* is_leaf) {
  for (std::int32_t i = 0; i < n; ++i) is_leaf[i] = 1;
  for (std::int32_t i = 0; i < n; ++i) {
    if (parents[i] >= 0) is_leaf[parents[i]] = 0;
  }
}

}  // namespace detail

/// Number of leaves (nodes without children). An empty tree has none.
/// Complexity: O(N).
inline std::int32_t count_leaves(TreeView tree) {
  detail::check_tree(tree);
  std::vector<std::int32_t> flags(static_cast<std::size_t>(tree.size()));
  detail::leaf_flags_row(tree.parents.data(), tree.size(), flags.data());
  std::int32_t count = 0;
  for (auto f : flags) count += f;
  return count;
}

/// Writes the leaves in increasing node id (level order, so shallower leaves first) into `out`,
/// which must hold exactly count_leaves(tree) entries.
/// Complexity: O(N).
inline void leaves(TreeView tree, std::span<std::int32_t> out) {
  const auto count = count_leaves(tree);
  detail::check_buffer("out", out, static_cast<std::size_t>(count));
  std::vector<std::int32_t> flags(static_cast<std::size_t>(tree.size()));
  detail::leaf_flags_row(tree.parents.data(), tree.size(), flags.data());
  std::size_t k = 0;
  for (std::int32_t i = 0; i < tree.size(); ++i) {
    if (flags[static_cast<std::size_t>(i)]) out[k++] = i;
  }
}

/// Convenience form of leaves that allocates.
inline std::vector<std::int32_t> leaves(TreeView tree) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(count_leaves(tree)));
  leaves(tree, out);
  return out;
}

/// Root-to-leaf paths as a row-major matrix of `rows` x `width` node ids: row r is the path of the
/// r-th leaf (in the order of leaves()), padded with -1 on the right; rows past the last leaf are
/// all -1. Needs rows >= count_leaves(tree) and width >= the deepest depth (max_depth() of a
/// DraftTree); `out` holds rows * width entries.
/// Complexity: O(N + rows x width): the tree is validated once and each path is walked once.
inline void root_to_leaf_paths(TreeView tree, std::int32_t rows, std::int32_t width,
                               std::span<std::int32_t> out) {
  const auto count = count_leaves(tree);
  std::vector<std::int32_t> depths(static_cast<std::size_t>(tree.size()));
  detail::tree_depths_row(tree.parents.data(), tree.size(), depths.data());
  std::int32_t max_depth = 0;
  for (const auto depth : depths) max_depth = depth > max_depth ? depth : max_depth;
  if (rows < count) detail::fail("rows", "{} is fewer than the {} leaves", rows, count);
  if (width < max_depth) {
    detail::fail("width", "{} is shorter than the deepest path ({})", width, max_depth);
  }
  detail::check_buffer("out", out,
                       static_cast<std::size_t>(rows) * static_cast<std::size_t>(width));
  for (auto& x : out) x = -1;
  std::vector<std::int32_t> leaf_ids(static_cast<std::size_t>(count));
  leaves(tree, leaf_ids);
  for (std::size_t r = 0; r < leaf_ids.size(); ++r) {
    const auto leaf = leaf_ids[r];
    detail::path_to_node_row(tree.parents.data(), leaf, depths[static_cast<std::size_t>(leaf)],
                             out.data() + r * static_cast<std::size_t>(width));
  }
}

/// Convenience form: one vector per leaf, in the order of leaves(). O(N + the paths' total
/// length): the tree is checked once, not once per leaf.
inline std::vector<std::vector<std::int32_t>> root_to_leaf_paths(TreeView tree) {
  std::vector<std::vector<std::int32_t>> out;
  for (auto leaf : leaves(tree)) {  // leaves() checks the tree
    const auto depth = detail::node_depth(tree, leaf);
    auto& path = out.emplace_back(static_cast<std::size_t>(depth));
    detail::path_to_node_row(tree.parents.data(), leaf, depth, path.data());
  }
  return out;
}

}  // namespace specdec
