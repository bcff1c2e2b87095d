// SPDX-License-Identifier: MIT
// KV-cache compaction after verification: which tree slots survive and where they move, for one
// sequence and, as CSR, for a batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_paths.hpp"

namespace specdec {

namespace detail {

/// Checks that `accepted` is a path from the root: accepted[0] is a child of the root and every
/// later id is a child of the previous one. An empty path (nothing accepted) is valid.
/// Complexity: O(accepted.size()).
inline void check_accepted_path(const ArgName& name, TreeView tree,
                                std::span<const std::int32_t> accepted) {
  std::int32_t previous = -1;
  for (std::size_t t = 0; t < accepted.size(); ++t) {
    const auto node = accepted[t];
    if (node < 0 || node >= tree.size()) {
      fail(name[static_cast<std::int64_t>(t)], "{} is not a node of the tree (it has {} nodes)",
           node, tree.size());
    }
    const auto parent = tree.parents[static_cast<std::size_t>(node)];
    if (parent != previous) {
      fail(name[static_cast<std::int64_t>(t)],
           "node {} has parent {}, not {}: accepted ids must form a path from the root", node,
           parent, previous);
    }
    previous = node;
  }
}

}  // namespace detail

/// The cache moves that keep an accepted root path. The engine appended the N tree nodes to the
/// cache in node order, node i at slot `context_length + i` (the committed context occupies slots
/// [0, context_length), the root at context_length - 1). Accepted node `accepted[t]` must end up at
/// slot `context_length + t`; `source[t]` / `destination[t]` receive the slot to read and the slot
/// to write (apply in increasing t: a destination never exceeds its source, so copying in order
/// never overwrites a slot still to be read). Returns the number of entries with source !=
/// destination (0 when the accepted nodes already sit in place). The cache length afterwards is
/// `context_length + accepted.size()`; slots past it are free.
/// Complexity: O(N + accepted.size()) (the tree is validated once).
inline std::int32_t kv_compaction(TreeView tree, std::int32_t context_length,
                                  std::span<const std::int32_t> accepted,
                                  std::span<std::int32_t> source,
                                  std::span<std::int32_t> destination) {
  detail::check_tree(tree);
  if (context_length < 1) {
    detail::fail("context_length", "{} must be >= 1 (the root is a committed token)",
                 context_length);
  }
  (void)detail::checked_add<std::int32_t>("context_length", context_length, tree.size() - 1);
  detail::check_accepted_path("accepted", tree, accepted);
  detail::check_buffer("source", source, accepted.size());
  detail::check_buffer("destination", destination, accepted.size());
  std::int32_t moves = 0;
  // In 64 bits: the compiler cannot see that the checks above bound context_length + accepted[t].
  for (std::size_t t = 0; t < accepted.size(); ++t) {
    source[t] = static_cast<std::int32_t>(std::int64_t{context_length} + accepted[t]);
    destination[t] = context_length + static_cast<std::int32_t>(t);
    moves += source[t] != destination[t] ? 1 : 0;
  }
  return moves;
}

/// The same moves for a DraftTree, after checking its depths too.
inline std::int32_t kv_compaction(const DraftTree& tree, std::int32_t context_length,
                                  std::span<const std::int32_t> accepted,
                                  std::span<std::int32_t> source,
                                  std::span<std::int32_t> destination) {
  detail::check_tree(tree);
  return kv_compaction(tree.view(), context_length, accepted, source, destination);
}

/// Accepted paths of a batch in CSR form: the slots of row b are
/// `slots[offsets[b], offsets[b + 1])`, in path order (TensorRT-LLM's accepted-paths layout).
struct AcceptedPaths {
  std::vector<std::int32_t> offsets;  ///< B + 1 entries, offsets[0] = 0
  std::vector<std::int32_t> slots;    ///< cache slots (context_length[b] + node id) to keep
};

namespace detail {

/// pack_accepted_paths over B trees given by `tree_at(b)` (a DraftTree or a TreeView), each
/// checked as kv_compaction checks it, its errors named by rethrow_for_sequence.
template <class TreeAt>
void pack_accepted_batch(std::size_t batch, TreeAt tree_at,
                         std::span<const std::int32_t> context_lengths,
                         std::span<const std::span<const std::int32_t>> accepted,
                         AcceptedPaths& out) {
  check_size("context_lengths", context_lengths.size(), batch);
  check_size("accepted", accepted.size(), batch);
  out.offsets.assign(1, 0);
  out.slots.clear();
  for (std::size_t b = 0; b < batch; ++b) {
    const auto index = static_cast<std::int64_t>(b);
    try {
      check_tree(tree_at(b));
    } catch (const Error& e) {
      rethrow_for_sequence(e, index);
    }
    if (context_lengths[b] < 1) {
      fail(ArgName("context_lengths", index), "{} must be >= 1", context_lengths[b]);
    }
    const TreeView tree = tree_at(b);
    (void)checked_add<std::int32_t>(ArgName("context_lengths", index), context_lengths[b],
                                    tree.size() - 1);
    check_accepted_path(ArgName("accepted", index), tree, accepted[b]);
    for (auto id : accepted[b]) out.slots.push_back(context_lengths[b] + id);
    out.offsets.push_back(checked_narrow<std::int32_t>("accepted", out.slots.size()));
  }
}

}  // namespace detail

/// Packs the accepted paths of a batch: for row b, `slots` gains `context_lengths[b] + id` for each
/// id of `accepted[b]` (a root path of `trees[b]`). Vectors of `out` keep their capacity. An error
/// of row b names it first: `accepted[1][2]`, `depths[1][4]`.
/// Complexity: O(the trees' total size + the paths' total length).
inline void pack_accepted_paths(std::span<const DraftTree> trees,
                                std::span<const std::int32_t> context_lengths,
                                std::span<const std::span<const std::int32_t>> accepted,
                                AcceptedPaths& out) {
  detail::pack_accepted_batch(
      trees.size(), [trees](std::size_t b) -> const DraftTree& { return trees[b]; },
      context_lengths, accepted, out);
}

/// The same packing for B trees given as one TreeView cut by CSR `node_offsets` (B + 1 entries
/// from 0; tree b is nodes [node_offsets[b], node_offsets[b + 1]), parents local to it).
inline void pack_accepted_paths(std::span<const std::int32_t> node_offsets, TreeView trees,
                                std::span<const std::int32_t> context_lengths,
                                std::span<const std::span<const std::int32_t>> accepted,
                                AcceptedPaths& out) {
  detail::check_tree_batch(node_offsets, trees);
  detail::pack_accepted_batch(
      node_offsets.size() - 1,
      [node_offsets, trees](std::size_t b) { return detail::tree_of_batch(node_offsets, trees, b); },
      context_lengths, accepted, out);
}

}  // namespace specdec
