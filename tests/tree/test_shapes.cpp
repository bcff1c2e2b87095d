// SPDX-License-Identifier: MIT
// Tree shapes from measured acceptance: Sequoia's dynamic programme against brute force, its
// hardware-aware form, EAGLE-2's rerank, best-first growth, OPT-Tree's stop, the estimator.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "specdec/core/workspace.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/tree/tree.hpp"
#include "specdec/verify/tree.hpp"

using namespace specdec;

namespace {

struct Enumerated {
  std::int32_t size, depth;
  double value;
};

// Every rank-ordered tree of at most `max_nodes` nodes and at most `width` children per node:
// breadth first, each queued node (the root first) picks its number of children.
void enumerate(std::vector<std::int32_t>& parents, std::vector<std::int32_t>& depths,
               std::size_t queued, std::int32_t max_nodes, std::int32_t width,
               const std::vector<double>& acceptance, std::vector<Enumerated>& out) {
  if (queued > parents.size()) {  // every node has chosen: one finished tree
    std::vector<double> reach(parents.size());
    std::vector<std::int32_t> seen(parents.size() + 1, 0);
    double value = 0.0;
    std::int32_t depth = 0;
    for (std::size_t i = 0; i < parents.size(); ++i) {
      const auto rank = seen[static_cast<std::size_t>(parents[i] + 1)]++;
      reach[i] = (parents[i] < 0 ? 1.0 : reach[static_cast<std::size_t>(parents[i])]) *
                 acceptance[static_cast<std::size_t>(rank)];
      value += reach[i];
      depth = std::max(depth, depths[i]);
    }
    out.push_back({static_cast<std::int32_t>(parents.size()), depth, value});
    return;
  }
  const auto parent = static_cast<std::int32_t>(queued) - 1;
  const std::int32_t parent_depth = parent < 0 ? 0 : depths[static_cast<std::size_t>(parent)];
  const auto room = max_nodes - static_cast<std::int32_t>(parents.size());
  for (std::int32_t c = 0; c <= std::min(width, room); ++c) {
    for (std::int32_t k = 0; k < c; ++k) {
      parents.push_back(parent);
      depths.push_back(parent_depth + 1);
    }
    enumerate(parents, depths, queued + 1, max_nodes, width, acceptance, out);
    parents.resize(parents.size() - static_cast<std::size_t>(c));
    depths.resize(depths.size() - static_cast<std::size_t>(c));
  }
}

std::vector<Enumerated> every_tree(const std::vector<double>& acceptance, std::int32_t max_nodes) {
  std::vector<std::int32_t> parents, depths;
  std::vector<Enumerated> out;
  enumerate(parents, depths, 0, max_nodes, static_cast<std::int32_t>(acceptance.size()), acceptance,
            out);
  return out;
}

DraftTree as_draft_tree(const TreeShape& shape) {
  DraftTree tree;
  for (std::size_t i = 0; i < shape.parents.size(); ++i) tree.add(shape.ranks[i], shape.parents[i]);
  return tree;
}

std::int32_t depth_of(const TreeShape& shape) { return as_draft_tree(shape).max_depth(); }

}  // namespace

TEST_CASE("the enumeration visits every ordered tree once (Catalan numbers)", "[tree][sequoia]") {
  const auto trees = every_tree(std::vector<double>(8, 0.5), 8);
  std::map<std::int32_t, int> by_size;
  for (const auto& t : trees) ++by_size[t.size];
  const int catalan[] = {1, 1, 2, 5, 14, 42, 132, 429, 1430};
  for (int n = 0; n <= 8; ++n) CHECK(by_size[n] == catalan[n]);
}

