// SPDX-License-Identifier: MIT
// Chains whose length a controller sets each step: lossless for every controller, and each
// controller lengthens or shortens the drafted chain as its rule says on scripted models.
#include <catch2/catch.hpp>
#include <vector>

#include "decode/strategy_law.hpp"
#include "decode/toy_tables.hpp"
#include "specdec/decode/chain_length_strategy.hpp"
#include "specdec/decode/decoder.hpp"
#include "support/stats.hpp"

using namespace specdec;

namespace {

using ChainLengthDecoder = Decoder<toy::MarkovProvider, ChainLengthStrategy<toy::MarkovProvider>>;

toy::MarkovProvider table_provider(std::vector<std::vector<float>> rows) {
  return toy::MarkovProvider(toy::MarkovModel::from_rows(rows));
}

/// Draft rows that always propose token 0 with certainty.
std::vector<std::vector<float>> certain_zero() {
  return {{1, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}};
}

/// Target rows that never emit token 0: every draft of certain_zero() is rejected.
std::vector<std::vector<float>> never_zero() {
  return {{0, 0.5f, 0.5f, 0}, {0, 0.2f, 0.3f, 0.5f}, {0, 0.6f, 0.2f, 0.2f}, {0, 0.1f, 0.1f, 0.8f}};
}

/// The chain length of each of `steps` steps of `options` with the given target and draft rows.
std::vector<std::int32_t> drafted_lengths(const ChainLengthOptions& options,
                                          const std::vector<std::vector<float>>& target_rows,
                                          const std::vector<std::vector<float>>& draft_rows,
                                          int steps) {
  auto target = table_provider(target_rows);
  auto draft = table_provider(draft_rows);
  ChainLengthDecoder decoder(target, ChainLengthStrategy(draft, options),
                             {.max_new_tokens = 100000, .seed = 5});
  decoder.reset(std::vector<Token>{1, 2});
  std::vector<std::int32_t> lengths;
  for (int i = 0; i < steps; ++i) {
    decoder.step();
    lengths.push_back(decoder.strategy().drafted().size());
  }
  return lengths;
}

}  // namespace

TEST_CASE("Chains of every length controller are lossless", "[decode][length]") {
  // One chi-square test per controller: false-failure probability 4e-6 in all.
  for (const auto policy : kAllLengthPolicies) {
    INFO(length_policy_name(policy));
    auto target = test::markov_target();
    auto draft = test::markov_draft();
    ChainLengthOptions options{.policy = policy,
                               .cumulative = {.threshold = 0.8, .max_length = 4},
                               .heuristic = {.initial = 2, .max_length = 4},
                               .batch_average = {.initial = 2, .max_length = 4},
                               .goodput = {.draft_cost = 0.2, .max_length = 4}};
    ChainLengthDecoder decoder(target, ChainLengthStrategy(draft, options),
                               {.max_new_tokens = 3, .seed = 11});
    test::check_first_tokens_follow_target(decoder, test::monte_carlo_runs(15000));
  }
}

TEST_CASE("The heuristic schedule grows by 2 when all is accepted and shrinks by 1 otherwise",
          "[decode][length]") {
  const ChainLengthOptions options{
      .policy = LengthPolicy::kHeuristic,
      .heuristic = {.initial = 5, .max_length = 9, .confidence_threshold = 0.0}};
  // Draft equal to the target: every token accepted.
  CHECK(drafted_lengths(options, test::target_table(), test::target_table(), 4) ==
        std::vector<std::int32_t>{5, 7, 9, 9});
  CHECK(drafted_lengths(options, never_zero(), certain_zero(), 6) ==
        std::vector<std::int32_t>{5, 4, 3, 2, 1, 1});
}

