// SPDX-License-Identifier: MIT
// examples/kjv_constrained's decoding under a grammar on the trained pair: every output parses
// (chains and trees, the draft masked and unmasked, several seeds); at temperature 1 the first
// two tokens follow constrained sampling from the target (its softmax with the bytes the grammar
// forbids removed, renormalised; chi-square against the law from full forward passes, fixed
// seeds, false-failure probability kFalseFailureProbability = 1e-6 per test); at temperature 0
// the output equals constrained greedy decoding of the target.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "examples/kjv_pair.hpp"
#include "kjv_constrained.hpp"
#include "kjv_provider.hpp"
#include "specdec/decode/decoder.hpp"
#include "support/stats.hpp"

namespace {

using kjv::VerseGrammar;
using specdec::Token;
using Strategy = kjv::ConstrainedStrategy<kjv::ModelProvider>;

// The program's prompt: it ends a line, so the next bytes are a book's name, whose first letters
// the grammar narrows to 11.
std::vector<Token> grammar_prompt() {
  constexpr std::string_view text = "Genesis 1:3 And God said, Let there be light\n";
  return {text.begin(), text.end()};
}

// A shorter one for the law tests, which feed it to the models once per sample.
std::vector<Token> law_prompt() {
  constexpr std::string_view text = "Acts 2:1 And when the day\n";
  return {text.begin(), text.end()};
}

kjv::ConstrainedOptions constrained_options(std::string_view method, float temperature) {
  kjv::ConstrainedOptions o{
      .drafting = kjv::Drafting::kChain, .warp = {.temperature = temperature}, .length = 4};
  if (method == "sequoia") {
    o.drafting = kjv::Drafting::kTree;
    o.tree = {.shape = specdec::TreeShapePolicy::kSequoia, .width = 4, .depth = 5, .budget = 16};
  }
  if (method == "eagle") {
    o.drafting = kjv::Drafting::kTree;
    o.tree = {.shape = specdec::TreeShapePolicy::kEagle2, .width = 3, .depth = 4, .budget = 12};
  }
  return o;
}

// Runs `body(decoder)` on a fresh pair of providers decoding under the grammar.
template <class Body>
void with_decoder(std::string_view method, bool masked, float temperature,
                  std::int32_t max_new_tokens, Body&& body) {
  const auto& pair = specdec::test::kjv_pair();
  kjv::ModelProvider target(pair.target), draft(pair.draft);
  kjv::GrammarDraft<kjv::ModelProvider> grammar(draft, masked);
  const auto o = constrained_options(method, temperature);
  specdec::Decoder<kjv::ModelProvider, Strategy> decoder(
      target, Strategy(grammar, o), {.warp = o.warp, .max_new_tokens = max_new_tokens, .seed = 77});
  body(decoder);
}

// The target's next-byte law after `tokens` restricted to the bytes the grammar allows there.
std::vector<double> constrained_law(const std::vector<Token>& tokens) {
  const auto& model = specdec::test::kjv_pair().target;
  const auto logits = model.prefix_logits(tokens);
  const auto row = logits.row(logits.rows() - 1);
  const auto state = VerseGrammar::run(VerseGrammar::start(), tokens);
  std::vector<double> law(static_cast<std::size_t>(row.size()));
  double top = -std::numeric_limits<double>::infinity();
  for (Eigen::Index v = 0; v < row.size(); ++v) {
    if (!VerseGrammar::next(state, static_cast<Token>(v)).dead())
      top = std::max<double>(top, row(v));
  }
  double sum = 0.0;
  for (Eigen::Index v = 0; v < row.size(); ++v) {
    const bool allowed = !VerseGrammar::next(state, static_cast<Token>(v)).dead();
    sum += law[static_cast<std::size_t>(v)] = allowed ? std::exp(row(v) - top) : 0.0;
  }
  for (auto& p : law) p /= sum;
  return law;
}

constexpr std::int32_t kTokens = 64;

}  // namespace

TEST_CASE("decoding under the verse grammar on the trained pair always parses",
          "[examples][kjv][constrained]") {
  const auto start = grammar_prompt();
  for (const std::string_view method : {"sd", "sequoia", "eagle"}) {
    for (const bool masked : {true, false}) {
      with_decoder(method, masked, 1.0f, kTokens, [&](auto& decoder) {
        for (std::uint32_t seed = 0; seed < 6; ++seed) {
          decoder.reset(start, seed);
          const auto result = decoder.run();
          auto text = start;
          text.insert(text.end(), result.tokens.begin(), result.tokens.end());
          INFO(method << (masked ? " masked" : " unmasked") << " sequence " << seed << ": "
                      << std::string(text.begin(), text.end()));
          CHECK(result.tokens.size() == static_cast<std::size_t>(kTokens));
          CHECK(VerseGrammar::parses(text));
        }
        // An unmasked draft proposes forbidden bytes: the rows after them carry the dead state's
        // mask, which allows nothing, so reading one would throw. A masked chain never does.
        if (!masked) CHECK(decoder.strategy().dead_rows() > 0);
        if (masked && method == "sd") CHECK(decoder.strategy().dead_rows() == 0);
      });
    }
  }
  // The check has teeth: the same pair decoding without the grammar leaves it at once.
  kjv::ModelProvider target(specdec::test::kjv_pair().target),
      draft(specdec::test::kjv_pair().draft);
  specdec::DecodeOptions plain;
  plain.method = specdec::Method::kSd;
  plain.max_new_tokens = kTokens;
  plain.seed = 77;
  const auto result = specdec::decode(target, draft, start, plain);
  auto text = start;
  text.insert(text.end(), result.tokens.begin(), result.tokens.end());
  CHECK_FALSE(VerseGrammar::parses(text));
}

