// SPDX-License-Identifier: MIT
// A tree drafter standing in for EAGLE: each node's children are the draft model's top tokens at
// that node, deterministic, verified against the target alone (verify_tree_target_only), with
// the tree's shape chosen by a policy: a fixed k-ary tree, Sequoia's tree from the acceptance
// measured so far (or its hardware-aware plan), EAGLE-2's rerank, SpecExec's best-first growth or
// OPT-Tree's stop.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec/core/enum_names.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/draft_calls.hpp"
#include "specdec/decode/strategy.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/acceptance.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/select.hpp"
#include "specdec/tree/sequoia.hpp"
#include "specdec/verify/target_only.hpp"

namespace specdec {

/// How TopKTreeStrategy chooses the shape of each step's tree.
enum class TreeShapePolicy {
  kFixed,     // every node to `depth` gets its `width` children: a full k-ary tree
  kSequoia,   // sequoia_tree(acceptance by rank measured so far, budget, depth), rebuilt each step
  kEagle2,    // EAGLE-2: expand the `width` best nodes per level, rerank to `budget` by path score
  kSpecExec,  // SpecExec: best-first growth by path score to `budget` nodes
  kOptTree,   // EAGLE-2's expansion, keeping nodes whose path probability is >= min_gain
  kSequoiaPlanned,  // sequoia_plan: the budget and depth of least time per token, each step
};

inline constexpr TreeShapePolicy kAllTreeShapePolicies[] = {
    TreeShapePolicy::kFixed,    TreeShapePolicy::kSequoia, TreeShapePolicy::kEagle2,
    TreeShapePolicy::kSpecExec, TreeShapePolicy::kOptTree, TreeShapePolicy::kSequoiaPlanned};

namespace detail {

/// The names of kAllTreeShapePolicies, in its order (with the words of parse errors).
inline constexpr EnumNames<TreeShapePolicy, 6> kTreeShapePolicyNames{
    kAllTreeShapePolicies,
    {"fixed", "sequoia", "eagle2", "specexec", "opt_tree", "sequoia_planned"},
    "shape",
    "a TreeShapePolicy",
    "a tree shape"};

}  // namespace detail

/// "fixed", "sequoia", "eagle2", "specexec", "opt_tree" or "sequoia_planned".
inline std::string_view tree_shape_policy_name(TreeShapePolicy shape) {
  return detail::kTreeShapePolicyNames.name(shape);
}

/// Parses a name of tree_shape_policy_name. Throws specdec::Error("shape") for any other string.
inline TreeShapePolicy parse_tree_shape_policy(std::string_view name) {
  return detail::kTreeShapePolicyNames.parse(name);
}

/// Options of TopKTreeStrategy.
struct TopKTreeOptions {
  TreeShapePolicy shape = TreeShapePolicy::kFixed;
  std::int32_t width = 2;   // children tried per node (the ranks Sequoia weighs)
  std::int32_t depth = 3;   // the deepest level
  std::int32_t budget = 8;  // nodes per tree: sequoia, eagle2, specexec, opt_tree (and the
                            // largest for sequoia_planned without verify_cost)
  double min_gain = 0.05;   // opt_tree: the smallest path probability kept, in (0, 1]
  AcceptancePrior prior{};  // sequoia, sequoia_planned: where the acceptance estimate starts
  /// sequoia_planned: verify_cost[n] is the time of one target pass over a tree of n nodes, for
  /// n = 0 .. the largest budget considered; empty = 1 for every n = 0 .. budget (a memory-bound
  /// target, whose pass costs the same for any small tree).
  std::vector<double> verify_cost{};
  /// sequoia_planned: the time of one draft pass (one level), in verify_cost's unit.
  double draft_cost_per_level = 0.0;

