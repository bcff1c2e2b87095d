// SPDX-License-Identifier: MIT
// DraftedTree: a draft tree plus the draft row each expanded node's children were drawn from, and
// the callback concept through which drafters ask any model for draft rows.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/tree/draft_tree.hpp"

namespace specdec {

/// The node id of the root (the last committed token) in draft-row requests.
inline constexpr std::int32_t kRootNode = -1;

/// A draft-row callback: `f(tree, nodes, rows)` fills row r of `rows` (nodes.size() x V) with the
/// draft model's (warped) next-token probabilities after the path root -> nodes[r] of `tree`
/// (`nodes[r] == kRootNode` asks for the row after the committed context). Drafters call it once
/// per tree level, with every node of that level they are about to expand.
template <class F>
concept DraftRowFunction = requires(F& f, const DraftTree& tree,
                                    std::span<const std::int32_t> nodes, MatrixView<float> rows) {
  f(tree, nodes, rows);
};

/// A draft tree together with the draft rows the verifier needs.
///
/// Layout: `tree` holds the nodes in level order (see DraftTree). `row_index[0]` is the row of
/// the root and `row_index[i + 1]` the row of node i; -1 means the node was not expanded (a leaf
/// at the maximum depth). Row r occupies `rows[r * vocab, (r + 1) * vocab)`: the warped draft
/// probabilities the node's children were drawn from (children are in sampling order, so a
/// recursive rejection verifier can consume them directly). `log_probs[i]` is the draft log
/// probability of the path root -> i (sum of log draft(token) along it). `scores[i]` is the
/// drafter's ranking value: the truncated perturbed value psi for RSD-S, the perturbed value
/// log draft + Gumbel for RSD-C, the joint score for beam search; 0 for i.i.d. drafts.
///
/// clear() keeps every buffer's capacity, so redrafting a tree of the same shape does not allocate.
struct DraftedTree {
  DraftTree tree;
  std::int64_t vocab = 0;
  std::vector<std::int32_t> row_index{-1};
  std::vector<float> rows;
  std::vector<float> log_probs;
  std::vector<float> scores;

  std::int32_t size() const { return tree.size(); }
  std::int32_t row_count() const {
    return vocab == 0 ? 0
                      : static_cast<std::int32_t>(rows.size() / static_cast<std::size_t>(vocab));
  }

  void clear(std::int64_t vocab_size) {
    tree.clear();
    vocab = vocab_size;
    row_index.assign(1, -1);
    rows.clear();
    log_probs.clear();
    scores.clear();
  }

  /// True if `node` (kRootNode for the root) has a stored draft row.
  bool has_row(std::int32_t node) const {
    return node >= -1 && node < size() && row_index[static_cast<std::size_t>(node + 1)] >= 0;
  }

  /// The draft row `node`'s children were drawn from (kRootNode for the root).
  std::span<const float> row(std::int32_t node) const {
    if (node < -1 || node >= size()) {
      detail::fail("node", "{} is not a node of the tree ({} nodes, -1 = root)", node, size());
    }
    const auto r = row_index[static_cast<std::size_t>(node + 1)];
    if (r < 0) detail::fail("node", "node {} was not expanded and has no draft row", node);
    return {rows.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(vocab),
            static_cast<std::size_t>(vocab)};
  }

  /// Appends a node (see DraftTree::add) and returns its id.
  std::int32_t add(Token token, std::int32_t parent, float log_prob, float score) {
    const auto id = tree.add(token, parent);
    row_index.push_back(-1);
    log_probs.push_back(log_prob);
    scores.push_back(score);
    return id;
  }

  /// Path log probability of `node` (0 for the root).
  float path_log_prob(std::int32_t node) const {
    return node < 0 ? 0.0f : log_probs[static_cast<std::size_t>(node)];
  }
};

namespace detail {

inline void check_vocab(std::int64_t vocab) {
  if (vocab < 1 || vocab > (std::int64_t{1} << 31) - 1) {
    fail("vocab", "{} must be in [1, 2^31 - 1]", vocab);
  }
}

/// Asks `draft_rows` for the rows of `nodes`, stores them in `out` and validates each one.
/// Returns the view of the new rows.
template <class F>
MatrixView<float> request_rows(DraftedTree& out, F& draft_rows,
                               std::span<const std::int32_t> nodes) {
  const auto first = static_cast<std::size_t>(out.row_count());
  const auto vocab = static_cast<std::size_t>(out.vocab);
  out.rows.resize((first + nodes.size()) * vocab);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    out.row_index[static_cast<std::size_t>(nodes[i] + 1)] = static_cast<std::int32_t>(first + i);
  }
  MatrixView<float> view(out.rows.data() + first * vocab, static_cast<std::int64_t>(nodes.size()),
                         out.vocab);
  draft_rows(std::as_const(out.tree), nodes, view);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::span<const float> row = view.row(static_cast<std::int64_t>(i));
    try {
      check_probability_row("draft_rows", row);
    } catch (const Error&) {
      // Name the node only on failure: formatting it for every row would allocate per step.
      check_probability_row(fmt::format("draft_rows(node {})", nodes[i]), row);
    }
  }
  return view;
}

/// Sum of a row in float (the scale sample_weights needs).
inline float row_total(std::span<const float> row) {
  float total = 0.0f;
  for (float x : row) total += x;
  return total;
}

inline void check_node_budget(std::int64_t nodes) {
  if (nodes > static_cast<std::int64_t>(kMaxNode) - 1) {
    fail("tree", "{} nodes exceed the limit of {} per tree", nodes, kMaxNode - 1);
  }
}

/// The checks of a beam drafter of `width` beams over `depth` levels (`depth_name` names the
/// latter), then `out` emptied for its width x depth nodes.
inline void start_beam_tree(DraftedTree& out, std::int64_t vocab, std::int32_t width,
                            std::int32_t depth, const char* depth_name) {
  check_vocab(vocab);
  if (width < 1) fail("width", "{} must be >= 1", width);
  if (depth < 1) fail(depth_name, "{} must be >= 1", depth);
  check_node_budget(static_cast<std::int64_t>(width) * depth);
  out.clear(vocab);
  out.tree.reserve(static_cast<std::size_t>(width) * static_cast<std::size_t>(depth));
}

/// request_rows for the parents of a level into `nodes`: the root at the first level, else the
/// nodes [begin, end) of the level before. The view has a row per parent.
template <class F>
MatrixView<float> request_level_rows(DraftedTree& out, F& draft_rows, bool first_level,
                                     std::int32_t begin, std::int32_t end,
                                     std::span<std::int32_t> nodes) {
  std::size_t count = 0;
  if (first_level) {
    nodes[count++] = kRootNode;
  } else {
    for (std::int32_t n = begin; n < end; ++n) nodes[count++] = n;
  }
  return request_rows(out, draft_rows, nodes.first(count));
}

}  // namespace detail
}  // namespace specdec
