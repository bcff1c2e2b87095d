// SPDX-License-Identifier: MIT
// Decoder: determinism, thread independence, metrics, stopping and bad input.
#include <catch2/catch.hpp>

#include "decode/toy_tables.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/toy/providers.hpp"

using namespace specdec;
using specdec::test::markov_draft;
using specdec::test::markov_target;

TEST_CASE("decode runs every method end to end") {
  for (auto m : kAllMethods) {
    auto target = markov_target();
    auto draft = markov_draft();
    DecodeOptions o;
    o.method = m;
    o.depth = 3;
    o.width = 2;
    o.branching = {2, 2};
    o.max_new_tokens = 20;
    o.cascade.alpha = 0.3f;
    o.lossy.alpha = 0.2f;
    const std::vector<Token> prompt{1};
    const auto r = decode(target, draft, prompt, o, 7);
    INFO(method_name(m));
    CHECK(r.tokens.size() == 20);
    CHECK(r.metrics.tokens_generated == 20);
    CHECK(r.metrics.target_calls >= 1);
    for (auto t : r.tokens) CHECK((t >= 0 && t < 4));
  }
}