TEST_CASE("sequoia_tree equals brute force over every rank-ordered tree of up to 8 nodes",
          "[tree][sequoia]") {
  toy::ToyRandom rng(7);
  std::vector<std::vector<double>> vectors = {
      {0.8, 0.15, 0.05}, {0.3, 0.6}, {0.5, 0.0, 0.4}, {1.0}, {0.0, 0.7}, {0.9, 0.9, 0.9, 0.9}};
  for (int k = 0; k < 4; ++k) {
    std::vector<double> random(1 + k % 3);
    for (auto& p : random) p = rng.uniform();
    vectors.push_back(random);
  }
  for (const auto& acceptance : vectors) {
    const auto trees = every_tree(acceptance, 8);
    for (std::int32_t budget = 0; budget <= 8; ++budget) {
      for (std::int32_t depth = 1; depth <= 5; ++depth) {
        double best = 0.0;
        for (const auto& t : trees) {
          if (t.size <= budget && t.depth <= depth) best = std::max(best, t.value);
        }
        const auto shape = sequoia_tree(acceptance, budget, depth);
        INFO("acceptance[0] " << acceptance[0] << ", budget " << budget << ", depth " << depth);
        CHECK(shape.expected_accepted == Approx(best).margin(1e-12));
        CHECK(shape.size() <= budget);
        CHECK(depth_of(shape) <= depth);
        CHECK(expected_accepted(acceptance, shape.parents) ==
              Approx(shape.expected_accepted).margin(1e-12));
      }
    }
  }
}

TEST_CASE("sequoia_tree: level order, ranks in order, and every tree consumer accepts it",
          "[tree][sequoia]") {
  const std::vector<double> acceptance = {0.7, 0.2, 0.08, 0.02};
  const auto shape = sequoia_tree(acceptance, 24, 5);
  REQUIRE(shape.size() == 24);
  REQUIRE(shape.ranks.size() == shape.parents.size());
  // Ranks count 0, 1, ... among each parent's children, in id order, and siblings are adjacent.
  std::map<std::int32_t, std::int32_t> next_rank;
  for (std::size_t i = 0; i < shape.parents.size(); ++i) {
    CHECK(shape.ranks[i] == next_rank[shape.parents[i]]++);
    if (shape.ranks[i] > 0) CHECK(shape.parents[i - 1] == shape.parents[i]);
  }
  const auto tree = as_draft_tree(shape);
  tree.validate(4);  // level order, parents first
  std::vector<std::uint32_t> mask(packed_mask_size(tree));
  build_packed_mask(tree, mask);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(tree.size()));
  tree_positions(tree, 5, positions);
  std::vector<std::int64_t> index(static_cast<std::size_t>(engine_tree_size(tree))),
      next(index.size()), sibling(index.size());
  sglang::export_tree(tree, 0, index, next, sibling);
  // Verification walks it: uniform rows over 4 tokens, each token a child's rank.
  const std::size_t rows = static_cast<std::size_t>(tree.size()) + 1;
  const std::vector<float> uniform(rows * 4, 0.25f);
  std::vector<std::int32_t> accepted(static_cast<std::size_t>(tree.max_depth()));
  Workspace ws;
  const auto verdict =
      verify_tree(Recursive{}, tree, uniform, uniform, 4, RandomStream{.seed = 1}, accepted, ws);
  CHECK(verdict.accepted >= 0);
}

TEST_CASE("sequoia_tree: expected accepted never falls as the budget grows", "[tree][sequoia]") {
  const std::vector<double> acceptance = {0.6, 0.25, 0.1, 0.05};
  for (std::int32_t depth : {1, 2, 4, 8}) {
    double previous = 0.0;
    for (std::int32_t budget = 0; budget <= 48; ++budget) {
      const auto shape = sequoia_tree(acceptance, budget, depth);
      CHECK(shape.expected_accepted >= previous);
      CHECK(depth_of(shape) <= depth);
      previous = shape.expected_accepted;
    }
  }
  // A chain is optimal when only the first child is ever accepted.
  const auto chain = sequoia_tree(std::vector<double>{0.9, 0.0}, 6, 10);
  CHECK(chain.parents == std::vector<std::int32_t>{-1, 0, 1, 2, 3, 4});
  // Width 1 and depth 3 cap a tree at 3 nodes whatever the budget.
  CHECK(sequoia_tree(std::vector<double>{0.5}, 10, 3).size() == 3);
}

