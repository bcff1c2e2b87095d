// SPDX-License-Identifier: MIT
// ReDrafter end to end: exact mode's sequence law, greedy mode against greedy decoding, the
// parity mode's bias, determinism and bad input.
#include <array>
#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "specdec/decode/redrafter_strategy.hpp"
#include "specdec/toy/toy.hpp"
#include "support/stats.hpp"

using namespace specdec;

namespace {

// V = 4 target and a diverging draft table.
toy::MarkovModel target_model() {
  return toy::MarkovModel::from_rows({{0.10f, 0.20f, 0.30f, 0.40f},
                                      {0.50f, 0.25f, 0.15f, 0.10f},
                                      {0.25f, 0.25f, 0.25f, 0.25f},
                                      {0.05f, 0.60f, 0.05f, 0.30f}});
}
toy::MarkovModel draft_model() {
  return toy::MarkovModel::from_rows({{0.30f, 0.30f, 0.20f, 0.20f},
                                      {0.40f, 0.10f, 0.40f, 0.10f},
                                      {0.10f, 0.50f, 0.30f, 0.10f},
                                      {0.20f, 0.40f, 0.20f, 0.20f}});
}

toy::MarkovProvider hidden_provider(const toy::MarkovModel& model) {
  return toy::MarkovProvider(model, {.hidden_size = 0, .hidden_probabilities = true});
}

// Exact law of the next `length` tokens after `last` under the warped Markov target.
std::vector<double> sequence_law(const toy::MarkovModel& model, Token last, int length,
                                 const Warp& warp) {
  const auto v = static_cast<int>(model.vocab_size());
  std::vector<std::vector<float>> warped(static_cast<std::size_t>(v),
                                         std::vector<float>(static_cast<std::size_t>(v)));
  Workspace ws;
  for (int t = 0; t < v; ++t) {
    warp_probabilities<float>(warp, model.row(t), warped[static_cast<std::size_t>(t)], ws);
  }
  std::vector<double> law;
  test::for_each_tuple(v, length, [&](std::span<const int> tuple) {
    double p = 1.0;
    int previous = last;
    for (int x : tuple) {
      p *= warped[static_cast<std::size_t>(previous)][static_cast<std::size_t>(x)];
      previous = x;
    }
    law.push_back(p);
  });
  return law;
}

// Histogram of the first `length` tokens over `runs` sequences (sequence id = run index).
std::vector<std::int64_t> histogram(const toy::MarkovModel& target, const ReDrafterHead& head,
                                    ReDrafterOptions options, int length, int runs,
                                    DecodeMetrics* metrics = nullptr) {
  auto provider = hidden_provider(target);
  const auto v = target.vocab_size();
  std::int64_t cells = 1;
  for (int i = 0; i < length; ++i) cells *= v;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(cells), 0);
  options.max_new_tokens = length;
  const std::array<Token, 2> prompt = {1, 2};
  for (int run = 0; run < runs; ++run) {
    const auto result =
        decode_redrafter(provider, head, prompt, options, static_cast<std::uint32_t>(run));
    REQUIRE(result.tokens.size() == static_cast<std::size_t>(length));
    std::int64_t cell = 0;
    for (auto t : result.tokens) cell = cell * v + t;
    ++counts[static_cast<std::size_t>(cell)];
    if (metrics) metrics->merge(result.metrics);
  }
  return counts;
}

}  // namespace

TEST_CASE("markov_head reproduces its draft table", "[redrafter][decode]") {
  const auto draft = draft_model();
  const auto head = toy::markov_head(draft, 4);
  std::vector<float> hidden(4, 0.3f), state(4, 0.0f), log_probs(4);
  for (Token t = 0; t < 4; ++t) {
    std::fill(state.begin(), state.end(), 0.0f);
    redrafter_step(head, hidden, state, t, log_probs);
    for (int y = 0; y < 4; ++y) {
      CHECK(std::exp(log_probs[static_cast<std::size_t>(y)]) ==
            Catch::Detail::Approx(draft.row(t)[static_cast<std::size_t>(y)]).epsilon(1e-4));
    }
  }
}

