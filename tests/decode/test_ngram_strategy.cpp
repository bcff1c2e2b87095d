// SPDX-License-Identifier: MIT
// Prompt-lookup (n-gram) drafting: the continuation it finds on scripted contexts, its fallback
// to shorter n-grams and to no draft, losslessness under the target-only chain rule, bad options.
#include <catch2/catch.hpp>
#include <vector>

#include "decode/strategy_law.hpp"
#include "decode/toy_tables.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/ngram_strategy.hpp"
#include "support/stats.hpp"

using namespace specdec;

namespace {

using NGramDecoder = Decoder<toy::MarkovProvider, NGramStrategy>;

/// The tokens find_ngram_continuation proposes after `tokens`.
std::vector<Token> ngram_draft_of(const std::vector<Token>& tokens, NGramOptions options) {
  const auto match = find_ngram_continuation(tokens, options);
  return {tokens.begin() + static_cast<std::ptrdiff_t>(match.begin),
          tokens.begin() + static_cast<std::ptrdiff_t>(match.begin + match.length)};
}

}  // namespace

TEST_CASE("Prompt lookup proposes what followed the last n tokens before", "[decode][ngram]") {
  const NGramOptions options{.max_ngram = 3, .min_ngram = 1, .max_draft = 3};
  // [9 1 2] never occurred before; [1 2] did, followed by 3 9 1 2: the first three are drafted.
  CHECK(ngram_draft_of({5, 1, 2, 3, 9, 1, 2}, options) == std::vector<Token>{3, 9, 1});
  // The latest earlier occurrence followed by max_draft tokens wins...
  CHECK(ngram_draft_of({1, 5, 6, 7, 1, 8, 9, 4, 3, 1}, options) == std::vector<Token>{8, 9, 4});
  // ... and when none is, the earliest (followed by the most tokens).
  CHECK(ngram_draft_of({1, 5, 1, 6, 1}, options) == std::vector<Token>{5, 1, 6});
  // A longer match wins over a later shorter one: [2 1] occurs at 1, [1] also at 5.
  CHECK(ngram_draft_of({0, 2, 1, 7, 3, 1, 4, 2, 1}, options) == std::vector<Token>{7, 3, 1});
}

TEST_CASE("Prompt lookup falls back to shorter n-grams, then to no draft", "[decode][ngram]") {
  const NGramOptions options{.max_ngram = 2, .min_ngram = 1, .max_draft = 4};
  // [3 1] never occurred before; [1] did, at 2.
  CHECK(ngram_draft_of({4, 2, 1, 3, 1}, options) == std::vector<Token>{3, 1});
  CHECK(ngram_draft_of({1, 2, 3}, options).empty());
  CHECK(ngram_draft_of({4, 2, 1, 3, 1}, {.max_ngram = 2, .min_ngram = 2}).empty());
}

TEST_CASE("The n-gram drafter copies a cycle and emits the target's token without a match",
          "[decode][ngram]") {
  // The target follows 0 -> 1 -> 2 -> 3 -> 0 surely: the copied continuation is all accepted.
  auto target = toy::MarkovProvider(
      toy::MarkovModel::from_rows({{0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}, {1, 0, 0, 0}}));
  NGramDecoder decoder(target, NGramStrategy({.max_ngram = 3, .max_draft = 4}),
                       {.max_new_tokens = 100});
  decoder.reset(std::vector<Token>{0, 1, 2, 3, 0});
  const auto first = decoder.step();
  CHECK(std::vector<Token>(first.begin(), first.end()) == std::vector<Token>{1, 2, 3, 0, 1});
  CHECK(decoder.metrics().target_calls == 1);
  // A prompt of one token has nothing to look up: no draft, one token from the target.
  decoder.reset(std::vector<Token>{3});
  const auto alone = decoder.step();
  CHECK(std::vector<Token>(alone.begin(), alone.end()) == std::vector<Token>{0});
  CHECK(decoder.strategy().options().max_draft == 4);
}

TEST_CASE("The n-gram drafter is lossless", "[decode][ngram]") {
  // One chi-square test (false-failure probability 1e-6); the prompt repeats, so most steps
  // draft.
  auto target = test::markov_target();
  NGramDecoder decoder(target, NGramStrategy({.max_ngram = 2, .max_draft = 3}),
                       {.max_new_tokens = 3, .seed = 77});
  test::check_first_tokens_follow_target(decoder, test::monte_carlo_runs(40000),
                                         {2, 1, 3, 0, 2, 1, 2});
}

TEST_CASE("Bad n-gram options name the field", "[decode][ngram][errors]") {
  auto target = test::markov_target();
  const auto argument = [&](NGramOptions options) {
    return test::error_argument([&] { NGramDecoder(target, NGramStrategy(options), {}); });
  };
  CHECK(argument({.min_ngram = 0}) == "min_ngram");
  CHECK(argument({.max_ngram = 0}) == "max_ngram");
  CHECK(argument({.max_ngram = 2, .min_ngram = 3}) == "max_ngram");
  CHECK(argument({.max_draft = 0}) == "max_draft");
}
