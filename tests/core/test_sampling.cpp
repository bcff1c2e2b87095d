// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <vector>

#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/verify/chain.hpp"
#include "support/stats.hpp"

using namespace specdec;

TEST_CASE("inverse-CDF sampling picks by cumulative mass", "[core][sampling]") {
  const std::vector<float> p = {0.2f, 0.0f, 0.5f, 0.3f};
  CHECK(sample(p, 0.1f) == 0);
  CHECK(sample(p, 0.3f) == 2);
  CHECK(sample(p, 0.71f) == 2 + 1);
  CHECK(sample(p, 1.0f - 1e-7f) == 3);
}

TEST_CASE("inverse-CDF sampling never returns a zero-probability token", "[core][sampling]") {
  const std::vector<float> w = {0.0f, 0.3f, 0.0f};
  // Rounding that runs past the mass lands on the last positive weight.
  CHECK(detail::sample_weights(w.data(), 3, 0.3f, 0.9999999f) == 1);
  CHECK(detail::sample_weights(w.data(), 3, 0.2999f, 0.9999999f) == 1);
}

TEST_CASE("sampling frequencies pass a chi-square test", "[core][sampling]") {
  // False-failure probability: kFalseFailureProbability.
  const std::vector<float> p = {0.1f, 0.2f, 0.3f, 0.4f};
  std::vector<std::int64_t> counts(4, 0);
  const RandomStream s{9, 0, 0, 0, Domain::kSample};
  for (std::uint32_t i = 0; i < 100000; ++i)
    ++counts[static_cast<std::size_t>(sample(p, s.uniform(i)))];
  CHECK(test::chi_square_test(counts, std::span<const float>(p)).p_value >
        test::kFalseFailureProbability);
}

TEST_CASE("sampling rejects bad rows and uniforms", "[core][sampling]") {
  const std::vector<float> p = {0.5f, 0.5f};
  CHECK_THROWS_WITH(sample(p, 0.0f), Catch::Contains("u"));
  CHECK_THROWS_WITH(sample(p, 1.0f), Catch::Contains("u"));
  const std::vector<float> bad = {0.5f, 0.6f};
  CHECK_THROWS_WITH(sample(bad, 0.5f), Catch::Contains("probabilities"));
}

TEST_CASE("sampling from unnormalised weights scales the uniform by their sum", "[core][sampling]") {
  const std::vector<float> w = {2.0f, 0.0f, 6.0f};  // cumulative 2, 2, 8 of 8
  CHECK(sample_from_weights(w, 0.2f) == 0);
  CHECK(sample_from_weights(w, 0.3f) == 2);
  CHECK(sample_from_weights(w, 0.99f) == 2);
  CHECK(sample_from_weights(std::vector<float>{0.0f, 0.0f}, 0.5f) == -1);
  CHECK_THROWS_WITH(sample_from_weights(std::vector<float>{1.0f, -1.0f}, 0.5f),
                    Catch::StartsWith("weights[1]: "));
  CHECK_THROWS_WITH(sample_from_weights(w, 1.0f), Catch::StartsWith("u: "));
}

TEST_CASE("sample draws the token a verifier draws from the same row and uniform",
          "[core][sampling]") {
  // Long flat rows, where a float running sum drifts from the double one (a float sampler picks
  // another token for about 1 seed in 10); a chain of no drafts emits its bonus token, draw 0 of
  // its stream at its position.
  const std::int64_t vocab = 100000;
  Workspace ws;
  std::vector<float> row(static_cast<std::size_t>(vocab));
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    const RandomStream stream{.seed = 900 + seed, .sequence = 1, .position = 7};
    float total = 0.0f;
    for (std::int64_t i = 0; i < vocab; ++i) {
      const float w = 0.5f + stream.at_node(3).uniform(static_cast<std::uint32_t>(i));
      row[static_cast<std::size_t>(i)] = w;
      total += w;
    }
    for (float& p : row) p /= total;
    std::vector<Token> out(1);
    verify_chain<float>(Rejection{}, row, {}, {}, vocab, stream, out, ws);
    const float u = stream.at_position(stream.position).uniform(0);
    CAPTURE(seed);
    CHECK(sample(row, u) == out[0]);
    CHECK(sample_from_weights(row, u) == out[0]);
  }
}