TEST_CASE("redrafter exact mode follows the target sequence law at T = 1", "[redrafter][decode]") {
  const auto target = target_model();
  const auto head = toy::markov_head(draft_model(), 4);
  ReDrafterOptions options{
      .verification = ReDrafterVerification::kExact, .width = 3, .depth = 2, .seed = 11};
  DecodeMetrics metrics;
  const auto counts = histogram(target, head, options, 3, 100000, &metrics);
  const auto law = sequence_law(target, 2, 3, options.warp);
  // False-failure probability of this check: 1e-6 (kFalseFailureProbability).
  CHECK(test::chi_square_test(counts, law).p_value > test::kFalseFailureProbability);
  // The drafted step accepts something: more than one token per target call after the first.
  CHECK(metrics.acceptance_rate(1) > 0.5);
}

TEST_CASE("redrafter exact mode follows the target sequence law with top-p and temperature",
          "[redrafter][decode]") {
  const auto target = target_model();
  const auto head = toy::markov_head(draft_model(), 4);
  ReDrafterOptions options{.verification = ReDrafterVerification::kExact,
                           .warp = {.temperature = 0.8f, .top_p = 0.8f},
                           .width = 2,
                           .depth = 3,
                           .seed = 5};
  const auto counts = histogram(target, head, options, 3, 100000);
  const auto law = sequence_law(target, 2, 3, options.warp);
  // False-failure probability of this check: 1e-6 (kFalseFailureProbability).
  CHECK(test::chi_square_test(counts, law).p_value > test::kFalseFailureProbability);
}

TEST_CASE("redrafter greedy mode equals greedy decoding of the target", "[redrafter][decode]") {
  toy::NGramModel::Config config;
  config.vocab = 12;
  config.order = 2;
  config.seed = 3;
  const toy::NGramModel target(config);
  for (const bool small_head : {false, true}) {
    toy::NGramProvider provider(target, {.hidden_size = 6, .hidden_probabilities = true});
    const auto head =
        small_head ? ReDrafterHead::random({.hidden = 18, .exit_dim = 20, .vocab = 12}, 9, 0.3f)
                   : ReDrafterHead::random({.hidden = 18, .exit_dim = 36, .vocab = 12}, 4, 1.0f);
    ReDrafterOptions options{.verification = ReDrafterVerification::kGreedy,
                             .warp = {.temperature = 0.0f},
                             .width = 3,
                             .depth = 3,
                             .max_new_tokens = 40};
    const std::vector<Token> prompt = {5, 7};
    const auto result = decode_redrafter(provider, head, prompt, options);
    // Reference: argmax of the target after each prefix (ties to the lowest id).
    std::vector<Token> context = prompt, expected;
    std::vector<float> row(12);
    for (int i = 0; i < 40; ++i) {
      target.next_probabilities(context, row);
      const auto best = static_cast<Token>(std::max_element(row.begin(), row.end()) - row.begin());
      expected.push_back(best);
      context.push_back(best);
    }
    CHECK(result.tokens == expected);
  }
}

TEST_CASE("redrafter greedy mode accepts the beams of a head equal to the target",
          "[redrafter][decode]") {
  const auto target = target_model();
  auto provider = hidden_provider(target);
  const auto head = toy::markov_head(target, 4);
  ReDrafterOptions options{
      .verification = ReDrafterVerification::kGreedy, .width = 2, .depth = 4, .max_new_tokens = 41};
  const std::array<Token, 1> prompt = {0};
  const auto result = decode_redrafter(provider, head, prompt, options);
  // The head's top beam is the target's greedy path: every step keeps all 4 drafts + 1 token.
  CHECK(result.metrics.target_calls == 9);
  CHECK(result.metrics.acceptance_rate(4) == 1.0);
  // The 2 beams share prefixes, so the target scored fewer than W * L = 8 nodes per step.
  CHECK(result.metrics.target_tree_tokens < 8 * 8);
}

