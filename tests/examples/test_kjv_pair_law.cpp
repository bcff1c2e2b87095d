// SPDX-License-Identifier: MIT
// The engine loop of examples/kjv_generate on the trained pair keeps the target's law: at
// temperature 1 the first two tokens that speculative decoding emits follow the target's softmax
// (chi-square against the law computed by full forward passes, fixed seeds, false-failure
// probability kFalseFailureProbability = 1e-6 per test).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "examples/kjv_pair.hpp"
#include "kjv_provider.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"
#include "support/stats.hpp"

namespace {

// softmax of the model's logits after `tokens`, from an empty cache with a causal mask.
std::vector<double> next_token_law(const kjv::Transformer& model,
                                   const std::vector<specdec::Token>& tokens) {
  const auto logits = model.prefix_logits(tokens);
  const auto row = logits.row(logits.rows() - 1).cast<double>();
  std::vector<double> law(static_cast<std::size_t>(row.size()));
  const double top = row.maxCoeff();
  double sum = 0.0;
  for (std::size_t v = 0; v < law.size(); ++v)
    sum += law[v] = std::exp(row(static_cast<Eigen::Index>(v)) - top);
  for (auto& p : law) p /= sum;
  return law;
}

// Runs `runs` sequences of two tokens through `decoder` (fresh streams per sequence id) and
// checks the first token against the target's law after the prompt and the second against its
// marginal, sum over x of p(x) p(. | prompt, x).
template <class Decoder>
void check_first_two_tokens(Decoder& decoder, std::uint32_t runs) {
  const auto& model = specdec::test::kjv_pair().target;
  const auto prompt = specdec::test::kjv_prompt();
  const auto vocab = static_cast<std::size_t>(model.config().vocab);
  std::vector<std::int64_t> first(vocab), second(vocab);
  for (std::uint32_t i = 0; i < runs; ++i) {
    decoder.reset(prompt, i);
    while (decoder.generated().size() < 2) decoder.step();
    ++first[static_cast<std::size_t>(decoder.generated()[0])];
    ++second[static_cast<std::size_t>(decoder.generated()[1])];
  }
  const auto law = next_token_law(model, prompt);
  std::vector<double> marginal(vocab);
  for (std::size_t x = 0; x < vocab; ++x) {
    if (law[x] < 1e-12) continue;
    auto context = prompt;
    context.push_back(static_cast<specdec::Token>(x));
    const auto next = next_token_law(model, context);
    for (std::size_t y = 0; y < vocab; ++y) marginal[y] += law[x] * next[y];
  }
  const auto one = specdec::test::chi_square_test(first, law);
  const auto two = specdec::test::chi_square_test(second, marginal);
  INFO("first token: chi2 " << one.statistic << " df " << one.df << "; second: chi2 "
                            << two.statistic << " df " << two.df);
  CHECK(one.p_value > specdec::test::kFalseFailureProbability);
  CHECK(two.p_value > specdec::test::kFalseFailureProbability);
}

constexpr std::uint32_t kRuns = specdec::test::monte_carlo_runs(6000);

specdec::DecodeOptions options(specdec::Method method) {
  specdec::DecodeOptions o;
  o.method = method;
  o.depth = 4;
  o.width = 2;
  o.max_new_tokens = 2;
  o.seed = 41;
  return o;
}

// check_first_two_tokens for `method` decoding the trained pair.
void check_method(specdec::Method method) {
  kjv::ModelProvider target(specdec::test::kjv_pair().target),
      draft(specdec::test::kjv_pair().draft);
  specdec::MethodDecoder<kjv::ModelProvider, kjv::ModelProvider> decoder(target, draft,
                                                                         options(method));
  check_first_two_tokens(decoder, kRuns);
}

}  // namespace

TEST_CASE("SD on the trained pair emits the target's first two tokens' law at temperature 1",
          "[examples][kjv][mc]") {
  check_method(specdec::Method::kSd);
}

TEST_CASE("RSD-S on the trained pair emits the target's first two tokens' law at temperature 1",
          "[examples][kjv][mc]") {
  check_method(specdec::Method::kRsdS);
}

TEST_CASE("an EAGLE-2 top-k tree on the trained pair emits the target's first two tokens' law",
          "[examples][kjv][mc]") {
  kjv::ModelProvider target(specdec::test::kjv_pair().target),
      draft(specdec::test::kjv_pair().draft);
  using Strategy = specdec::TopKTreeStrategy<kjv::ModelProvider>;
  specdec::Decoder<kjv::ModelProvider, Strategy> decoder(
      target,
      Strategy(draft,
               {.shape = specdec::TreeShapePolicy::kEagle2, .width = 3, .depth = 4, .budget = 12}),
      options(specdec::Method::kSd).loop());
  check_first_two_tokens(decoder, kRuns);
}