  /// Throws specdec::Error naming the field: shape, width ([1, min(vocab, 64)]), depth
  /// ([1, 64]), the fixed tree's size (at most 2^16 nodes, named "depth"), budget ([0, 1024]
  /// where used), min_gain (opt_tree: in (0, 1]), verify_cost (sequoia_planned: at most 1025
  /// entries), verify_cost[n] and draft_cost_per_level (finite and >= 0), prior.rate,
  /// prior.weight.
  void validate(std::int64_t vocab) const {
    tree_shape_policy_name(shape);
    const auto widest = std::min<std::int64_t>(vocab, 64);
    if (width < 1 || width > widest) detail::fail("width", "{} is outside [1, {}]", width, widest);
    if (depth < 1 || depth > 64) detail::fail("depth", "{} is outside [1, 64]", depth);
    if (shape == TreeShapePolicy::kFixed && fixed_tree_size() > kMaxNodes) {
      detail::fail("depth", "{} with width {} makes a tree of more than {} nodes", depth, width,
                   kMaxNodes);
    }
    if (shape != TreeShapePolicy::kFixed && (budget < 0 || budget > 1024)) {
      detail::fail("budget", "{} is outside [0, 1024]", budget);
    }
    if (shape == TreeShapePolicy::kOptTree && !(min_gain > 0.0 && min_gain <= 1.0)) {
      detail::fail("min_gain", "{} is outside (0, 1]", min_gain);
    }
    if (shape == TreeShapePolicy::kSequoiaPlanned) {
      if (verify_cost.size() > 1025) {
        detail::fail("verify_cost", "has {} entries (at most 1025: budgets 0 .. 1024)",
                     verify_cost.size());
      }
      for (std::size_t n = 0; n < verify_cost.size(); ++n) {
        if (!(std::isfinite(verify_cost[n]) && verify_cost[n] >= 0.0)) {
          detail::fail(ArgName("verify_cost", static_cast<std::int64_t>(n)),
                       "{} must be finite and >= 0", verify_cost[n]);
        }
      }
      if (!(std::isfinite(draft_cost_per_level) && draft_cost_per_level >= 0.0)) {
        detail::fail("draft_cost_per_level", "{} must be finite and >= 0", draft_cost_per_level);
      }
    }
    AcceptanceEstimator check(prior);
  }

  /// The most nodes a step's tree may have under this shape policy.
  std::int64_t max_tree_size() const {
    if (shape == TreeShapePolicy::kFixed) return fixed_tree_size();
    if (shape == TreeShapePolicy::kSequoiaPlanned && !verify_cost.empty()) {
      return static_cast<std::int64_t>(verify_cost.size()) - 1;
    }
    return budget;
  }

  /// Nodes of the full width-ary tree of `depth` levels (saturating above 2^20).
  std::int64_t fixed_tree_size() const {
    return detail::full_tree_size(width, depth, std::int64_t{1} << 20);
  }

  static constexpr std::int64_t kMaxNodes = std::int64_t{1} << 16;
};

/// A drafting strategy whose draft tokens come without draft rows: a node's children are the
/// draft model's top tokens after the node's path (largest logits first, ties to the smaller id),
/// so drafting draws no random numbers, and the scored tree is verified with
/// verify_tree_target_only, whose output law is the warped target's for any tree: lossless
/// whatever the shape. The draft model is a LogitsProvider held by reference (it must outlive the
/// strategy); its logits are read unwarped (the path scores are its own log-probabilities).
///
/// Shapes (TreeShapePolicy): kFixed and kSequoia fill a shape level by level, one draft call per
/// level, the r-th child of a node being its parent's rank-r token; kSequoia's shape is
/// sequoia_tree(acceptance_by_rank(width), budget, depth) of the AcceptanceEstimator this
/// strategy updates after every step (acceptance()); kSequoiaPlanned's is the shape of
/// sequoia_plan(that acceptance, {verify_cost, draft_cost_per_level, depth}) (plan()), which may
/// be empty (the target decodes alone while drafting does not pay). kEagle2 / kOptTree expand the
/// width nodes of best path score at each level with their width children (one draft call per
/// level), then keep select_by_path_score's top `budget` nodes (with min_gain for kOptTree).
/// kSpecExec grows with grow_best_first (width candidates per node, one draft call per expanded
/// node, at most `depth` deep). Randomness: verify_tree_target_only's draws of the verify stream.
/// Steps allocate nothing after warm-up, whatever the shape: the selection functions write into
/// buffers and workspaces the strategy keeps.
template <LogitsProvider Draft>
class TopKTreeStrategy {
 public:
  TopKTreeStrategy(Draft& draft, TopKTreeOptions options)
      : draft_(draft), options_(std::move(options)), estimator_(options_.prior) {}

  const TopKTreeOptions& options() const { return options_; }
  /// The tree drafted by the last step (kept until the next draft).
  const DraftTree& drafted() const { return built(); }
  /// The acceptance by child rank and depth measured over this sequence's steps so far.
  const AcceptanceEstimator& acceptance() const { return estimator_; }
  /// kSequoiaPlanned: the plan of the last step's tree.
  const SequoiaPlan& plan() const { return plan_; }