TEST_CASE("sequoia_tree: bad input names the argument", "[tree][sequoia][errors]") {
  const auto argument = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.argument();
    }
    return std::string("no error");
  };
  const std::vector<double> good = {0.5, 0.2};
  CHECK(argument([&] {
          sequoia_tree(std::vector<double>{0.5, -0.1}, 4, 2);
        }) == "acceptance_by_rank[1]");
  CHECK(argument([&] { sequoia_tree(std::vector<double>{1.5}, 4, 2); }) == "acceptance_by_rank[0]");
  CHECK(argument([&] { sequoia_tree(std::vector<double>{NAN}, 4, 2); }) == "acceptance_by_rank[0]");
  CHECK(argument([&] { sequoia_tree(std::vector<double>{}, 4, 2); }) == "acceptance_by_rank");
  CHECK(argument([&] { sequoia_tree(good, -1, 2); }) == "budget");
  CHECK(argument([&] { sequoia_tree(good, 4, 0); }) == "max_depth");
  CHECK(argument([&] { sequoia_tree(good, 1 << 20, 1 << 20); }) == "budget");
  CHECK(argument([&] {
          expected_accepted(good, std::vector<std::int32_t>{-1, -1, -1});
        }) == "parents[2]");
  CHECK(argument([&] {
          expected_accepted(good, std::vector<std::int32_t>{-1, 1});
        }) == "parents[1]");
  const std::vector<double> cost = {1.0, 1.1};
  CHECK(argument([&] { sequoia_plan(good, {.verify_cost = {}}); }) == "verify_cost");
  CHECK(argument([&] {
          sequoia_plan(good, {.verify_cost = std::vector<double>{1.0, -1.0}});
        }) == "verify_cost[1]");
  CHECK(argument([&] { sequoia_plan(good, {.verify_cost = cost, .draft_cost_per_level = NAN}); }) ==
        "draft_cost_per_level");
  CHECK(argument([&] { sequoia_plan(good, {.verify_cost = cost, .max_depth = 0}); }) ==
        "max_depth");
  const std::vector<double> huge((1 << 20) + 1, 1.0);  // a table too large for memory
  CHECK(argument([&] { sequoia_plan(good, {.verify_cost = huge, .max_depth = 1 << 20}); }) ==
        "verify_cost");
}

TEST_CASE("sequoia_plan minimises time per token over every budget and depth",
          "[tree][sequoia][hardware]") {
  const std::vector<double> acceptance = {0.7, 0.2, 0.05};
  // Flat verification up to 16 nodes, then linear: the fastest tree fills the flat part.
  std::vector<double> verify(65);
  for (std::size_t n = 0; n < verify.size(); ++n) verify[n] = 10.0 + std::max(0.0, n - 16.0);
  const double draft = 0.5;
  const auto plan = sequoia_plan(
      acceptance, {.verify_cost = verify, .draft_cost_per_level = draft, .max_depth = 8});
  double best = verify[0];
  for (std::int32_t b = 1; b < 65; ++b) {
    for (std::int32_t d = 1; d <= 8; ++d) {
      const auto shape = sequoia_tree(acceptance, b, d);
      best = std::min(best, (verify[static_cast<std::size_t>(b)] + d * draft) /
                                (shape.expected_accepted + 1.0));
    }
  }
  CHECK(plan.time_per_token == Approx(best).epsilon(1e-12));
  CHECK(plan.budget == 16);
  CHECK(plan.shape.size() == plan.budget);
  CHECK(depth_of(plan.shape) == plan.depth);
  CHECK(plan.time_per_token ==
        Approx((verify[16] + plan.depth * draft) / (plan.shape.expected_accepted + 1.0)));
  // When drafting costs more than it saves, the plan drafts nothing.
  const auto none = sequoia_plan(acceptance, {.verify_cost = verify, .draft_cost_per_level = 100});
  CHECK(none.budget == 0);
  CHECK(none.shape.empty());
  CHECK(none.time_per_token == verify[0]);
}