TEST_CASE("redrafter typical mode runs and accepts confident drafts", "[redrafter][decode]") {
  const auto target = target_model();
  auto provider = hidden_provider(target);
  const auto head = toy::markov_head(target, 4);
  ReDrafterOptions options{.verification = ReDrafterVerification::kTypical,
                           .width = 2,
                           .depth = 3,
                           .typical = {.epsilon = 0.05f, .delta = 0.05f},
                           .max_new_tokens = 50};
  const std::array<Token, 1> prompt = {0};
  const auto result = decode_redrafter(provider, head, prompt, options);
  CHECK(result.tokens.size() == 50);
  // Every target row puts > 0.05 on every token, so every draft passes the typical threshold.
  CHECK(result.metrics.acceptance_rate(1) == 1.0);
  CHECK(result.metrics.block_efficiency() > 3.0);
}

// docs/algorithms.md §3.6: draft (.5,.3,.2), target (.2,.3,.5), W = 2, one draft step: the
// reference's rule outputs (.4,.6,0). The target here repeats that row after every token, so the
// second generated token (the first drafted one) has exactly that law under the parity mode.
TEST_CASE("redrafter parity mode reproduces the reference's bias", "[redrafter][decode]") {
  const std::vector<float> p = {0.2f, 0.3f, 0.5f}, q = {0.5f, 0.3f, 0.2f};
  const auto target = toy::MarkovModel::from_rows({p, p, p});
  const auto head = toy::markov_head(toy::MarkovModel::from_rows({q, q, q}), 3);
  ReDrafterOptions options{.width = 2, .depth = 1, .seed = 21};
  std::array<std::array<std::int64_t, 3>, 2> second{};  // [mode][token]
  for (const auto mode : {ReDrafterVerification::kParity, ReDrafterVerification::kExact}) {
    options.verification = mode;
    const auto counts = histogram(target, head, options, 2, 20000);
    auto& out = second[mode == ReDrafterVerification::kParity ? 0 : 1];
    for (std::size_t cell = 0; cell < counts.size(); ++cell) out[cell % 3] += counts[cell];
  }
  const auto& parity = second[0];
  const auto& exact = second[1];
  // Parity never emits token 2 after a drafted step (its beams are {0} and {1}, beam 1 always
  // passes), and follows (.4, .6) on the other two. False-failure probability: 1e-6.
  CHECK(parity[2] == 0);
  const std::vector<std::int64_t> parity01 = {parity[0], parity[1]};
  CHECK(test::chi_square_test(parity01, std::vector<double>{0.4, 0.6}).p_value >
        test::kFalseFailureProbability);
  // Against the target the parity output fails overwhelmingly (TV 0.5 over 20000 samples; a
  // pass would need a chi-square statistic below ~28 where it is ~3e4), while exact mode passes
  // (false-failure probability 1e-6).
  CHECK(test::chi_square_test(parity, std::vector<double>{0.2, 0.3, 0.5}).p_value < 1e-12);
  CHECK(test::chi_square_test(exact, std::vector<double>{0.2, 0.3, 0.5}).p_value >
        test::kFalseFailureProbability);
}

TEST_CASE("redrafter decoding is deterministic per seed and sequence", "[redrafter][decode]") {
  const auto target = target_model();
  const auto head = toy::markov_head(draft_model(), 4);
  for (const auto mode : {ReDrafterVerification::kExact, ReDrafterVerification::kParity,
                          ReDrafterVerification::kTypical}) {
    ReDrafterOptions options{.verification = mode, .max_new_tokens = 30, .seed = 77};
    const std::array<Token, 1> prompt = {3};
    auto a = hidden_provider(target);
    auto b = hidden_provider(target);
    const auto first = decode_redrafter(a, head, prompt, options, 4);
    const auto again = decode_redrafter(b, head, prompt, options, 4);
    const auto other = decode_redrafter(b, head, prompt, options, 5);
    CHECK(first.tokens == again.tokens);
    CHECK(first.tokens.size() == 30);
    CHECK(first.tokens != other.tokens);
  }
}

