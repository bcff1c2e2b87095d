// SPDX-License-Identifier: MIT
// Sequoia's tree shapes: the rank-ordered tree of at most `budget` nodes that maximises the
// expected number of accepted tokens, and the budget and depth that minimise time per token.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/tree/tree_view.hpp"

namespace specdec {

/// A tree without tokens, laid out like a DraftTree: nodes in level order, `parents[i]` (-1 = the
/// root, the last committed token) and `ranks[i]` (0 = its parent's first child). Children of a
/// node are contiguous and in rank order, so any token array of size() entries makes it a
/// DraftTree / TreeView that every mask, position, exporter and verifier accepts.
struct TreeShape {
  std::vector<std::int32_t> parents;
  std::vector<std::int32_t> ranks;
  /// Sum over the nodes of the product of acceptance_by_rank[rank] along the root path: the
  /// expected number of accepted drafted tokens (the bonus token not counted).
  double expected_accepted = 0.0;

  std::int32_t size() const { return static_cast<std::int32_t>(parents.size()); }
  bool empty() const { return parents.empty(); }
};

namespace detail {

/// Every entry of an acceptance vector is a probability; there is at least one rank.
inline void check_acceptance(const ArgName& name, std::span<const double> acceptance) {
  if (acceptance.empty()) fail(name, "is empty (at least one rank is needed)");
  for (std::size_t r = 0; r < acceptance.size(); ++r) {
    if (!(acceptance[r] >= 0.0 && acceptance[r] <= 1.0)) {
      fail(name[static_cast<std::int64_t>(r)], "{} is not a probability in [0, 1]", acceptance[r]);
    }
  }
}

/// The dynamic programme of Sequoia over (nodes, depth, child rank), for every budget up to
/// `budget` and every depth up to `max_depth` at once. With W = min(ranks, budget) and
/// D = min(max_depth, budget): O(budget^2 x D x W) time, O(budget x D x W) memory. Rebuilding a
/// table no larger than before reuses its memory.
class SequoiaTable {
 public:
  SequoiaTable() = default;
  SequoiaTable(std::span<const double> acceptance, std::int32_t budget, std::int32_t max_depth) {
    build(acceptance, budget, max_depth);
  }

  /// Fills the table for `acceptance` (held by reference until the next build).
  void build(std::span<const double> acceptance, std::int32_t budget, std::int32_t max_depth) {
    if (budget < 0) fail("budget", "{} must be >= 0", budget);
    if (max_depth < 1) fail("max_depth", "{} must be >= 1", max_depth);
    const auto width = static_cast<std::int32_t>(
        std::min<std::size_t>(acceptance.size(), static_cast<std::size_t>(budget)));
    const auto depth = std::min(max_depth, budget);
    const auto entries = static_cast<double>(depth) * (budget + 1) * width;
    if (entries > static_cast<double>(kMaxEntries)) {
      fail("budget", "{} with depth {} and {} ranks needs a table of {} entries (at most {})",
           budget, depth, width, entries, kMaxEntries);
    }
    acceptance_ = acceptance;
    budget_ = budget;
    width_ = width;
    depth_ = depth;
    fill();
  }

  /// g(m, L): the best expected accepted count of m nodes below a node, subtrees at most L deep.
  double value(std::int32_t budget, std::int32_t depth) const {
    depth = std::min(depth, depth_);
    return depth == 0 || budget == 0 ? 0.0 : best_[index(depth, budget)];
  }

  /// The tree reaching value(budget, depth), in level order (budget, depth within the table's),
  /// written to `out`.
  void shape(std::int32_t budget, std::int32_t depth, TreeShape& out) {
    out.parents.clear();
    out.ranks.clear();
    depth = std::min(depth, depth_);
    // Breadth first from the root: (nodes left for the children, depth left below) per node.
    pending_.clear();
    pending_.push_back({budget, depth});
    for (std::size_t k = 0; k < pending_.size(); ++k) {
      auto [nodes, below] = pending_[k];
      for (std::int32_t r = 0; r < width_ && nodes > 0 && below > 0; ++r) {
        const std::int32_t take = choice_[index(below, nodes) * width_ + r];
        if (take == 0) break;
        out.parents.push_back(static_cast<std::int32_t>(k) - 1);
        out.ranks.push_back(r);
        pending_.push_back({take - 1, below - 1});
        nodes -= take;
      }
    }
    double total = 0.0;
    reach_.resize(out.parents.size());
    for (std::size_t i = 0; i < reach_.size(); ++i) {
      const double above =
          out.parents[i] < 0 ? 1.0 : reach_[static_cast<std::size_t>(out.parents[i])];
      reach_[i] = above * acceptance_[static_cast<std::size_t>(out.ranks[i])];
      total += reach_[i];
    }
    out.expected_accepted = total;
  }

