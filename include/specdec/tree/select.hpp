// SPDX-License-Identifier: MIT
// Trees chosen from the draft's own confidence: EAGLE-2's rerank of an expanded draft to the top
// nodes by path score, SpecExec's best-first growth, and OPT-Tree's rule for when to stop.
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
#include "specdec/core/token.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_view.hpp"

namespace specdec {

/// How many nodes to keep, and OPT-Tree's stopping rule.
struct SelectOptions {
  /// At most this many nodes.
  std::int32_t budget = 0;
  /// OPT-Tree: a node whose path probability exp(path score), its expected gain in accepted
  /// tokens, is below this is not added (0 keeps every node the budget allows).
  double min_gain = 0.0;
  /// Growth only (grow_best_first): the deepest level.
  std::int32_t max_depth = std::numeric_limits<std::int32_t>::max();
};

/// Nodes kept from an expanded draft: `nodes[i]` is the expanded node id of selected node i and
/// `parents[i]` its parent among the selected (-1 = the root), in level order with siblings in
/// their expanded order.
struct TreeSelection {
  std::vector<std::int32_t> nodes;
  std::vector<std::int32_t> parents;

  std::int32_t size() const { return static_cast<std::int32_t>(nodes.size()); }
};

/// A child the draft proposes for a node during growth.
struct DraftCandidate {
  Token token = 0;
  float log_prob = 0.0f;  ///< the draft's log-probability of `token` given the node's path
};

/// A grown tree and each node's path score (the cumulative log-probability), in level order.
struct GrownTree {
  DraftTree tree;
  std::vector<double> path_scores;
};

/// Scratch memory of the selection and growth functions, reused between calls: a call that
/// selects or grows no more nodes than an earlier call with the same workspace allocates nothing.
/// Its contents between calls are unspecified.
struct SelectWorkspace {
  // Members are named for the functions below; callers treat them as opaque.
  std::vector<double> score;
  std::vector<std::int32_t> ids, local, order, start, children, fill, position, parents, depths;
  std::vector<Token> tokens, path;
  std::vector<DraftCandidate> candidates;
  struct Proposal {
    double score;
    std::int64_t order;  // proposal order: ancestors and earlier siblings first
    std::int32_t parent;
    Token token;
  };
  std::vector<Proposal> frontier;  // a binary heap, best on top
  TreeSelection selection;
};

namespace detail {

inline void check_select_options(const SelectOptions& options) {
  if (options.budget < 0) fail("budget", "{} must be >= 0", options.budget);
  if (!(std::isfinite(options.min_gain) && options.min_gain >= 0.0)) {
    fail("min_gain", "{} must be finite and >= 0", options.min_gain);
  }
  if (options.max_depth < 1) fail("max_depth", "{} must be >= 1", options.max_depth);
}

/// A log-probability: not NaN and <= 0 (-inf allowed), so path scores never grow along a path.
inline void check_log_prob(const ArgName& name, double log_prob) {
  if (!(log_prob <= 0.0)) fail(name, "{} is not a log-probability (<= 0)", log_prob);
}

/// Breadth-first order of a tree given with each parent before its children (-1 = the root):
/// `order[k]` is the old id of new node k, children of a node in increasing old id. O(N); the
/// workspace's start, children and fill are its scratch.
inline void level_order(std::span<const std::int32_t> parents, std::vector<std::int32_t>& order,
                        SelectWorkspace& ws) {
  const std::size_t n = parents.size();
  auto& start = ws.start;  // CSR of children, by parent + 1
  auto& children = ws.children;
  start.assign(n + 2, 0);
  children.resize(n);
  for (const auto p : parents) ++start[static_cast<std::size_t>(p + 2)];
  for (std::size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
  ws.fill.assign(start.begin(), start.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    children[static_cast<std::size_t>(ws.fill[static_cast<std::size_t>(parents[i] + 1)]++)] =
        static_cast<std::int32_t>(i);
  }
  order.clear();
  auto append_children = [&](std::int32_t node) {
    const auto k = static_cast<std::size_t>(node + 1);
    order.insert(order.end(), children.begin() + start[k], children.begin() + start[k + 1]);
  };
  append_children(-1);
  for (std::size_t k = 0; k < order.size(); ++k) append_children(order[k]);
}

/// `selection` renumbered into level order: `ids[i]` with parent `local_parents[i]` (an index
/// into ids, each parent before its children). Uses the workspace's order and position.
inline void to_level_order(std::span<const std::int32_t> ids,
                           std::span<const std::int32_t> local_parents, TreeSelection& out,
                           SelectWorkspace& ws) {
  auto& order = ws.order;
  level_order(local_parents, order, ws);
  auto& position = ws.position;
  position.resize(ids.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    position[static_cast<std::size_t>(order[k])] = static_cast<std::int32_t>(k);
  }
  out.nodes.resize(ids.size());
  out.parents.resize(ids.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto old = static_cast<std::size_t>(order[k]);
    out.nodes[k] = ids[old];
    const auto parent = local_parents[old];
    out.parents[k] = parent < 0 ? -1 : position[static_cast<std::size_t>(parent)];
  }
}

}  // namespace detail

/// EAGLE-2's rerank (with OPT-Tree's stopping rule when options.min_gain > 0): of an expanded
/// draft whose node i has the draft's log-probability `log_probs[i]` given its parent, the top
/// options.budget nodes by path score (the cumulative log-probability from the root), written to
/// `out`. Scores never grow along a path and ties go to the smaller id, so a parent always ranks
/// above its child: the selection is ancestor-closed, a tree. Throws specdec::Error naming
/// parents[i] (-1 or an earlier node), log_probs (size), log_probs[i] (NaN or > 0), budget or
/// min_gain. Complexity: O(N + B log B) (a selection of the top B, then a sort of those B); no
/// allocation once `out` and `workspace` have held a tree as large.
inline void select_by_path_score(std::span<const std::int32_t> parents,
                                 std::span<const float> log_probs, const SelectOptions& options,
                                 TreeSelection& out, SelectWorkspace& workspace) {
  detail::check_select_options(options);
  detail::check_size("log_probs", log_probs.size(), parents.size());
  detail::check_node_count("parents", parents.size());
  const std::size_t n = parents.size();
  auto& score = workspace.score;
  auto& ids = workspace.ids;
  score.resize(n);
  ids.clear();
  const double floor = options.min_gain > 0.0 ? std::log(options.min_gain)
                                              : -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    const auto parent = parents[i];
    detail::check_parent(ArgName("parents", static_cast<std::int64_t>(i)), parent,
                         static_cast<std::int64_t>(i));
    detail::check_log_prob(ArgName("log_probs", static_cast<std::int64_t>(i)), log_probs[i]);
    score[i] = (parent < 0 ? 0.0 : score[static_cast<std::size_t>(parent)]) + log_probs[i];
    if (score[i] >= floor) ids.push_back(static_cast<std::int32_t>(i));
  }
  const auto budget = static_cast<std::size_t>(options.budget);
  if (ids.size() > budget) {
    // Higher score first; on a tie the smaller id, which an ancestor always has.
    const auto before = [&](std::int32_t a, std::int32_t b) {
      const double sa = score[static_cast<std::size_t>(a)], sb = score[static_cast<std::size_t>(b)];
      return sa > sb || (sa == sb && a < b);
    };
    std::nth_element(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(budget), ids.end(),
                     before);
    ids.resize(budget);
    std::sort(ids.begin(), ids.end());
  }
  // Parents as indices into ids (ids ascending, so a parent's index is found by search).
  auto& local = workspace.local;
  local.resize(ids.size());
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const auto parent = parents[static_cast<std::size_t>(ids[k])];
    local[k] = parent < 0
                   ? -1
                   : static_cast<std::int32_t>(
                         std::lower_bound(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k),
                                          parent) -
                         ids.begin());
  }
  detail::to_level_order(ids, local, out, workspace);
}

