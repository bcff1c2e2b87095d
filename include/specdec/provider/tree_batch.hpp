// SPDX-License-Identifier: MIT
// TreeBatch: the draft-tree nodes a LogitsProvider evaluates, appended to its committed context.
#pragma once

#include "specdec/core/checked.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_rows.hpp"

namespace specdec {

/// The nodes a provider must evaluate after its committed context of `committed_length` tokens.
///
/// Node i carries `tokens[i]`, `parents[i]` (-1 = the root, which is the last committed token;
/// otherwise an earlier node) and `positions[i]`, its absolute position id. The committed tokens
/// occupy positions 0 .. committed_length - 1, so the root sits at `root_position()` =
/// committed_length - 1 and a node at depth d sits at committed_length - 1 + d.
///
/// A provider answers a batch with `size() + 1` rows (see logits_provider.hpp): row 0 is the
/// distribution after the committed context, row i + 1 the distribution after node i's path.
///
/// `attention_mask` is optional: engines that want a packed mask point it at memory they or a mask
/// builder filled (build_packed_mask in tree/tree_mask.hpp, packed_tree_masks_batch in
/// backend/tree_mask_batch.hpp for a batch),
/// `mask_words_per_row` 32-bit words per node. Bit j % 32 (least significant first) of word j / 32
/// in row i is set when node i attends to node j, i.e. j is i or one of its ancestors; every node
/// also attends to the whole committed context, root included (not in the mask). It is derived from
/// `parents`, travels with the batch for the engine's benefit, and is never consulted by the
/// library's own providers. The batch does not own that memory.
///
/// The vectors keep their capacity across `assign` calls, so rebuilding a batch each step does not
/// allocate after warm-up.
struct TreeBatch {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<std::int32_t> positions;
  std::int64_t committed_length = 0;
  std::span<const std::uint32_t> attention_mask = {};
  std::int64_t mask_words_per_row = 0;

  std::int32_t size() const { return static_cast<std::int32_t>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  /// Rows a provider returns for this batch: one for the root plus one per node.
  std::int64_t rows() const { return static_cast<std::int64_t>(tokens.size()) + 1; }
  /// Absolute position of the root (the last committed token).
  std::int64_t root_position() const { return committed_length - 1; }
  /// The tokens and parents as a TreeView (valid while this batch is alive and unchanged).
  TreeView view() const { return {tokens, parents}; }
  /// Depth of node i (1 for children of the root).
  std::int32_t depth(std::int32_t node) const {
    return static_cast<std::int32_t>(positions[static_cast<std::size_t>(node)] - root_position());
  }

  /// Rebuilds this batch from `tree` after a context of `committed_length` tokens (>= 1, since
  /// the root is the last committed token). Throws specdec::Error if `committed_length` < 1, a
  /// position would pass INT32_MAX, or the tree is malformed (sizes, parent order, depths; token
  /// ranges are checked by `validate`). Positions are detail::tree_positions_row's, as
  /// tree_positions gives them. Clears `attention_mask`. After a throw the batch's contents are
  /// unspecified.
  void assign(const DraftTree& tree, std::int64_t committed_length_) {
    if (committed_length_ < 1) {
      detail::fail("committed_length", "{} must be >= 1 (the root is the last committed token)",
                   committed_length_);
    }
    detail::check_size("tree.parents", tree.parents.size(), tree.tokens.size());
    detail::check_size("tree.depths", tree.depths.size(), tree.tokens.size());
    const auto context =
        detail::checked_narrow<std::int32_t>("committed_length", committed_length_);
    committed_length = committed_length_;
    attention_mask = {};
    mask_words_per_row = 0;
    tokens.assign(tree.tokens.begin(), tree.tokens.end());
    parents.assign(tree.parents.begin(), tree.parents.end());
    positions.resize(tokens.size());
    std::int32_t max_depth = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const auto parent = parents[i];
      detail::check_parent(ArgName("tree.parents", i), parent, static_cast<std::int64_t>(i));
      const std::int32_t expected =
          parent < 0 ? 1 : tree.depths[static_cast<std::size_t>(parent)] + 1;
      if (tree.depths[i] != expected) {
        detail::fail(fmt::format("tree.depths[{}]", i), "{} should be {} (parent's depth + 1)",
                     tree.depths[i], expected);
      }
      max_depth = expected > max_depth ? expected : max_depth;
    }
    if (static_cast<std::int64_t>(context) + max_depth - 1 > INT32_MAX) {
      detail::fail("committed_length", "{} plus the tree depth {} overflows int32 position ids",
                   context, max_depth);
    }
    detail::tree_positions_row(parents.data(), size(), context, positions.data());
  }

  /// A batch for `tree` after `committed_length` committed tokens (see `assign`).
  static TreeBatch from_tree(const DraftTree& tree, std::int64_t committed_length) {
    TreeBatch batch;
    batch.assign(tree, committed_length);
    return batch;
  }

  /// Throws specdec::Error naming the field unless: committed_length >= 1, sizes agree, every
  /// parent precedes its child, positions[i] = parent's position + 1 (the root's being
  /// root_position()), every token lies in [0, vocab), and a non-empty attention_mask holds
  /// size() * mask_words_per_row words with mask_words_per_row >= ceil(size() / 32).
  void validate(std::int64_t vocab) const {
    if (committed_length < 1) {
      detail::fail("committed_length", "{} must be >= 1 (the root is the last committed token)",
                   committed_length);
    }
    detail::check_size("parents", parents.size(), tokens.size());
    detail::check_size("positions", positions.size(), tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      detail::check_token(ArgName("tokens", i), tokens[i], vocab);
      const auto parent = parents[i];
      detail::check_parent(ArgName("parents", i), parent, static_cast<std::int64_t>(i));
      const std::int64_t expected =
          (parent < 0 ? root_position() : positions[static_cast<std::size_t>(parent)]) + 1;
      if (static_cast<std::int64_t>(positions[i]) != expected) {
        detail::fail(fmt::format("positions[{}]", i), "{} should be {} (parent's position + 1)",
                     positions[i], expected);
      }
    }
    if (!attention_mask.empty()) {
      const std::int64_t needed = (static_cast<std::int64_t>(tokens.size()) + 31) / 32;
      if (mask_words_per_row < needed) {
        detail::fail("mask_words_per_row", "{} words cannot hold {} nodes (need >= {})",
                     mask_words_per_row, tokens.size(), needed);
      }
      detail::check_size("attention_mask", attention_mask.size(),
                         tokens.size() * static_cast<std::size_t>(mask_words_per_row));
    }
  }
};

namespace detail {

/// Checks that `kept_nodes` is a root-to-node path of `batch`: kept_nodes[0] is a child of the
/// root and each later entry a child of the one before it. Throws specdec::Error naming
/// `kept_nodes[k]` otherwise.
inline void check_kept_path(const TreeBatch& batch, std::span<const std::int32_t> kept_nodes) {
  std::int32_t previous = -1;
  for (std::size_t k = 0; k < kept_nodes.size(); ++k) {
    const auto node = kept_nodes[k];
    if (node < 0 || node >= batch.size()) {
      fail(fmt::format("kept_nodes[{}]", k), "{} is not a node of the batch ({} nodes)", node,
           batch.size());
    }
    const auto parent = batch.parents[static_cast<std::size_t>(node)];
    if (parent != previous) {
      fail(fmt::format("kept_nodes[{}]", k),
           "node {} has parent {}, but the path requires parent {} (a root-to-node path, in "
           "order)",
           node, parent, previous);
    }
    previous = node;
  }
}

}  // namespace detail
}  // namespace specdec