  TreeShape shape(std::int32_t budget, std::int32_t depth) {
    TreeShape out;
    shape(budget, depth, out);
    return out;
  }

 private:
  static constexpr std::size_t kMaxEntries = std::size_t{1} << 28;

  struct Pending {
    std::int32_t nodes, depth;
  };

  std::size_t index(std::int32_t depth, std::int32_t nodes) const {
    return static_cast<std::size_t>(depth - 1) * static_cast<std::size_t>(budget_ + 1) +
           static_cast<std::size_t>(nodes);
  }

  void fill() {
    const auto columns = static_cast<std::size_t>(budget_ + 1);
    best_.assign(static_cast<std::size_t>(depth_) * columns, 0.0);
    choice_.assign(best_.size() * static_cast<std::size_t>(width_), 0);
    subtree_.resize(columns);
    next_.resize(columns);
    current_.resize(columns);
    auto& subtree = subtree_;
    for (std::int32_t depth = 1; depth <= depth_; ++depth) {
      // subtree[s]: a child's subtree of s nodes, itself included, at most `depth` deep.
      subtree[0] = 0.0;
      for (std::size_t s = 1; s < columns; ++s) {
        subtree[s] =
            1.0 + (depth > 1 ? best_[index(depth - 1, static_cast<std::int32_t>(s - 1))] : 0.0);
      }
      // Ranks from the last: current[m] = best over m nodes given to ranks r, r + 1, ...
      std::fill(next_.begin(), next_.end(), 0.0);
      for (std::int32_t r = width_ - 1; r >= 0; --r) {
        const double p = acceptance_[static_cast<std::size_t>(r)];
        for (std::size_t m = 0; m < columns; ++m) {
          double best = 0.0;  // no child of rank r (nor later): ties keep the smaller tree
          std::int32_t take = 0;
          for (std::size_t s = 1; s <= m; ++s) {
            const double v = p * subtree[s] + next_[m - s];
            if (v > best) {
              best = v;
              take = static_cast<std::int32_t>(s);
            }
          }
          current_[m] = best;
          choice_[index(depth, static_cast<std::int32_t>(m)) * width_ + r] = take;
        }
        std::swap(current_, next_);
      }
      for (std::size_t m = 0; m < columns; ++m)
        best_[index(depth, static_cast<std::int32_t>(m))] = next_[m];
    }
  }