/// select_by_path_score returning its selection (allocates).
inline TreeSelection select_by_path_score(std::span<const std::int32_t> parents,
                                          std::span<const float> log_probs,
                                          const SelectOptions& options) {
  SelectWorkspace workspace;
  TreeSelection out;
  select_by_path_score(parents, log_probs, options, out, workspace);
  return out;
}

/// The selected nodes of `expanded` written to `out` (cleared first) as a DraftTree of their own
/// (tokens copied). No allocation once `out` has held a tree as large.
inline void selected_tree(TreeView expanded, const TreeSelection& selection, DraftTree& out) {
  out.clear();
  for (std::size_t k = 0; k < selection.nodes.size(); ++k) {
    const auto id = selection.nodes[k];
    if (id < 0 || id >= expanded.size()) {
      detail::fail(ArgName("selection.nodes", static_cast<std::int64_t>(k)),
                   "{} is not a node of the expanded tree ({} nodes)", id, expanded.size());
    }
    out.add(expanded.tokens[static_cast<std::size_t>(id)], selection.parents[k]);
  }
}

/// selected_tree returning a new DraftTree.
inline DraftTree selected_tree(TreeView expanded, const TreeSelection& selection) {
  DraftTree tree;
  tree.reserve(selection.nodes.size());
  selected_tree(expanded, selection, tree);
  return tree;
}

