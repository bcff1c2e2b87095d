// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "specdec/verify/mtad.hpp"
#include "support/stats.hpp"

using namespace specdec;

namespace {
// Context-free toy: the same target row at every position.
std::vector<float> repeat_rows(const std::vector<float>& row, int rows) {
  std::vector<float> out;
  for (int r = 0; r < rows; ++r) out.insert(out.end(), row.begin(), row.end());
  return out;
}
}  // namespace

TEST_CASE("mtad keeps the longest passing prefix even after a failing one", "[verify][mtad]") {
  // Target (.5, .5) everywhere. Draft tokens 0, 0, 0 with per-token draft probabilities
  // .9, .2, .9: P = .5, .25, .125; Q = .9, .18, .162; P/Q = .556, 1.389, .772.
  // tau = .7: prefix 1 fails, prefix 2 passes, prefix 3 passes -> eta = 3.
  const std::vector<Token> tokens = {0, 0, 0};
  const std::vector<float> log_q = {std::log(0.9f), std::log(0.2f), std::log(0.9f)};
  const auto rows = repeat_rows({0.5f, 0.5f}, 4);
  const MatrixView<const float> target(rows.data(), 4, 2);
  const RandomStream s{1};
  CHECK(verify_mtad<RandomStream>(tokens, log_q, target, 0.7f, s).accepted == 3);
  // tau = .8: only prefix 2 passes (1.389 > .8, .772 < .8) -> eta = 2.
  CHECK(verify_mtad<RandomStream>(tokens, log_q, target, 0.8f, s).accepted == 2);
  // tau = 0: every prefix with positive target probability passes.
  CHECK(verify_mtad<RandomStream>(tokens, log_q, target, 0.0f, s).accepted == 3);
}

TEST_CASE("mtad with tau = 1 is plain target sampling", "[verify][mtad]") {
  // min(1, P/Q) > 1 never holds: eta = 0 and the token is drawn from target row 0. Exact: the
  // output law is row 0 itself; Monte Carlo: chi-square, false-failure probability 1e-6.
  const std::vector<Token> tokens = {1, 2};
  const std::vector<float> log_q = {std::log(0.01f), std::log(0.01f)};  // ratios far above 1
  std::vector<float> rows = {0.2f, 0.3f, 0.5f, 0.6f, 0.3f, 0.1f, 0.1f, 0.1f, 0.8f};
  const MatrixView<const float> target(rows.data(), 3, 3);
  std::vector<std::int64_t> counts(3, 0);
  for (std::uint32_t run = 0; run < 100000; ++run) {
    const RandomStream s{7, run, 0, 0, Domain::kVerify};
    const auto v = verify_mtad<RandomStream>(tokens, log_q, target, 1.0f, s);
    REQUIRE(v.accepted == 0);
    ++counts[static_cast<std::size_t>(v.token)];
  }
  const std::vector<double> expected = {0.2, 0.3, 0.5};
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("mtad draws the final token from the row after the kept prefix", "[verify][mtad]") {
  const std::vector<Token> tokens = {0};
  const std::vector<float> log_q = {std::log(0.5f)};
  const std::vector<float> rows = {0.5f, 0.5f, 0.0f, 1.0f};  // row 1 is one-hot on token 1
  const MatrixView<const float> target(rows.data(), 2, 2);
  const std::vector<float> u = {0.001f};
  const auto v = verify_mtad(tokens, log_q, target, 0.5f, SuppliedUniforms(u));
  CHECK(v.accepted == 1);
  CHECK(v.token == 1);
}

TEST_CASE("mtad rejects bad input naming the argument", "[verify][mtad]") {
  const std::vector<Token> tokens = {0, 1};
  const std::vector<float> log_q = {-0.5f, -0.5f};
  const auto rows = repeat_rows({0.5f, 0.5f}, 3);
  const MatrixView<const float> target(rows.data(), 3, 2);
  const RandomStream s{1};
  CHECK_THROWS_WITH(verify_mtad<RandomStream>(tokens, log_q, target, 1.5f, s),
                    Catch::Contains("tau"));
  const std::vector<float> short_q = {-0.5f};
  CHECK_THROWS_WITH(verify_mtad<RandomStream>(tokens, short_q, target, 0.5f, s),
                    Catch::Contains("draft_log_probs"));
  const MatrixView<const float> two_rows(rows.data(), 2, 2);
  CHECK_THROWS_WITH(verify_mtad<RandomStream>(tokens, log_q, two_rows, 0.5f, s),
                    Catch::Contains("target_rows"));
  const std::vector<Token> bad = {0, 5};
  CHECK_THROWS_WITH(verify_mtad<RandomStream>(bad, log_q, target, 0.5f, s),
                    Catch::Contains("draft_tokens[1]"));
  const std::vector<float> positive = {0.5f, -0.5f};
  CHECK_THROWS_WITH(verify_mtad<RandomStream>(tokens, positive, target, 0.5f, s),
                    Catch::Contains("draft_log_probs[0]"));
  auto bad_rows = rows;
  bad_rows[3] = 0.9f;
  const MatrixView<const float> unnormalised(bad_rows.data(), 3, 2);
  CHECK_THROWS_WITH(verify_mtad<RandomStream>(tokens, log_q, unnormalised, 0.5f, s),
                    Catch::Contains("target_rows[1]"));
}