  /// Throws specdec::Error naming "draft" (a vocabulary other than the target's) or the field of
  /// the options.
  void prepare(std::int64_t vocab, Workspace& workspace) {
    provider::check_same_vocabulary(static_cast<std::int64_t>(draft_.model().vocab_size()), vocab);
    options_.validate(vocab);
    estimator_ = AcceptanceEstimator(options_.prior);
    if (options_.shape == TreeShapePolicy::kFixed) {
      full_tree_shape(options_.width, options_.depth, fixed_shape_);
    }
    if (options_.shape == TreeShapePolicy::kSequoiaPlanned) {
      costs_ = options_.verify_cost;
      if (costs_.empty()) costs_.assign(static_cast<std::size_t>(options_.budget) + 1, 1.0);
    }
    rates_.resize(static_cast<std::size_t>(options_.width));
    const auto nodes = static_cast<std::size_t>(options_.max_tree_size());
    tree_.reserve(nodes);
    accepted_.reserve(static_cast<std::size_t>(options_.depth));
    top_.resize(static_cast<std::size_t>(options_.width));
    workspace.reserve(static_cast<std::size_t>(vocab) * 8 + (nodes + 1) * 64 + (1 << 12));
  }

  /// Starts the draft model and a fresh acceptance estimate: a sequence's trees depend on it
  /// alone (so its tokens depend only on the seed and the sequence id).
  void reset(std::span<const Token> prompt) {
    draft_.model().reset(prompt);
    estimator_.reset();
  }

  const DraftTree& draft(const StepContext& context) {
    draft_.clear_calls();
    draft_.check_committed(context.sequence.length());
    grown_built_ = false;
    switch (options_.shape) {
      case TreeShapePolicy::kFixed:
        fill_shape(context, fixed_shape_.parents);
        break;
      case TreeShapePolicy::kSequoia:
        estimator_.fill_acceptance_by_rank(rates_);
        sequoia_tree(rates_, options_.budget, options_.depth, sequoia_shape_, sequoia_workspace_);
        fill_shape(context, sequoia_shape_.parents);
        break;
      case TreeShapePolicy::kSequoiaPlanned:
        estimator_.fill_acceptance_by_rank(rates_);
        sequoia_plan(rates_,
                     {.verify_cost = costs_,
                      .draft_cost_per_level = options_.draft_cost_per_level,
                      .max_depth = options_.depth},
                     plan_, sequoia_workspace_);
        fill_shape(context, plan_.shape.parents);
        break;
      case TreeShapePolicy::kSpecExec:
        grow(context);
        break;
      default:
        expand_and_select(context);
        break;
    }
    return built();
  }

  StepVerdict verify(const StepContext& context, const TargetScores& scores) {
    const DraftTree& tree = built();
    const auto rows = static_cast<std::size_t>(tree.size()) + 1;
    accepted_.resize(static_cast<std::size_t>(std::max(tree.max_depth(), 1)));
    const auto verdict = verify_tree_target_only<float>(
        tree.view(),
        std::span<const float>(scores.rows.data, rows * static_cast<std::size_t>(context.vocab)),
        context.vocab, context.sequence.verify_stream(), std::span<std::int32_t>(accepted_),
        context.workspace);
    return {
        std::span<const std::int32_t>(accepted_.data(), static_cast<std::size_t>(verdict.accepted)),
        verdict.token, draft_.calls()};
  }

  void commit(const TreeBatch& batch, std::span<const std::int32_t> accepted, Token next) {
    draft_.model().commit(batch, accepted, next);
    estimator_.update(built().parents, accepted);
  }

 private:
  const DraftTree& built() const { return grown_built_ ? grown_.tree : tree_; }

  // Gives the nodes of `parents` (level order, a node's children contiguous and in rank order)
  // their tokens: each level takes one draft call over the levels above it.
  void fill_shape(const StepContext& context, std::span<const std::int32_t> parents) {
    tree_.clear();
    const auto n = parents.size();
    std::size_t node = 0;
    while (node < n) {
      const auto logits = draft_.evaluate(tree_, context.sequence.length(), context.vocab);
      const auto parent_depth = [&](std::int32_t p) {
        return p < 0 ? 0 : tree_.depths[static_cast<std::size_t>(p)];
      };
      const auto level = parent_depth(parents[node]);
      while (node < n && parent_depth(parents[node]) == level) {
        const auto parent = parents[node];
        std::size_t children = 0;
        while (node + children < n && parents[node + children] == parent) ++children;
        detail::top_tokens(logits.row(parent + 1), static_cast<std::int32_t>(children),
                           top_.data());
        for (std::size_t r = 0; r < children; ++r) tree_.add(top_[r], parent);
        node += children;
      }
    }
  }