// ---- selection from an expanded draft ---------------------------------------------------------

namespace {

struct Expanded {
  std::vector<std::int32_t> parents;
  std::vector<float> log_probs;
};

// A random level-ordered expanded draft, log-probabilities drawn from few values (ties) and
// some exact zeros (a child as likely as its parent).
Expanded random_expanded(std::int32_t n, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  Expanded e;
  const float values[] = {0.0f, -0.25f, -0.5f, -1.0f, -2.0f};
  for (std::int32_t i = 0; i < n; ++i) {
    const auto parent =
        i < 3 ? -1 : static_cast<std::int32_t>(rng.uniform() * static_cast<float>(i));
    e.parents.push_back(parent);
    e.log_probs.push_back(values[static_cast<int>(rng.uniform() * 5.0f) % 5]);
  }
  return e;
}

std::vector<double> path_scores(const Expanded& e) {
  std::vector<double> score(e.parents.size());
  for (std::size_t i = 0; i < score.size(); ++i) {
    score[i] =
        (e.parents[i] < 0 ? 0.0 : score[static_cast<std::size_t>(e.parents[i])]) + e.log_probs[i];
  }
  return score;
}

}  // namespace

TEST_CASE("select_by_path_score keeps the top nodes and is ancestor-closed", "[tree][select]") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto e = random_expanded(40, seed);
    const auto score = path_scores(e);
    for (std::int32_t budget : {0, 1, 5, 17, 40, 60}) {
      const auto selection = select_by_path_score(e.parents, e.log_probs, {.budget = budget});
      REQUIRE(selection.size() == std::min(budget, 40));
      // Ancestor-closed and renumbered: each parent is selected and comes first.
      std::set<std::int32_t> chosen(selection.nodes.begin(), selection.nodes.end());
      CHECK(chosen.size() == selection.nodes.size());
      for (std::size_t k = 0; k < selection.nodes.size(); ++k) {
        const auto parent = selection.parents[k];
        REQUIRE(parent < static_cast<std::int32_t>(k));
        const auto expanded_parent = e.parents[static_cast<std::size_t>(selection.nodes[k])];
        CHECK(expanded_parent ==
              (parent < 0 ? -1 : selection.nodes[static_cast<std::size_t>(parent)]));
      }
      // The top scores: nothing left out scores above anything kept.
      double lowest_kept = 1.0, highest_left = -INFINITY;
      for (std::size_t i = 0; i < score.size(); ++i) {
        if (chosen.count(static_cast<std::int32_t>(i)))
          lowest_kept = std::min(lowest_kept, score[i]);
        else
          highest_left = std::max(highest_left, score[i]);
      }
      if (budget > 0 && budget < 40) CHECK(highest_left <= lowest_kept);
      // A DraftTree in level order.
      const std::vector<Token> tokens(e.parents.size(), 1);
      selected_tree(TreeView{tokens, e.parents}, selection).validate(2);
    }
  }
}

TEST_CASE(
    "select_by_path_score: OPT-Tree's threshold keeps nodes whose path probability reaches it",
    "[tree][select]") {
  const auto e = random_expanded(30, 3);
  const auto score = path_scores(e);
  const double min_gain = std::exp(-1.0);
  const auto selection =
      select_by_path_score(e.parents, e.log_probs, {.budget = 30, .min_gain = min_gain});
  std::int32_t expected = 0;
  for (double s : score) expected += s >= std::log(min_gain) ? 1 : 0;
  CHECK(selection.size() == expected);
  for (auto id : selection.nodes)
    CHECK(std::exp(score[static_cast<std::size_t>(id)]) >= min_gain * (1 - 1e-12));
}