  std::span<const double> acceptance_;
  std::int32_t budget_ = 0, width_ = 0, depth_ = 0;
  std::vector<double> best_;          // [depth - 1][nodes]: g(nodes, depth) from rank 0
  std::vector<std::int32_t> choice_;  // [depth - 1][nodes][rank]: the rank's subtree size, 0 = stop
  std::vector<double> subtree_, next_, current_, reach_;  // scratch of fill() and shape()
  std::vector<Pending> pending_;
};

}  // namespace detail

/// Memory that sequoia_tree and sequoia_plan reuse between calls: a call with a budget, depth and
/// rank count no larger than an earlier call's allocates nothing (its result's vectors too, when
/// the same output is passed again).
struct SequoiaWorkspace {
  detail::SequoiaTable table;
};

/// Sequoia's tree: among the trees of at most `budget` nodes and at most `max_depth` levels whose
/// nodes have at most acceptance_by_rank.size() children, the one maximising the expected accepted
/// count, where the r-th child of a node (r = 0 first) is accepted with probability
/// acceptance_by_rank[r] given its parent was; written to `out`. Nodes that add nothing (a
/// probability of 0 on their path) are left out. Throws specdec::Error naming
/// acceptance_by_rank[r] (not in [0, 1], NaN), budget (< 0) or max_depth (< 1).
/// Complexity: O(budget^2 x D x W) time, O(budget x D x W) memory, D = min(max_depth, budget),
/// W = min(acceptance_by_rank.size(), budget).
inline void sequoia_tree(std::span<const double> acceptance_by_rank, std::int32_t budget,
                         std::int32_t max_depth, TreeShape& out, SequoiaWorkspace& workspace) {
  detail::check_acceptance("acceptance_by_rank", acceptance_by_rank);
  workspace.table.build(acceptance_by_rank, budget, max_depth);
  workspace.table.shape(budget, max_depth, out);
}

/// sequoia_tree returning its shape (allocates).
inline TreeShape sequoia_tree(std::span<const double> acceptance_by_rank, std::int32_t budget,
                              std::int32_t max_depth) {
  SequoiaWorkspace workspace;
  TreeShape out;
  sequoia_tree(acceptance_by_rank, budget, max_depth, out, workspace);
  return out;
}

namespace detail {

/// Nodes of the full `width`-ary tree of `depth` levels (width >= 1), counted level by level
/// until the count passes `most` (so a result above `most` only says "too many").
inline std::int64_t full_tree_size(std::int32_t width, std::int32_t depth, std::int64_t most) {
  std::int64_t level = 1, total = 0;
  for (std::int32_t d = 0; d < depth && total <= most; ++d) {
    level *= width;
    total += level;
  }
  return total;
}

}  // namespace detail

/// The full `width`-ary tree of `depth` levels (every node above the last level has `width`
/// children), written to `out` in level order with node i's children after node i - 1's;
/// expected_accepted is left 0 (no acceptance is given). Throws specdec::Error naming width (< 1)
/// or depth (< 0, or a tree of more than 2^24 nodes). Reuses `out`'s memory.
inline void full_tree_shape(std::int32_t width, std::int32_t depth, TreeShape& out) {
  if (width < 1) detail::fail("width", "{} must be >= 1", width);
  if (depth < 0) detail::fail("depth", "{} must be >= 0", depth);
  if (detail::full_tree_size(width, depth, std::int64_t{1} << 24) > (std::int64_t{1} << 24)) {
    detail::fail("depth", "{} with width {} makes more than 2^24 nodes", depth, width);
  }
  out.parents.clear();
  out.ranks.clear();
  out.expected_accepted = 0.0;
  std::int32_t first = -1, last = -1;  // the previous level's node range (the root: -1)
  for (std::int32_t d = 0; d < depth; ++d) {
    const auto begin = static_cast<std::int32_t>(out.parents.size());
    for (std::int32_t p = first; p <= last; ++p) {
      for (std::int32_t r = 0; r < width; ++r) {
        out.parents.push_back(p);
        out.ranks.push_back(r);
      }
    }
    first = begin;
    last = static_cast<std::int32_t>(out.parents.size()) - 1;
  }
}

/// full_tree_shape returning its shape (allocates).
inline TreeShape full_tree_shape(std::int32_t width, std::int32_t depth) {
  TreeShape out;
  full_tree_shape(width, depth, out);
  return out;
}

/// The expected accepted count of any tree (`parents[i]` -1 or an earlier node; a node's rank is
/// its place among its parent's children in id order). Throws specdec::Error naming
/// acceptance_by_rank or parents[i] (a bad parent, or a rank beyond acceptance_by_rank).
/// Complexity: O(N).
inline double expected_accepted(std::span<const double> acceptance_by_rank,
                                std::span<const std::int32_t> parents) {
  detail::check_acceptance("acceptance_by_rank", acceptance_by_rank);
  detail::check_node_count("parents", parents.size());
  std::vector<std::int32_t> children(parents.size() + 1, 0);  // [parent + 1]
  std::vector<double> reach(parents.size());
  double total = 0.0;
  for (std::size_t i = 0; i < parents.size(); ++i) {
    const auto parent = parents[i];
    detail::check_parent(ArgName("parents", static_cast<std::int64_t>(i)), parent,
                         static_cast<std::int64_t>(i));
    const auto rank = static_cast<std::size_t>(children[static_cast<std::size_t>(parent + 1)]++);
    if (rank >= acceptance_by_rank.size()) {
      detail::fail(ArgName("parents", static_cast<std::int64_t>(i)),
                   "makes node {} child {} of its parent; acceptance_by_rank has {} ranks", i, rank,
                   acceptance_by_rank.size());
    }
    const double above = parent < 0 ? 1.0 : reach[static_cast<std::size_t>(parent)];
    reach[i] = above * acceptance_by_rank[rank];
    total += reach[i];
  }
  return total;
}

/// What a speculative step costs on the hardware, for the hardware-aware form of Sequoia.
struct SequoiaCosts {
  /// verify_cost[n]: the time of one target pass over a tree of n nodes (and the root), for
  /// n = 0 .. the largest budget considered.
  std::span<const double> verify_cost{};
  /// The time of one draft pass, which drafts one level of the tree.
  double draft_cost_per_level = 0.0;
  /// The deepest tree considered.
  std::int32_t max_depth = 8;
};

/// The budget and depth of the fastest Sequoia tree, and the tree.
struct SequoiaPlan {
  TreeShape shape;
  std::int32_t budget = 0;  ///< 0: drafting does not pay; the target decodes alone
  std::int32_t depth = 0;
  /// (verify_cost[budget] + depth x draft_cost_per_level) / (expected_accepted + 1).
  double time_per_token = 0.0;
};

/// Sequoia's hardware-aware form: the budget (0 .. verify_cost.size() - 1) and depth
/// (1 .. max_depth; 0 with budget 0) minimising the time per emitted token, a step emitting
/// expected_accepted + 1 tokens (the bonus counted), written to `out`. Ties go to the smaller
/// budget, then the smaller depth. Throws specdec::Error naming acceptance_by_rank[r],
/// verify_cost (empty), verify_cost[n] (negative or not finite), draft_cost_per_level or
/// max_depth. Complexity: one table of sequoia_tree for budget = verify_cost.size() - 1, then
/// O(budget x max_depth).
inline void sequoia_plan(std::span<const double> acceptance_by_rank, const SequoiaCosts& costs,
                         SequoiaPlan& out, SequoiaWorkspace& workspace) {
  detail::check_acceptance("acceptance_by_rank", acceptance_by_rank);
  if (costs.verify_cost.empty()) {
    detail::fail("verify_cost", "is empty (it needs the cost of n = 0 nodes and up)");
  }
  for (std::size_t n = 0; n < costs.verify_cost.size(); ++n) {
    const double c = costs.verify_cost[n];
    if (!(std::isfinite(c) && c >= 0.0)) {
      detail::fail(ArgName("verify_cost", static_cast<std::int64_t>(n)),
                   "{} must be finite and >= 0", c);
    }
  }
  if (!(std::isfinite(costs.draft_cost_per_level) && costs.draft_cost_per_level >= 0.0)) {
    detail::fail("draft_cost_per_level", "{} must be finite and >= 0", costs.draft_cost_per_level);
  }
  const auto max_budget = static_cast<std::int32_t>(std::min<std::size_t>(
      costs.verify_cost.size() - 1, std::numeric_limits<std::int32_t>::max()));
  auto& table = workspace.table;
  // The largest budget is verify_cost's: a table too large is named after it.
  try {
    table.build(acceptance_by_rank, max_budget, costs.max_depth);
  } catch (const Error& e) {
    if (e.argument() != "budget") throw;
    detail::fail("verify_cost", "has {} entries: {}", costs.verify_cost.size(), e.problem());
  }
  out.budget = 0;
  out.depth = 0;
  out.time_per_token = costs.verify_cost[0];
  for (std::int32_t budget = 1; budget <= max_budget; ++budget) {
    for (std::int32_t depth = 1; depth <= std::min(costs.max_depth, budget); ++depth) {
      const double step =
          costs.verify_cost[static_cast<std::size_t>(budget)] + depth * costs.draft_cost_per_level;
      const double time = step / (table.value(budget, depth) + 1.0);
      if (time < out.time_per_token) {
        out.budget = budget;
        out.depth = depth;
        out.time_per_token = time;
      }
    }
  }
  if (out.budget > 0) {
    table.shape(out.budget, out.depth, out.shape);
  } else {
    out.shape.parents.clear();
    out.shape.ranks.clear();
    out.shape.expected_accepted = 0.0;
  }
}

/// sequoia_plan returning its plan (allocates).
inline SequoiaPlan sequoia_plan(std::span<const double> acceptance_by_rank,
                                const SequoiaCosts& costs) {
  SequoiaWorkspace workspace;
  SequoiaPlan plan;
  sequoia_plan(acceptance_by_rank, costs, plan, workspace);
  return plan;
}

}  // namespace specdec