TEST_CASE("the verse grammar's masks: a state's bits are the bytes it accepts",
          "[examples][kjv][constrained]") {
  std::int32_t words[4];
  VerseGrammar::mask(VerseGrammar::start(), 128, words);
  std::string initials;
  for (int t = 0; t < 128; ++t) {
    if (specdec::detail::mask_allows(words, t)) initials += static_cast<char>(t);
  }
  CHECK(initials == "ADEGIJLMNPR");
  const std::string_view line = "John 31:4 x\n";
  CHECK(VerseGrammar::parses(std::vector<Token>(line.begin(), line.end())));
  for (const std::string_view bad : {"Jon", "John 0", "John 3:4 \n", "John 3:4:", "John 3:1 \t"}) {
    CHECK_FALSE(VerseGrammar::parses(std::vector<Token>(bad.begin(), bad.end())));
  }
  // After "John 3:" a verse number: a digit other than 0, nothing else.
  const std::string_view colon = "John 3:";
  VerseGrammar::mask(
      VerseGrammar::run(VerseGrammar::start(), std::vector<Token>(colon.begin(), colon.end())), 128,
      words);
  for (int t = 0; t < 128; ++t)
    CHECK(specdec::detail::mask_allows(words, t) == (t >= '1' && t <= '9'));
  VerseGrammar::mask(VerseGrammar::State{.phase = VerseGrammar::Phase::kDead}, 128, words);
  CHECK((words[0] | words[1] | words[2] | words[3]) == 0);
}

namespace {

constexpr std::uint32_t kLawRuns = specdec::test::monte_carlo_runs(6000);

// Decodes `kLawRuns` sequences of two tokens (fresh streams per sequence id) and checks the first
// against the constrained law after the prompt and the second against its marginal, the sum over
// x of p(x) p(. | prompt, x), both laws constrained.
void check_constrained_first_two(std::string_view method, bool masked) {
  const auto start = law_prompt();
  const auto vocab = static_cast<std::size_t>(specdec::test::kjv_pair().target.config().vocab);
  std::vector<std::int64_t> first(vocab), second(vocab);
  with_decoder(method, masked, 1.0f, 2, [&](auto& decoder) {
    for (std::uint32_t i = 0; i < kLawRuns; ++i) {
      decoder.reset(start, i);
      while (!decoder.finished()) decoder.step();
      ++first[static_cast<std::size_t>(decoder.generated()[0])];
      ++second[static_cast<std::size_t>(decoder.generated()[1])];
    }
  });
  const auto law = constrained_law(start);
  std::vector<double> marginal(vocab);
  for (std::size_t x = 0; x < vocab; ++x) {
    if (law[x] <= 0.0) continue;
    auto context = start;
    context.push_back(static_cast<Token>(x));
    const auto next = constrained_law(context);
    for (std::size_t y = 0; y < vocab; ++y) marginal[y] += law[x] * next[y];
  }
  const auto one = specdec::test::chi_square_test(first, law);
  const auto two = specdec::test::chi_square_test(second, marginal);
  INFO(method << (masked ? " masked" : " unmasked") << ": first token chi2 " << one.statistic
              << " df " << one.df << "; second: chi2 " << two.statistic << " df " << two.df);
  CHECK(one.df >= 5);
  CHECK(one.p_value > specdec::test::kFalseFailureProbability);
  CHECK(two.p_value > specdec::test::kFalseFailureProbability);
}

}  // namespace

TEST_CASE("SD under the verse grammar, draft masked, emits constrained sampling's first tokens",
          "[examples][kjv][constrained][mc]") {
  check_constrained_first_two("sd", true);
}

TEST_CASE("SD under the verse grammar, draft unmasked, emits constrained sampling's first tokens",
          "[examples][kjv][constrained][mc]") {
  check_constrained_first_two("sd", false);
}

TEST_CASE(
    "EAGLE-2 under the verse grammar, draft masked, emits constrained sampling's first tokens",
    "[examples][kjv][constrained][mc]") {
  check_constrained_first_two("eagle", true);
}

TEST_CASE(
    "EAGLE-2 under the verse grammar, draft unmasked, emits constrained sampling's first "
    "tokens",
    "[examples][kjv][constrained][mc]") {
  check_constrained_first_two("eagle", false);
}

TEST_CASE("at temperature 0 decoding under the verse grammar is the target's constrained greedy",
          "[examples][kjv][constrained]") {
  // Constrained greedy from full forward passes: the best allowed byte, ties to the smaller id.
  auto greedy = grammar_prompt();
  for (std::int32_t i = 0; i < kTokens; ++i) {
    const auto law = constrained_law(greedy);
    greedy.push_back(static_cast<Token>(std::max_element(law.begin(), law.end()) - law.begin()));
  }
  const std::vector<Token> expected(
      greedy.begin() + static_cast<std::ptrdiff_t>(grammar_prompt().size()), greedy.end());
  REQUIRE(VerseGrammar::parses(greedy));
  for (const std::string_view method : {"sd", "sequoia", "eagle"}) {
    for (const bool masked : {true, false}) {
      with_decoder(method, masked, 0.0f, kTokens, [&](auto& decoder) {
        decoder.reset(grammar_prompt(), 0);
        const auto result = decoder.run();
        INFO(method << (masked ? " masked" : " unmasked") << ": "
                    << std::string(result.tokens.begin(), result.tokens.end()) << " vs "
                    << std::string(expected.begin(), expected.end()));
        CHECK(result.tokens == expected);
      });
    }
  }
}
