// SPDX-License-Identifier: MIT
// The top-k children tree drafter (EAGLE's stand-in) and its shape policies: lossless under the
// target-only tree rule whatever the shape, the trees each policy builds, and bad options.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "decode/strategy_law.hpp"
#include "decode/toy_tables.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"
#include "support/stats.hpp"

using namespace specdec;

namespace {

using TopKDecoder = Decoder<toy::MarkovProvider, TopKTreeStrategy<toy::MarkovProvider>>;

constexpr std::uint32_t kTopKLawRuns = test::monte_carlo_runs(30000);

/// Checks the law of a top-k tree of `options` at T = 1 (one chi-square test).
void check_topk_lossless(const TopKTreeOptions& options, Warp warp = {}) {
  auto target = test::markov_target();
  auto draft = test::markov_draft();
  TopKDecoder decoder(target, TopKTreeStrategy(draft, options),
                      {.warp = warp, .max_new_tokens = 3, .seed = 4321});
  test::check_first_tokens_follow_target(decoder, kTopKLawRuns);
}

/// A V = 4 table whose every row is a point mass on the next token of the cycle 0, 1, 2, 3.
toy::MarkovProvider cycle_provider() {
  return toy::MarkovProvider(
      toy::MarkovModel::from_rows({{0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}}));
}

/// A top-k tree decoder of `options` (up to 1000 new tokens) whose target and draft both follow
/// the cycle, reset to the prompt {0}.
struct CycleDecoder {
  explicit CycleDecoder(const TopKTreeOptions& options)
      : decoder(target, TopKTreeStrategy(draft, options), {.max_new_tokens = 1000}) {
    decoder.reset(std::vector<Token>{0});
  }
  CycleDecoder(const CycleDecoder&) = delete;
  CycleDecoder& operator=(const CycleDecoder&) = delete;

  toy::MarkovProvider target = cycle_provider(), draft = cycle_provider();
  TopKDecoder decoder;
};

}  // namespace

TEST_CASE("A fixed top-k tree is lossless", "[decode][topk]") {
  // Two chi-square tests (T = 1; top-p 0.8): false-failure probability 2e-6 in all.
  check_topk_lossless({.shape = TreeShapePolicy::kFixed, .width = 2, .depth = 2});
  check_topk_lossless({.shape = TreeShapePolicy::kFixed, .width = 3, .depth = 2},
                      Warp{.top_p = 0.8f});
}

TEST_CASE("A Sequoia-shaped top-k tree is lossless", "[decode][topk][shape]") {
  check_topk_lossless({.shape = TreeShapePolicy::kSequoia, .width = 3, .depth = 3, .budget = 5});
}

TEST_CASE("An EAGLE-2 top-k tree is lossless", "[decode][topk][shape]") {
  check_topk_lossless({.shape = TreeShapePolicy::kEagle2, .width = 2, .depth = 3, .budget = 4});
}

TEST_CASE("A SpecExec top-k tree is lossless", "[decode][topk][shape]") {
  check_topk_lossless({.shape = TreeShapePolicy::kSpecExec, .width = 2, .depth = 3, .budget = 4});
}

TEST_CASE("An OPT-Tree top-k tree is lossless", "[decode][topk][shape]") {
  check_topk_lossless(
      {.shape = TreeShapePolicy::kOptTree, .width = 3, .depth = 3, .budget = 8, .min_gain = 0.1});
}

TEST_CASE("A hardware-aware Sequoia top-k tree is lossless", "[decode][topk][shape]") {
  check_topk_lossless({.shape = TreeShapePolicy::kSequoiaPlanned,
                       .width = 3,
                       .depth = 3,
                       .verify_cost = {1.0, 1.0, 1.0, 1.1, 1.2, 1.4},
                       .draft_cost_per_level = 0.1});
}

TEST_CASE("A fixed top-k tree holds each node's top-k draft tokens", "[decode][topk]") {
  auto draft = test::markov_draft();
  TopKTreeStrategy strategy(draft, {.shape = TreeShapePolicy::kFixed, .width = 2, .depth = 2});
  Workspace workspace;
  strategy.prepare(4, workspace);
  const std::vector<Token> prompt{0, 2};
  strategy.reset(prompt);
  const SequenceState state(prompt, 4, 0, 0);
  const auto& tree = strategy.draft({state, 4, workspace});
  // After 2 the draft is (.1, .4, .3, .2): 1 then 2; after 1 it ties (.3, .3, .1, .3): 0 then 1.
  CHECK(tree.tokens == std::vector<Token>{1, 2, 0, 1, 1, 2});
  CHECK(tree.parents == std::vector<std::int32_t>{-1, -1, 0, 0, 1, 1});
}

TEST_CASE("Sequoia's tree follows the acceptance measured while decoding",
          "[decode][topk][shape]") {
  // Draft and target both follow the cycle: a node's first child is always accepted, its second
  // never, so once measured the best tree of 6 nodes is a chain of 6 first children.
  CycleDecoder cycle({.shape = TreeShapePolicy::kSequoia, .width = 2, .depth = 6, .budget = 6});
  auto& decoder = cycle.decoder;
  decoder.step();
  const auto& first = decoder.strategy().drafted();
  CHECK(first.max_depth() < first.size());  // the prior (1/2 per rank) branches
  for (int i = 0; i < 30; ++i) decoder.step();
  CHECK(decoder.strategy().drafted().parents == std::vector<std::int32_t>{-1, 0, 1, 2, 3, 4});
  CHECK(decoder.step().size() == 7);  // the whole chain and the bonus token
  const auto by_rank = decoder.strategy().acceptance().by_rank();
  REQUIRE(by_rank.size() >= 2);
  CHECK(by_rank[0].accepted == by_rank[0].offered);
  CHECK(by_rank[1].accepted == 0);
}

