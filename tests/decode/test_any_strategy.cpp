// SPDX-License-Identifier: MIT
// AnyStrategy (a built-in strategy chosen at run time) draws the tokens of the strategy it
// holds; decode_batch over strategies equals decode per sequence; the options the tool and the
// Python package build chains and trees from (ChainLengthOptions::up_to, full_tree_shape).
#include <catch2/catch.hpp>
#include <vector>

#include "decode/toy_tables.hpp"
#include "specdec/decode/any_strategy.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/tree/sequoia.hpp"

using namespace specdec;
using test::markov_draft;
using test::markov_target;

namespace {

const LoopOptions kLoop{.max_new_tokens = 24, .seed = 9};

/// decode with `strategy` and with AnyStrategy over its options give the same run.
template <class Strategy>
void check_same_as_any(const StrategyOptions& options, Strategy strategy,
                       const LoopOptions& loop = kLoop) {
  auto target = markov_target();
  const std::vector<Token> prompt = {1, 2};
  const auto direct = decode(target, std::move(strategy), loop, prompt, 3);
  auto target2 = markov_target();
  auto draft2 = markov_draft();
  const auto erased =
      decode(target2, AnyStrategy<toy::MarkovProvider>(draft2, options), loop, prompt, 3);
  CHECK(erased.tokens == direct.tokens);
  CHECK(erased.metrics.target_calls == direct.metrics.target_calls);
  CHECK(erased.metrics.draft_calls == direct.metrics.draft_calls);
}

}  // namespace

TEST_CASE("AnyStrategy decodes as the strategy its options name", "[decode][any]") {
  auto draft = markov_draft();
  DecodeOptions method;
  method.method = Method::kSpecTr;
  method.depth = 3;
  method.max_new_tokens = 24;
  method.seed = 9;
  check_same_as_any(method, MethodStrategy(draft, method), method.loop());
  const TopKTreeOptions tree{.shape = TreeShapePolicy::kSpecExec, .width = 2, .depth = 3,
                             .budget = 5};
  check_same_as_any(tree, TopKTreeStrategy(draft, tree));
  const NGramOptions ngram{.max_ngram = 2, .max_draft = 3};
  check_same_as_any(ngram, NGramStrategy(ngram));
  const auto chain = ChainLengthOptions::up_to(LengthPolicy::kGoodput, 5, 0.1);
  check_same_as_any(chain, ChainLengthStrategy(draft, chain));
}

TEST_CASE("AnyStrategy reads target rows only where its strategy does", "[decode][any]") {
  auto draft = markov_draft();
  CHECK_FALSE(AnyStrategy<toy::MarkovProvider>(draft, DecodeOptions{}).needs_target_rows());
  CHECK(AnyStrategy<toy::MarkovProvider>(draft, NGramOptions{}).needs_target_rows());
  CHECK(uses_draft(StrategyOptions(TopKTreeOptions{})));
  CHECK_FALSE(uses_draft(StrategyOptions(NGramOptions{})));
  DecodeOptions autoregressive;
  autoregressive.method = Method::kAutoregressive;
  CHECK_FALSE(uses_draft(StrategyOptions(autoregressive)));
}

TEST_CASE("decode_batch over strategies equals decode per sequence", "[decode][any]") {
  std::vector<std::vector<Token>> prompts;
  for (Token i = 0; i < 6; ++i) prompts.push_back({i % 4, (i * 3) % 4});
  const TopKTreeOptions tree{.shape = TreeShapePolicy::kEagle2, .width = 2, .depth = 3,
                             .budget = 4};
  std::vector<toy::MarkovProvider> targets, drafts;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    targets.push_back(markov_target());
    drafts.push_back(markov_draft());
  }
  const auto batch = decode_batch(
      [&](std::size_t i) -> toy::MarkovProvider& { return targets[i]; },
      [&](std::size_t i) { return TopKTreeStrategy(drafts[i], tree); }, prompts, kLoop,
      backend::cpu.with_threads(2));
  REQUIRE(batch.size() == prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    auto target = markov_target();
    auto draft = markov_draft();
    const auto alone = decode(target, TopKTreeStrategy(draft, tree), kLoop, prompts[i],
                              static_cast<std::uint32_t>(i));
    CHECK(batch[i].tokens == alone.tokens);
  }
}

TEST_CASE("ChainLengthOptions::up_to keeps each controller's defaults below max_length",
          "[decode][length]") {
  const auto short_chain = ChainLengthOptions::up_to(LengthPolicy::kHeuristic, 3);
  CHECK(short_chain.heuristic.initial == 3);
  CHECK(short_chain.batch_average.initial == 3);
  CHECK(short_chain.max_length() == 3);
  CHECK(short_chain.goodput.draft_cost == 0.0);
  CHECK(short_chain.goodput.verify_cost == GoodputCosts{}.verify_cost);
  const auto long_chain = ChainLengthOptions::up_to(LengthPolicy::kCumulative, 12, 0.25);
  CHECK(long_chain.heuristic.initial == HeuristicLengthOptions{}.initial);
  CHECK(long_chain.batch_average.initial == BatchAverageOptions{}.initial);
  CHECK(long_chain.cumulative.threshold == CumulativeStopOptions{}.threshold);
  CHECK(long_chain.heuristic.confidence_threshold ==
        HeuristicLengthOptions{}.confidence_threshold);
  CHECK(long_chain.goodput.draft_cost == 0.25);
  auto set = long_chain;
  set.with_threshold(0.9);
  CHECK(set.cumulative.threshold == 0.9);
  CHECK(set.heuristic.confidence_threshold == 0.9);
}

TEST_CASE("full_tree_shape lays out the k-ary tree in level order", "[decode][topk][shape]") {
  const auto shape = full_tree_shape(2, 3);
  CHECK(shape.parents == std::vector<std::int32_t>{-1, -1, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5});
  CHECK(shape.ranks == std::vector<std::int32_t>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  CHECK(full_tree_shape(3, 0).empty());
  CHECK(full_tree_shape(1, 4).parents == std::vector<std::int32_t>{-1, 0, 1, 2});
  CHECK_THROWS_WITH(full_tree_shape(0, 2), Catch::Contains("width"));
  CHECK_THROWS_WITH(full_tree_shape(2, -1), Catch::Contains("depth"));
  CHECK_THROWS_WITH(full_tree_shape(64, 64), Catch::Contains("depth"));
}