/// SpecExec's best-first growth (with OPT-Tree's stopping rule when options.min_gain > 0): starting
/// from the root, repeatedly add the candidate with the highest path score among the children the
/// draft proposed for the nodes added so far, until options.budget nodes, no candidate left, or
/// the best candidate's path probability falls below options.min_gain; the tree is written to
/// `out`. `expand(path, children)` fills `children` (a std::vector<DraftCandidate>, cleared before
/// the call) with the draft's candidates for the node reached by the tokens `path` from the root
/// (empty: the root), most probable first; it is called for each added node that may still get
/// children. Ties go to the earlier proposed candidate. Throws specdec::Error naming budget,
/// min_gain, max_depth, or children[k] for a candidate whose token is negative or whose log_prob
/// is not a log-probability. Complexity: O(B x (depth + C log(B x C))) besides `expand`, C
/// candidates per node; no allocation once `out` and `workspace` have grown a tree as large with
/// as many candidates.
template <class Expand>
void grow_best_first(Expand&& expand, const SelectOptions& options, GrownTree& out,
                     SelectWorkspace& workspace) {
  detail::check_select_options(options);
  using Proposal = SelectWorkspace::Proposal;
  const auto worse = [](const Proposal& a, const Proposal& b) {
    return a.score < b.score || (a.score == b.score && a.order > b.order);
  };
  auto& frontier = workspace.frontier;
  auto& parents = workspace.parents;
  auto& depths = workspace.depths;
  auto& tokens = workspace.tokens;
  auto& path = workspace.path;
  auto& scores = workspace.score;
  auto& children = workspace.candidates;
  frontier.clear();
  parents.clear();
  depths.clear();
  tokens.clear();
  scores.clear();
  std::int64_t proposed = 0;
  const double floor = options.min_gain > 0.0 ? std::log(options.min_gain)
                                              : -std::numeric_limits<double>::infinity();
  auto propose = [&](std::int32_t node) {
    path.clear();
    for (auto k = node; k >= 0; k = parents[static_cast<std::size_t>(k)]) {
      path.push_back(tokens[static_cast<std::size_t>(k)]);
    }
    std::reverse(path.begin(), path.end());
    children.clear();
    expand(std::span<const Token>(path), children);
    const double base = node < 0 ? 0.0 : scores[static_cast<std::size_t>(node)];
    for (std::size_t k = 0; k < children.size(); ++k) {
      const ArgName name("children", static_cast<std::int64_t>(k));
      if (children[k].token < 0) detail::fail(name, "token {} is negative", children[k].token);
      detail::check_log_prob(name, children[k].log_prob);
      frontier.push_back({base + children[k].log_prob, proposed++, node, children[k].token});
      std::push_heap(frontier.begin(), frontier.end(), worse);
    }
  };
  const auto budget = options.budget;
  if (budget > 0) propose(-1);
  while (static_cast<std::int32_t>(tokens.size()) < budget && !frontier.empty()) {
    const Proposal best = frontier.front();
    if (best.score < floor) break;
    std::pop_heap(frontier.begin(), frontier.end(), worse);
    frontier.pop_back();
    const auto node = static_cast<std::int32_t>(tokens.size());
    parents.push_back(best.parent);
    tokens.push_back(best.token);
    scores.push_back(best.score);
    depths.push_back(best.parent < 0 ? 1 : depths[static_cast<std::size_t>(best.parent)] + 1);
    if (node + 1 < budget && depths.back() < options.max_depth) propose(node);
  }
  // Growth order keeps parents first; renumber breadth first (siblings in the order added).
  auto& ids = workspace.ids;
  ids.resize(tokens.size());
  for (std::size_t k = 0; k < ids.size(); ++k) ids[k] = static_cast<std::int32_t>(k);
  auto& order = workspace.selection;
  detail::to_level_order(ids, parents, order, workspace);
  out.tree.clear();
  out.path_scores.clear();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const auto old = static_cast<std::size_t>(order.nodes[k]);
    out.tree.add(tokens[old], order.parents[k]);
    out.path_scores.push_back(scores[old]);
  }
}

/// grow_best_first returning the grown tree (allocates).
template <class Expand>
GrownTree grow_best_first(Expand&& expand, const SelectOptions& options) {
  SelectWorkspace workspace;
  GrownTree out;
  grow_best_first(std::forward<Expand>(expand), options, out, workspace);
  return out;
}

}  // namespace specdec