TEST_CASE("The hardware-aware Sequoia tree follows the costs and the acceptance measured",
          "[decode][topk][shape]") {
  // On the cycle a first child is always accepted and a second never: with a flat target cost
  // and cheap drafting the plan becomes the deepest chain; when each node costs more than it
  // can bring, the plan is no tree and the target decodes alone.
  CycleDecoder cheap_cycle({.shape = TreeShapePolicy::kSequoiaPlanned,
                            .width = 2,
                            .depth = 5,
                            .budget = 5,
                            .draft_cost_per_level = 0.05});
  auto& cheap = cheap_cycle.decoder;
  for (int i = 0; i < 30; ++i) cheap.step();
  const auto& plan = cheap.strategy().plan();
  CHECK(plan.budget == 5);
  CHECK(plan.depth == 5);
  CHECK(cheap.strategy().drafted().parents == std::vector<std::int32_t>{-1, 0, 1, 2, 3});
  CHECK(cheap.step().size() == 6);

  CycleDecoder dear_cycle({.shape = TreeShapePolicy::kSequoiaPlanned,
                           .width = 2,
                           .depth = 4,
                           .verify_cost = {1.0, 3.0, 5.0, 7.0},
                           .draft_cost_per_level = 0.0});
  auto& dear = dear_cycle.decoder;
  for (int i = 0; i < 5; ++i) CHECK(dear.step().size() == 1);
  CHECK(dear.strategy().plan().budget == 0);
  CHECK(dear.strategy().drafted().empty());
}

TEST_CASE("EAGLE-2, SpecExec and OPT-Tree keep to the budget and the stop threshold",
          "[decode][topk][shape]") {
  auto target = test::markov_target();
  for (const auto shape : {TreeShapePolicy::kEagle2, TreeShapePolicy::kSpecExec}) {
    auto draft = test::markov_draft();
    TopKDecoder decoder(
        target, TopKTreeStrategy(draft, {.shape = shape, .width = 3, .depth = 3, .budget = 5}),
        {.max_new_tokens = 200});
    decoder.reset(test::kLawPrompt);
    INFO(tree_shape_policy_name(shape));
    while (!decoder.finished()) {
      decoder.step();
      CHECK(decoder.strategy().drafted().size() == 5);
      CHECK(decoder.strategy().drafted().max_depth() <= 3);
    }
  }
  // After 2 no draft token has probability 0.5 or more: OPT-Tree drafts nothing and the target
  // alone emits each token.
  auto draft = test::markov_draft();
  TopKDecoder decoder(target,
                      TopKTreeStrategy(draft, {.shape = TreeShapePolicy::kOptTree,
                                               .width = 3,
                                               .depth = 3,
                                               .budget = 5,
                                               .min_gain = 0.5}),
                      {.max_new_tokens = 10});
  decoder.reset(test::kLawPrompt);
  CHECK(decoder.step().size() == 1);
  CHECK(decoder.strategy().drafted().empty());
}

TEST_CASE("Bad top-k tree options name the field", "[decode][topk][errors]") {
  auto target = test::markov_target();
  const auto argument = [&](TopKTreeOptions options) {
    auto draft = test::markov_draft();
    return test::error_argument([&] { TopKDecoder(target, TopKTreeStrategy(draft, options), {}); });
  };
  CHECK(argument({.width = 0}) == "width");
  CHECK(argument({.width = 5}) == "width");  // more children than tokens
  CHECK(argument({.depth = 0}) == "depth");
  CHECK(argument({.width = 4, .depth = 9}) == "depth");  // 4^9 nodes
  CHECK(argument({.shape = TreeShapePolicy::kSequoia, .budget = -1}) == "budget");
  CHECK(argument({.shape = TreeShapePolicy::kOptTree, .min_gain = 0.0}) == "min_gain");
  CHECK(argument({.shape = TreeShapePolicy::kSequoia, .prior = {.rate = 2.0}}) == "prior.rate");
  CHECK(argument({.shape = static_cast<TreeShapePolicy>(9)}) == "shape");
  const auto planned = TreeShapePolicy::kSequoiaPlanned;
  CHECK(argument({.shape = planned, .verify_cost = {1.0, -1.0}}) == "verify_cost[1]");
  CHECK(argument({.shape = planned, .verify_cost = std::vector<double>(1026, 1.0)}) ==
        "verify_cost");
  CHECK(argument({.shape = planned, .draft_cost_per_level = std::nan("")}) ==
        "draft_cost_per_level");
  CHECK(argument({.shape = planned, .budget = 1025}) == "budget");
  CHECK(test::error_argument([] { parse_tree_shape_policy("k-ary"); }) == "shape");
  toy::MarkovProvider wide(toy::MarkovModel::from_rows({{0.5f, 0.5f}, {0.5f, 0.5f}}));
  CHECK(test::error_argument([&] { TopKDecoder(target, TopKTreeStrategy(wide, {}), {}); }) ==
        "draft");
}