TEST_CASE("redrafter stops at the end token and at max_new_tokens", "[redrafter][decode]") {
  const auto target = target_model();
  auto provider = hidden_provider(target);
  const auto head = toy::markov_head(draft_model(), 4);
  ReDrafterOptions options{.max_new_tokens = 200, .end_token = 3};
  const std::array<Token, 1> prompt = {0};
  const auto result = decode_redrafter(provider, head, prompt, options);
  REQUIRE(!result.tokens.empty());
  CHECK(result.tokens.back() == 3);
  CHECK(std::count(result.tokens.begin(), result.tokens.end(), Token{3}) == 1);
  options.end_token = kNoToken;
  options.max_new_tokens = 0;
  CHECK(decode_redrafter(provider, head, prompt, options).tokens.empty());
}

TEST_CASE("redrafter rejects bad input", "[redrafter][decode][errors]") {
  const auto target = target_model();
  auto provider = hidden_provider(target);
  const auto head = toy::markov_head(draft_model(), 4);
  const std::array<Token, 1> prompt = {0};
  ReDrafterOptions options{.width = 0};
  CHECK_THROWS_WITH(decode_redrafter(provider, head, prompt, options),
                    Catch::Contains("options") && Catch::Contains("width"));
  options = {};
  options.depth = 0;
  CHECK_THROWS_WITH(decode_redrafter(provider, head, prompt, options), Catch::Contains("depth"));
  // The argument names the field, kept apart from the problem (no text cut out of what()).
  try {
    decode_redrafter(provider, head, prompt, options);
    FAIL("depth 0 was accepted");
  } catch (const Error& e) {
    CHECK(e.argument() == "options.depth");
    CHECK(e.problem() == "0 must be >= 1");
  }
  options = {};
  options.warp.top_p = 0.0f;
  CHECK_THROWS_WITH(decode_redrafter(provider, head, prompt, options), Catch::Contains("top_p"));
  options = {};
  options.end_token = 9;
  CHECK_THROWS_WITH(decode_redrafter(provider, head, prompt, options),
                    Catch::Contains("end_token"));
  options = {};
  CHECK_THROWS_WITH(decode_redrafter(provider, head, std::span<const Token>{}, options),
                    Catch::Contains("prompt"));
  const std::array<Token, 1> bad_prompt = {7};
  CHECK_THROWS_WITH(decode_redrafter(provider, head, bad_prompt, options),
                    Catch::Contains("prompt"));
  // A head for another vocabulary or hidden size.
  const auto wide = toy::markov_head(draft_model(), 5);
  CHECK_THROWS_WITH(decode_redrafter(provider, wide, prompt, options),
                    Catch::Contains("head") && Catch::Contains("hidden size"));
  const auto other_vocab = ReDrafterHead::random({.hidden = 4, .exit_dim = 8, .vocab = 5}, 1);
  CHECK_THROWS_WITH(decode_redrafter(provider, other_vocab, prompt, options),
                    Catch::Contains("head") && Catch::Contains("vocabulary"));
  // A target without hidden states.
  toy::MarkovProvider plain(target);
  CHECK_THROWS_WITH(decode_redrafter(plain, head, prompt, options), Catch::Contains("head"));
  // A malformed head.
  auto broken = head;
  broken.vocab_proj.resize(3, 8);
  CHECK_THROWS_WITH(decode_redrafter(provider, broken, prompt, options),
                    Catch::Contains("vocab_proj"));
  CHECK_THROWS_WITH(parse_redrafter_verification("fast"), Catch::Contains("verification"));
  CHECK(parse_redrafter_verification("parity") == ReDrafterVerification::kParity);
}
