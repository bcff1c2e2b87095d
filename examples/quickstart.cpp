// SPDX-License-Identifier: MIT
// Quickstart: two providers (a target and a draft model), DecodeOptions, decode, print.
#include <cstdio>
#include <vector>

#include "specdec/specdec.hpp"
#include "specdec/toy/toy.hpp"

int main() {
  using namespace specdec;
  // Any LogitsProvider works; an engine wraps its models. Here: a toy order-2 n-gram target
  // (V = 32) and a draft that sees the target's rows blurred with 30% noise.
  const toy::NGramModel target_model({.vocab = 32, .order = 2, .concentration = 0.3, .seed = 7});
  toy::NGramProvider target(target_model);
  toy::NGramProvider draft(toy::NGramModel::draft_of(target_model, 0.3f));

  DecodeOptions options;
  options.method = Method::kRsdS;  // stochastic beam search tree + recursive rejection sampling
  options.width = 3;               // W beams
  options.depth = 4;               // L draft tokens per beam
  options.warp = {.temperature = 0.8f, .top_p = 0.95f};  // same warp on draft and target
  options.max_new_tokens = 40;
  options.seed = 1;

  const std::vector<Token> prompt = {1, 2, 3};
  const DecodeResult result = decode(target, draft, prompt, options);

  std::printf("tokens:");
  for (Token t : result.tokens) std::printf(" %d", t);
  const DecodeMetrics& m = result.metrics;
  std::printf("\n%lld tokens in %lld target calls: %.2f tokens per call, MBSU %.2f at r = 0.05\n",
              static_cast<long long>(m.tokens_generated), static_cast<long long>(m.target_calls),
              m.block_efficiency(), m.mbsu(options.depth, 0.05));
  std::printf("acceptance per level:");
  for (double a : m.acceptance_rates()) std::printf(" %.2f", a);
  std::printf("\n");
  return 0;
}