  // EAGLE-2: per level, the width nodes of best path score get their width children; then the
  // top `budget` nodes of the expanded tree (OPT-Tree: those above min_gain).
  void expand_and_select(const StepContext& context) {
    expanded_.clear();
    log_probs_.clear();
    path_scores_.clear();
    std::size_t level_begin = 0, level_end = 0;  // the last expanded level's node range
    for (std::int32_t d = 0; d < options_.depth; ++d) {
      const auto logits = draft_.evaluate(expanded_, context.sequence.length(), context.vocab);
      // Parents of this level: the root, or the width nodes of the level above by path score.
      frontier_.clear();
      if (d == 0) {
        frontier_.push_back(-1);
      } else {
        for (auto i = level_begin; i < level_end; ++i) {
          frontier_.push_back(static_cast<std::int32_t>(i));
        }
        const auto keep =
            std::min<std::size_t>(frontier_.size(), static_cast<std::size_t>(options_.width));
        std::partial_sort(frontier_.begin(), frontier_.begin() + static_cast<std::ptrdiff_t>(keep),
                          frontier_.end(), [&](std::int32_t a, std::int32_t b) {
                            const auto sa = path_scores_[static_cast<std::size_t>(a)];
                            const auto sb = path_scores_[static_cast<std::size_t>(b)];
                            return sa > sb || (sa == sb && a < b);
                          });
        frontier_.resize(keep);
        std::sort(frontier_.begin(), frontier_.end());
      }
      level_begin = static_cast<std::size_t>(expanded_.size());
      for (const auto parent : frontier_) {
        const auto row = logits.row(parent + 1);
        const double normaliser = detail::log_normaliser(row);
        detail::top_tokens(row, options_.width, top_.data());
        const double base = parent < 0 ? 0.0 : path_scores_[static_cast<std::size_t>(parent)];
        for (std::int32_t r = 0; r < options_.width; ++r) {
          const float lp =
              detail::draft_log_prob(row, normaliser, top_[static_cast<std::size_t>(r)]);
          expanded_.add(top_[static_cast<std::size_t>(r)], parent);
          log_probs_.push_back(lp);
          path_scores_.push_back(base + lp);
        }
      }
      level_end = static_cast<std::size_t>(expanded_.size());
    }
    const SelectOptions select{
        .budget = options_.budget,
        .min_gain = options_.shape == TreeShapePolicy::kOptTree ? options_.min_gain : 0.0};
    select_by_path_score(expanded_.parents, log_probs_, select, selection_, select_workspace_);
    selected_tree(expanded_, selection_, tree_);
  }

  // SpecExec: best-first growth, one draft call per node whose children are proposed.
  void grow(const StepContext& context) {
    const auto expand = [&](std::span<const Token> path, std::vector<DraftCandidate>& children) {
      path_tree_.clear();
      for (std::size_t i = 0; i < path.size(); ++i) {
        path_tree_.add(path[i], static_cast<std::int32_t>(i) - 1);
      }
      const auto logits = draft_.evaluate(path_tree_, context.sequence.length(), context.vocab);
      const auto row = logits.row(static_cast<std::int64_t>(path.size()));
      const double normaliser = detail::log_normaliser(row);
      detail::top_tokens(row, options_.width, top_.data());
      for (const auto token : top_) {
        children.push_back({token, detail::draft_log_prob(row, normaliser, token)});
      }
    };
    grow_best_first(expand, SelectOptions{.budget = options_.budget, .max_depth = options_.depth},
                    grown_, select_workspace_);
    grown_built_ = true;  // grown_.tree is handed on as grown, not copied
  }

  detail::DraftModelCalls<Draft> draft_;
  TopKTreeOptions options_;
  AcceptanceEstimator estimator_;
  DraftTree tree_, expanded_, path_tree_;
  bool grown_built_ = false;  // the last step's tree is grown_.tree (kSpecExec), else tree_
  std::vector<std::int32_t> frontier_, accepted_;
  std::vector<Token> top_;
  std::vector<float> log_probs_;
  std::vector<double> path_scores_, rates_, costs_;
  // Reused by the selection functions, so that steps allocate nothing after warm-up.
  SequoiaWorkspace sequoia_workspace_;
  TreeShape fixed_shape_, sequoia_shape_;
  SequoiaPlan plan_;
  SelectWorkspace select_workspace_;
  TreeSelection selection_;
  GrownTree grown_;
};

}  // namespace specdec