TEST_CASE("select_by_path_score: bad input names the argument", "[tree][select][errors]") {
  const std::vector<std::int32_t> parents = {-1, 0};
  CHECK_THROWS_WITH(select_by_path_score(parents, std::vector<float>{-0.1f, 0.5f}, {.budget = 1}),
                    Catch::StartsWith("log_probs[1]"));
  CHECK_THROWS_WITH(select_by_path_score(parents, std::vector<float>{NAN, -1.0f}, {.budget = 1}),
                    Catch::StartsWith("log_probs[0]"));
  CHECK_THROWS_WITH(select_by_path_score(parents, std::vector<float>{-0.1f}, {.budget = 1}),
                    Catch::StartsWith("log_probs"));
  CHECK_THROWS_WITH(select_by_path_score(std::vector<std::int32_t>{-1, 1},
                                         std::vector<float>{-0.1f, -0.1f}, {.budget = 1}),
                    Catch::StartsWith("parents[1]"));
  CHECK_THROWS_WITH(select_by_path_score(parents, std::vector<float>{-0.1f, -0.1f}, {.budget = -1}),
                    Catch::StartsWith("budget"));
  CHECK_THROWS_WITH(select_by_path_score(parents, std::vector<float>{-0.1f, -0.1f},
                                         {.budget = 1, .min_gain = -1}),
                    Catch::StartsWith("min_gain"));
}

namespace {

// A draft that proposes, after any path, tokens 0..2 with probabilities 0.6, 0.3, 0.1 (the
// same at every node): path probabilities are products of these.
void fixed_draft(std::span<const Token>, std::vector<DraftCandidate>& children) {
  const float p[] = {0.6f, 0.3f, 0.1f};
  for (Token t = 0; t < 3; ++t) children.push_back({t, std::log(p[t])});
}

}  // namespace

TEST_CASE("grow_best_first adds the most probable candidates, in level order", "[tree][select]") {
  const auto grown = grow_best_first(fixed_draft, {.budget = 6});
  const auto& tree = grown.tree;
  tree.validate(3);
  REQUIRE(tree.size() == 6);
  // Best first over products of 0.6/0.3/0.1: 0.6, 0.36, 0.3, 0.216, 0.18, 0.18 (ties: earlier).
  std::vector<double> probabilities;
  for (double s : grown.path_scores) probabilities.push_back(std::exp(s));
  std::sort(probabilities.rbegin(), probabilities.rend());
  const std::vector<double> expected = {0.6, 0.36, 0.3, 0.216, 0.18, 0.18};
  for (std::size_t k = 0; k < 6; ++k) CHECK(probabilities[k] == Approx(expected[k]).epsilon(1e-6));
  // It equals EAGLE-2's rerank of the same draft expanded fully to depth 3.
  std::vector<std::int32_t> parents;
  std::vector<float> log_probs;
  std::vector<Token> tokens;
  std::vector<std::int32_t> level = {-1};
  for (int depth = 0; depth < 3; ++depth) {
    std::vector<std::int32_t> next;
    for (auto parent : level) {
      std::vector<DraftCandidate> children;
      fixed_draft({}, children);
      for (const auto& c : children) {
        next.push_back(static_cast<std::int32_t>(parents.size()));
        parents.push_back(parent);
        log_probs.push_back(c.log_prob);
        tokens.push_back(c.token);
      }
    }
    level = next;
  }
  const auto selected = selected_tree(TreeView{tokens, parents},
                                      select_by_path_score(parents, log_probs, {.budget = 6}));
  CHECK(selected.tokens == tree.tokens);
  CHECK(selected.parents == tree.parents);
}