TEST_CASE("The heuristic confidence stop ends a chain at an unsure draft token",
          "[decode][length]") {
  // A uniform draft gives each token 1/4, below the threshold 0.4: one token per step.
  const std::vector<std::vector<float>> uniform(4, std::vector<float>(4, 0.25f));
  const ChainLengthOptions options{.policy = LengthPolicy::kHeuristic,
                                   .heuristic = {.initial = 5, .confidence_threshold = 0.4}};
  CHECK(drafted_lengths(options, test::target_table(), uniform, 3) ==
        std::vector<std::int32_t>{1, 1, 1});
}

TEST_CASE("The cumulative stop drafts until a rejection is likely enough", "[decode][length]") {
  // Each uniform draft token has probability 1/4: 1 - (1/4)^n passes 0.95 at n = 3.
  const std::vector<std::vector<float>> uniform(4, std::vector<float>(4, 0.25f));
  ChainLengthOptions options{.policy = LengthPolicy::kCumulative,
                             .cumulative = {.threshold = 0.95, .min_length = 1, .max_length = 8}};
  CHECK(drafted_lengths(options, test::target_table(), uniform, 3) ==
        std::vector<std::int32_t>{3, 3, 3});
  options.cumulative.min_length = 5;
  CHECK(drafted_lengths(options, test::target_table(), uniform, 2) ==
        std::vector<std::int32_t>{5, 5});
  // A certain draft never makes a rejection likely: max_length every step.
  CHECK(drafted_lengths(options, never_zero(), certain_zero(), 2) ==
        std::vector<std::int32_t>{8, 8});
}

TEST_CASE("The batch average drafts the last accepted count plus the headroom",
          "[decode][length]") {
  const ChainLengthOptions options{
      .policy = LengthPolicy::kBatchAverage,
      .batch_average = {
          .initial = 4, .min_length = 1, .max_length = 6, .smoothing = 1.0, .headroom = 1}};
  CHECK(drafted_lengths(options, test::target_table(), test::target_table(), 4) ==
        std::vector<std::int32_t>{4, 5, 6, 6});
  CHECK(drafted_lengths(options, never_zero(), certain_zero(), 3) ==
        std::vector<std::int32_t>{4, 1, 1});
}

TEST_CASE("The goodput controller drafts long chains when they pay and short ones otherwise",
          "[decode][length]") {
  const ChainLengthOptions options{
      .policy = LengthPolicy::kGoodput,
      .goodput = {.draft_cost = 0.1, .verify_cost = 1.0, .min_length = 1, .max_length = 8}};
  const auto accepted = drafted_lengths(options, test::target_table(), test::target_table(), 12);
  CHECK(accepted.front() < 8);
  CHECK(accepted.back() == 8);
  const auto rejected = drafted_lengths(options, never_zero(), certain_zero(), 12);
  CHECK(rejected.back() == 1);
}

TEST_CASE("Bad length-controller options name the field", "[decode][length][errors]") {
  auto target = test::markov_target();
  const auto argument = [&](ChainLengthOptions options) {
    auto draft = test::markov_draft();
    return test::error_argument(
        [&] { ChainLengthDecoder(target, ChainLengthStrategy(draft, options), {}); });
  };
  CHECK(argument({.policy = LengthPolicy::kCumulative, .cumulative = {.threshold = 2.0}}) ==
        "cumulative.threshold");
  CHECK(argument({.policy = LengthPolicy::kHeuristic, .heuristic = {.initial = 0}}) ==
        "heuristic.initial");
  CHECK(argument({.policy = LengthPolicy::kBatchAverage, .batch_average = {.smoothing = 0.0}}) ==
        "batch_average.smoothing");
  CHECK(argument({.policy = LengthPolicy::kGoodput, .goodput = {.max_length = 5000}}) ==
        "goodput.max_length");
  CHECK(argument({.draft_warp = {.top_p = 0.0f}}) == "draft_warp.top_p");
  CHECK(argument({.policy = static_cast<LengthPolicy>(7)}) == "policy");
  CHECK(test::error_argument([] { parse_length_policy("adaptive"); }) == "length");
}