TEST_CASE("grow_best_first: depth limit, OPT-Tree stop, and the paths it asks about",
          "[tree][select]") {
  CHECK(grow_best_first(fixed_draft, {.budget = 10, .max_depth = 1}).tree.size() == 3);
  // Path probabilities >= 0.2: 0.6, 0.36, 0.3, 0.216 (0.18 falls below).
  const auto cut = grow_best_first(fixed_draft, {.budget = 50, .min_gain = 0.2});
  CHECK(cut.tree.size() == 4);
  // The callback sees the tokens from the root to the node it expands.
  std::vector<std::vector<Token>> asked;
  grow_best_first(
      [&](std::span<const Token> path, std::vector<DraftCandidate>& children) {
        asked.emplace_back(path.begin(), path.end());
        fixed_draft(path, children);
      },
      {.budget = 3});
  CHECK(asked == std::vector<std::vector<Token>>{{}, {0}, {0, 0}});
  CHECK_THROWS_WITH(grow_best_first(
                        [](std::span<const Token>, std::vector<DraftCandidate>& c) {
                          c.push_back({1, 0.5f});
                        },
                        {.budget = 2}),
                    Catch::StartsWith("children[0]"));
}

TEST_CASE("Selection and Sequoia forms with a reused workspace equal the returning forms",
          "[tree][select][sequoia]") {
  // One workspace and one output through a large call, then smaller and different ones: stale
  // contents must not leak into a later result.
  SelectWorkspace select_workspace;
  TreeSelection selection;
  GrownTree grown;
  SequoiaWorkspace sequoia_workspace;
  TreeShape shape;
  SequoiaPlan plan;
  const std::vector<std::int32_t> parents = {-1, -1, 0, 0, 1, 2, 2, 4, 3, 5};
  const std::vector<float> log_probs = {-0.2f, -1.8f, -0.5f, -1.0f, -0.1f,
                                        -0.3f, -2.0f, -0.4f, -0.1f, -0.2f};
  for (const std::int32_t budget : {10, 3, 7, 0}) {
    for (const double min_gain : {0.0, 0.3}) {
      const SelectOptions options{.budget = budget, .min_gain = min_gain};
      select_by_path_score(parents, log_probs, options, selection, select_workspace);
      const auto fresh = select_by_path_score(parents, log_probs, options);
      CHECK(selection.nodes == fresh.nodes);
      CHECK(selection.parents == fresh.parents);
      grow_best_first(fixed_draft, {.budget = budget, .min_gain = min_gain, .max_depth = 3}, grown,
                      select_workspace);
      const auto fresh_grown =
          grow_best_first(fixed_draft, {.budget = budget, .min_gain = min_gain, .max_depth = 3});
      CHECK(grown.tree.tokens == fresh_grown.tree.tokens);
      CHECK(grown.tree.parents == fresh_grown.tree.parents);
      CHECK(grown.path_scores == fresh_grown.path_scores);
    }
  }
  const std::vector<std::vector<double>> acceptances = {{0.9, 0.5, 0.2}, {0.7}, {0.6, 0.6}};
  for (const auto& acceptance : acceptances) {
    for (const std::int32_t budget : {12, 4, 0}) {
      sequoia_tree(acceptance, budget, 3, shape, sequoia_workspace);
      const auto fresh = sequoia_tree(acceptance, budget, 3);
      CHECK(shape.parents == fresh.parents);
      CHECK(shape.ranks == fresh.ranks);
      CHECK(shape.expected_accepted == fresh.expected_accepted);
    }
    const std::vector<double> verify_cost = {1.0, 1.0, 1.1, 1.3, 1.6, 2.0};
    const SequoiaCosts costs{.verify_cost = verify_cost, .draft_cost_per_level = 0.1};
    sequoia_plan(acceptance, costs, plan, sequoia_workspace);
    const auto fresh = sequoia_plan(acceptance, costs);
    CHECK(plan.budget == fresh.budget);
    CHECK(plan.depth == fresh.depth);
    CHECK(plan.time_per_token == fresh.time_per_token);
    CHECK(plan.shape.parents == fresh.shape.parents);
  }
}

// ---- the acceptance estimator -----------------------------------------------------------------

TEST_CASE("AcceptanceEstimator counts by rank and by depth from accepted paths",
          "[tree][acceptance]") {
  // Root: a(0) b(1) c(2); a: d(3) e(4); e: f(5).
  const std::vector<std::int32_t> parents = {-1, -1, -1, 0, 0, 4};
  AcceptanceEstimator estimator({.rate = 0.5, .weight = 0.0});
  estimator.update(parents, std::vector<std::int32_t>{0, 4, 5});  // a, then e (rank 1), then f
  estimator.update(parents, std::vector<std::int32_t>{2});        // c (rank 2), a leaf
  estimator.update(parents, std::vector<std::int32_t>{});         // nothing accepted
  estimator.update(parents, std::vector<std::int32_t>{0});        // a, none of its children
  const auto rank = estimator.by_rank();
  REQUIRE(rank.size() == 3);
  // Offered: the root 4 times (3 ranks), a twice (2 ranks), e once (1 rank).
  CHECK(rank[0].offered == 7);
  CHECK(rank[1].offered == 6);
  CHECK(rank[2].offered == 4);
  CHECK(rank[0].accepted == 3);  // a, a, f
  CHECK(rank[1].accepted == 1);  // e
  CHECK(rank[2].accepted == 1);  // c
  const auto depth = estimator.by_depth();
  REQUIRE(depth.size() == 3);
  CHECK(depth[0].offered == 4);
  CHECK(depth[0].accepted == 3);
  CHECK(depth[1].offered == 2);
  CHECK(depth[1].accepted == 1);
  CHECK(depth[2].offered == 1);
  CHECK(depth[2].accepted == 1);
  const auto p = estimator.acceptance_by_rank(4);
  CHECK(p == std::vector<double>{3.0 / 7, 1.0 / 6, 1.0 / 4, 0.5});  // rank 3: the prior
  CHECK(sequoia_tree(p, 8, 4).size() == 8);
  CHECK_THROWS_WITH(estimator.update(parents, std::vector<std::int32_t>{0, 5}),
                    Catch::StartsWith("accepted_nodes[1]"));
  CHECK(estimator.by_rank()[0].offered == 7);  // a refused update changes nothing
}

TEST_CASE("AcceptanceEstimator recovers the acceptance of verified Sequoia trees",
          "[tree][acceptance]") {
  // The same rows at every node. Recursive rejection accepts the first child (token 0) w.p.
  // min(1, 0.2 / (1/3)) = 0.6; after a rejection the residual target is all on token 1, which
  // the second child then holds: accepted w.p. 0.4. A third child would never be accepted.
  const std::int64_t vocab = 4;
  const std::vector<double> truth = {0.6, 0.4, 0.0};
  const auto shape = sequoia_tree(truth, 10, 4);
  for (auto r : shape.ranks) REQUIRE(r < 2);  // a child of probability 0 adds nothing
  const auto tree = as_draft_tree(shape);
  const auto rows = static_cast<std::size_t>(tree.size()) + 1;
  std::vector<float> target, draft;
  for (std::size_t r = 0; r < rows; ++r) {
    target.insert(target.end(), {0.2f, 0.5f, 0.3f, 0.0f});
    draft.insert(draft.end(), {1.0f / 3, 1.0f / 3, 1.0f / 3, 0.0f});
  }
  AcceptanceEstimator estimator;
  Workspace ws;
  std::vector<std::int32_t> accepted(static_cast<std::size_t>(tree.max_depth()));
  const int steps = 4000;
  double total = 0.0;
  for (int step = 0; step < steps; ++step) {
    const RandomStream stream{.seed = 5, .position = static_cast<std::uint32_t>(step)};
    const auto verdict = verify_tree(Recursive{}, tree, target, draft, vocab, stream, accepted, ws);
    total += verdict.accepted;
    estimator.update(shape.parents, std::span<const std::int32_t>(accepted).first(
                                        static_cast<std::size_t>(verdict.accepted)));
  }
  const auto p = estimator.acceptance_by_rank(2);
  CHECK(p[0] == Approx(0.6).margin(0.03));
  CHECK(p[1] == Approx(0.4).margin(0.03));
  // The walk accepts as many tokens on average as the shape's expected_accepted says.
  CHECK(total / steps == Approx(shape.expected_accepted).margin(0.1));
}
