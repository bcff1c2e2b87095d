// SPDX-License-Identifier: MIT
// Gumbel-top-k, i.i.d. sampling and the truncated-Gumbel update.
#include <bit>
#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/iid.hpp"
#include "specdec/draft/stochastic_beam.hpp"
#include "support/stats.hpp"

using namespace specdec;
using Catch::Detail::Approx;

namespace {

constexpr int kSamples = 100000;

RandomStream stream_for(std::uint32_t i) {
  return RandomStream{
      .seed = 42, .sequence = 7, .position = i, .node = 0, .domain = Domain::kDraft};
}

/// Probability of the ordered tuple under sampling without replacement from `p`.
double without_replacement_probability(const std::vector<double>& p, std::span<const int> tuple) {
  double prob = 1.0, left = 1.0;
  for (int x : tuple) {
    prob *= p[static_cast<std::size_t>(x)] / left;
    left -= p[static_cast<std::size_t>(x)];
  }
  return prob;
}

int tuple_index(std::span<const Token> t, int vocab) {
  int index = 0;
  for (auto x : t) index = index * vocab + x;
  return index;
}

}  // namespace

TEST_CASE("gumbel_top_k first token follows the row", "[draft][gumbel]") {
  const std::vector<float> probs = {0.4f, 0.25f, 0.2f, 0.15f, 0.0f};
  std::vector<float> logp(probs.size());
  for (std::size_t i = 0; i < probs.size(); ++i) logp[i] = std::log(probs[i]);
  Workspace ws(gumbel_top_k_workspace_size(5));
  std::vector<std::int64_t> counts(5, 0);
  Token out[2];
  for (int i = 0; i < kSamples; ++i) {
    REQUIRE(gumbel_top_k<float>(logp, 2, stream_for(static_cast<std::uint32_t>(i)), out, ws) == 2);
    ++counts[static_cast<std::size_t>(out[0])];
  }
  const std::vector<double> expected(probs.begin(), probs.end());
  // False-failure probability 1e-6 (the threshold); a count on the zero token fails outright.
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("gumbel_top_k ordered triples follow sampling without replacement", "[draft][gumbel]") {
  const int vocab = 5, k = 3;
  const std::vector<double> p = {0.35, 0.25, 0.2, 0.15, 0.05};
  const std::vector<float> probs(p.begin(), p.end());
  std::vector<double> expected(125, 0.0);
  double total = 0.0;
  test::for_each_distinct_tuple(vocab, k, [&](std::span<const int> t) {
    const double e = without_replacement_probability(p, t);
    expected[static_cast<std::size_t>(t[0] * 25 + t[1] * 5 + t[2])] = e;
    total += e;
  });
  REQUIRE(total == Approx(1.0).epsilon(1e-12));  // the exact law is a distribution
  Workspace ws(gumbel_top_k_workspace_size(vocab));
  std::vector<std::int64_t> counts(125, 0);
  Token out[3];
  for (int i = 0; i < kSamples; ++i) {
    REQUIRE(gumbel_top_k_probabilities<float>(probs, k, stream_for(static_cast<std::uint32_t>(i)),
                                              out, ws) == k);
    ++counts[static_cast<std::size_t>(tuple_index(out, vocab))];
  }
  // False-failure probability 1e-6; tuples with repeated tokens have expected probability 0.
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

namespace {

// gumbel_top_k (whatever shortcut its selection takes) against perturbing the whole row and
// selecting from it: the same tokens and value bits.
template <RowKind kind>
void check_bounded_selection(const std::vector<float>& row, std::int64_t k) {
  const auto n = static_cast<std::int64_t>(row.size());
  std::vector<float> perturbed(row.size()), values(static_cast<std::size_t>(k));
  std::vector<float> whole(row.size());
  std::vector<std::int32_t> index(row.size()), whole_index(row.size());
  std::vector<Token> tokens(static_cast<std::size_t>(k));
  int differ = 0;
  for (std::uint32_t draw = 0; draw < 40; ++draw) {
    const RandomStream s = stream_for(draw);
    const auto got = detail::gumbel_top_k_row<kind>(
        row.data(), n, k, s, 3 * draw,
        {perturbed.data(), index.data(), tokens.data(), values.data()});
    detail::perturb_row_host<kind>(row.data(), n, s, 3 * draw, whole.data());
    const auto want = detail::select_top_k_of_row(whole.data(), n, k, whole_index.data());
    REQUIRE(got == want);
    for (std::int64_t j = 0; j < got; ++j) {
      const auto id = whole_index[static_cast<std::size_t>(j)];
      differ += tokens[static_cast<std::size_t>(j)] != id ? 1 : 0;
      differ += std::bit_cast<std::uint32_t>(values[static_cast<std::size_t>(j)]) !=
                        std::bit_cast<std::uint32_t>(whole[static_cast<std::size_t>(id)])
                    ? 1
                    : 0;
    }
  }
  CAPTURE(n, k);
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("gumbel_top_k gives the tokens and values of perturbing every entry of the row",
          "[draft][gumbel]") {
  for (const std::int64_t n : {37, 5000, 60000}) {
    std::vector<float> logits(static_cast<std::size_t>(n));
    std::mt19937 gen(static_cast<std::uint32_t>(n));
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (auto& x : logits) x = normal(gen);
    for (std::size_t i = 0; i < logits.size(); i += 7) logits[i] = -INFINITY;  // banned
    std::vector<float> probs(logits.size());
    double sum = 0.0;
    for (std::size_t i = 0; i < probs.size(); ++i) sum += std::exp(static_cast<double>(logits[i]));
    for (std::size_t i = 0; i < probs.size(); ++i) {
      probs[i] = static_cast<float>(std::exp(static_cast<double>(logits[i])) / sum);
    }
    for (const std::int64_t k : {1, 8, 64}) {
      check_bounded_selection<RowKind::kLogWeights>(logits, k);
      check_bounded_selection<RowKind::kProbabilities>(probs, k);
    }
  }
  // Ties: equal log-weights everywhere, the order comes from the noise and the ids alone.
  check_bounded_selection<RowKind::kLogWeights>(std::vector<float>(3000, 0.25f), 8);
  // Large log-weights (the room left for rounding grows with them) and subnormal probabilities.
  std::vector<float> shifted(5000), tiny(5000);
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (auto& x : shifted) x = 1e4f + normal(gen);
  for (std::size_t i = 0; i < tiny.size(); ++i) {
    tiny[i] = i % 3 == 0 ? std::ldexp(1.0f, -140 + static_cast<int>(i % 20)) : (i % 3 == 1 ? 0.0f : 1e-3f);
  }
  std::vector<float> subnormal(5000);
  for (std::size_t i = 0; i < subnormal.size(); ++i) {
    subnormal[i] = i % 2 == 0 ? std::ldexp(1.0f, -149 + static_cast<int>(i % 23)) : 0.0f;
  }
  for (const std::int64_t k : {1, 8}) {
    check_bounded_selection<RowKind::kLogWeights>(shifted, k);
    check_bounded_selection<RowKind::kProbabilities>(tiny, k);
    check_bounded_selection<RowKind::kProbabilities>(subnormal, k);
  }
}

TEST_CASE("gumbel_top_k never returns zero-probability tokens", "[draft][gumbel]") {
  const std::vector<float> probs = {0.0f, 0.5f, 0.0f, 0.3f, 0.2f, 0.0f};
  Workspace ws(gumbel_top_k_workspace_size(6));
  Token out[6];
  float values[6];
  for (int i = 0; i < 2000; ++i) {
    const auto got = gumbel_top_k_probabilities<float>(
        probs, 6, stream_for(static_cast<std::uint32_t>(i)), out, ws, values);
    REQUIRE(got == 3);
    for (int j = 0; j < got; ++j) CHECK(probs[static_cast<std::size_t>(out[j])] > 0.0f);
    CHECK(values[0] >= values[1]);
    CHECK(values[1] >= values[2]);
  }
}

TEST_CASE("gumbel_top_k is stable with log-weights near -1e30 and -inf", "[draft][gumbel]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logw = {-1e30f, 0.0f, -inf, -1.0f, -1e30f, -inf};
  Workspace ws(gumbel_top_k_workspace_size(6));
  Token out[6];
  float values[6];
  for (int i = 0; i < 2000; ++i) {
    const auto got =
        gumbel_top_k<float>(logw, 6, stream_for(static_cast<std::uint32_t>(i)), out, ws, values);
    REQUIRE(got == 4);
    // The two ordinary tokens always come first; -inf never appears; values are finite.
    CHECK(((out[0] == 1 && out[1] == 3) || (out[0] == 3 && out[1] == 1)));
    CHECK(((out[2] == 0 && out[3] == 4) || (out[2] == 4 && out[3] == 0)));
    for (int j = 0; j < got; ++j) CHECK(std::isfinite(values[j]));
  }
}

TEST_CASE("gumbel_top_k takes caller-supplied uniforms by token id", "[draft][gumbel]") {
  // Equal weights: the order is decided by the Gumbels alone, largest uniform first.
  const std::vector<float> logw = {0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> u = {0.2f, 0.9f, 0.5f, 0.7f};
  Workspace ws;
  Token out[4];
  REQUIRE(gumbel_top_k<float>(logw, 4, SuppliedUniforms(u), out, ws) == 4);
  CHECK(out[0] == 1);
  CHECK(out[1] == 3);
  CHECK(out[2] == 2);
  CHECK(out[3] == 0);
}

TEST_CASE("gumbel_top_k does not allocate after warm-up", "[draft][gumbel]") {
  const std::vector<float> logw(1000, 0.0f);
  Workspace ws(gumbel_top_k_workspace_size(1000));
  const auto before = ws.allocations();
  Token out[8];
  for (int i = 0; i < 10; ++i) gumbel_top_k<float>(logw, 8, stream_for(0), out, ws);
  CHECK(ws.allocations() == before);
}

TEST_CASE("gumbel_top_k rejects bad input", "[draft][gumbel][errors]") {
  const std::vector<float> logw = {0.0f, -1.0f, -2.0f};
  Workspace ws;
  Token out[4];
  CHECK_THROWS_WITH(gumbel_top_k<float>(logw, 4, stream_for(0), out, ws), Catch::Contains("k:"));
  CHECK_THROWS_WITH(gumbel_top_k<float>(logw, 0, stream_for(0), out, ws), Catch::Contains("k:"));
  CHECK_THROWS_WITH(gumbel_top_k<float>(logw, 3, stream_for(0), std::span<Token>(out, 2), ws),
                    Catch::Contains("tokens:"));
  const std::vector<float> nan_row = {0.0f, std::nanf(""), 1.0f};
  CHECK_THROWS_WITH(gumbel_top_k<float>(nan_row, 1, stream_for(0), out, ws),
                    Catch::Contains("log_weights[1]"));
  const std::vector<float> bad_probs = {0.5f, 0.2f, 0.2f};
  CHECK_THROWS_WITH(gumbel_top_k_probabilities<float>(bad_probs, 1, stream_for(0), out, ws),
                    Catch::Contains("probabilities"));
}

TEST_CASE("sample_iid draws pairs independently from the row", "[draft][iid]") {
  const std::vector<float> probs = {0.5f, 0.3f, 0.0f, 0.2f};
  std::vector<double> expected(16, 0.0);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) expected[static_cast<std::size_t>(a * 4 + b)] = probs[a] * probs[b];
  std::vector<std::int64_t> counts(16, 0);
  Token out[2];
  for (int i = 0; i < kSamples; ++i) {
    sample_iid(probs, stream_for(static_cast<std::uint32_t>(i)), out);
    ++counts[static_cast<std::size_t>(tuple_index(out, 4))];
  }
  // False-failure probability 1e-6.
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("sample_iid rejects bad input", "[draft][iid][errors]") {
  const std::vector<float> probs = {0.5f, 0.5f};
  CHECK_THROWS_WITH(sample_iid(probs, stream_for(0), std::span<Token>()),
                    Catch::Contains("tokens:"));
  const std::vector<float> negative = {1.5f, -0.5f};
  Token out[1];
  CHECK_THROWS_WITH(sample_iid(negative, stream_for(0), out), Catch::Contains("probabilities[1]"));
}

TEST_CASE("truncated_gumbel matches the derived check", "[draft][sbs]") {
  // phi + G = (-0.5, 0.3, 1.2), bound T = 0.7 -> (-0.611998, 0.065916, 0.7).
  const double z = 1.2;
  CHECK(truncated_gumbel(0.7, -0.5, z) == Approx(-0.611998).margin(1e-6));
  CHECK(truncated_gumbel(0.7, 0.3, z) == Approx(0.065916).margin(1e-6));
  CHECK(truncated_gumbel(0.7, 1.2, z) == 0.7);
  // Direct formula -log(exp(-T) - exp(-Z) + exp(-g)).
  for (double g : {-0.5, 0.3, 1.2}) {
    CHECK(truncated_gumbel(0.7, g, z) ==
          Approx(-std::log(std::exp(-0.7) - std::exp(-z) + std::exp(-g))).margin(1e-12));
  }
}

TEST_CASE("truncated_gumbel is monotone and bounded by its parent", "[draft][sbs]") {
  for (double bound : {-3.0, 0.0, 2.5}) {
    double previous = -std::numeric_limits<double>::infinity();
    for (double g = -20.0; g <= 4.0; g += 0.25) {
      const double v = truncated_gumbel(bound, g, 4.0);
      CHECK(v <= bound);
      CHECK(v >= previous);
      previous = v;
    }
  }
}

TEST_CASE("truncated_gumbel is stable near -1e30", "[draft][sbs]") {
  CHECK(truncated_gumbel(-1e30, -1e30, -1e30) == -1e30);
  const double far = truncated_gumbel(0.0, -1e30, 0.0);
  CHECK(std::isfinite(far));
  CHECK(far == Approx(-1e30));
  const double near_zero = truncated_gumbel(-1e30, -1e30 - 1e16, -1e30);
  CHECK(std::isfinite(near_zero));
  CHECK(near_zero <= -1e30);
  CHECK(std::isfinite(truncated_gumbel(5.0, 1e-300, 1e-300)));
}

TEST_CASE("gumbel_top_k heap and nth_element selections agree", "[draft][gumbel]") {
  // k <= 256 scans with a bounded heap, larger k compacts and uses nth_element: the first 256
  // tokens of a k = 257 draw must be the k = 256 draw (same uniforms).
  const int vocab = 1000;
  std::vector<float> probs(vocab, 0.0f);
  for (int i = 0; i < vocab; i += 3)
    probs[static_cast<std::size_t>(i)] = 1.0f + static_cast<float>(i % 7);
  float total = 0.0f;
  for (float p : probs) total += p;
  for (auto& p : probs) p /= total;
  Workspace ws;
  std::vector<Token> small(256), large(400);
  for (std::uint32_t s = 0; s < 20; ++s) {
    REQUIRE(gumbel_top_k_probabilities<float>(probs, 256, stream_for(s), small, ws) == 256);
    REQUIRE(gumbel_top_k_probabilities<float>(probs, 400, stream_for(s), large, ws) == 334);
    for (int j = 0; j < 256; ++j)
      CHECK(small[static_cast<std::size_t>(j)] == large[static_cast<std::size_t>(j)]);
    for (int j = 0; j < 334; ++j)
      CHECK(probs[static_cast<std::size_t>(large[static_cast<std::size_t>(j)])] > 0.0f);
  }
}

TEST_CASE("vectorised Philox fill equals the scalar stream", "[draft][gumbel]") {
  const RandomStream s{
      .seed = 0x1234567890ull, .sequence = 3, .position = 17, .node = 99, .domain = Domain::kDraft};
  std::vector<float> fast(1000);
  for (std::uint32_t first : {0u, 4u, 7u}) {
    fill_uniforms(s, first, fast);
    for (std::uint32_t i = 0; i < 1000; ++i) REQUIRE(fast[i] == s.uniform(first + i));
  }
}

TEST_CASE(
    "gumbel_top_k's bound loop gives the same bits on every SIMD target and bounds the values",
    "[draft][gumbel]") {
  // Probabilities from 0 to 1 and log-weights with -inf, over uniforms near 0, 1 and between.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const int n = 1027;
  std::vector<float> probs(n), logs(n), u(n), scalar(n), lanes(n);
  for (int i = 0; i < n; ++i) {
    probs[static_cast<std::size_t>(i)] = i % 17 == 0 ? 0.0f : std::ldexp(unit(rng), -(i % 40));
    logs[static_cast<std::size_t>(i)] =
        i % 13 == 0 ? -std::numeric_limits<float>::infinity() : -40.0f * unit(rng) + 5.0f;
    const auto bits = i % 3 == 0   ? static_cast<std::uint32_t>(i)
                      : i % 3 == 1 ? ~static_cast<std::uint32_t>(i)
                                   : static_cast<std::uint32_t>(rng());
    u[static_cast<std::size_t>(i)] = detail::bits_to_open_uniform(bits);
  }
  using ProbBounds = detail::GumbelBounds<RowKind::kProbabilities, float>;
  using LogBounds = detail::GumbelBounds<RowKind::kLogWeights, float>;
  std::vector<float> prob_scalar(n), log_scalar(n);
  ProbBounds::run_scalar(probs.data(), u.data(), n, prob_scalar.data());
  LogBounds::run_scalar(logs.data(), u.data(), n, log_scalar.data());
  for (int i = 0; i < n; ++i) {
    const auto j = static_cast<std::size_t>(i);
    CHECK(prob_scalar[j] >= detail::gumbel_perturbed<RowKind::kProbabilities>(probs[j], u[j]));
    CHECK(log_scalar[j] >= detail::gumbel_perturbed<RowKind::kLogWeights>(logs[j], u[j]));
  }
  for (const detail::LaneTarget target : detail::available_lane_targets()) {
    INFO("target " << detail::lane_target_name(target));
    std::vector<float> prob_lanes(n), log_lanes(n);
    detail::run_on_lanes<ProbBounds>(target, static_cast<const float*>(probs.data()),
                                     static_cast<const float*>(u.data()), std::int64_t{n},
                                     prob_lanes.data());
    detail::run_on_lanes<LogBounds>(target, static_cast<const float*>(logs.data()),
                                    static_cast<const float*>(u.data()), std::int64_t{n},
                                    log_lanes.data());
    int mismatches = 0;
    for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) {
      mismatches += std::bit_cast<std::uint32_t>(prob_lanes[j]) ==
                            std::bit_cast<std::uint32_t>(prob_scalar[j])
                        ? 0
                        : 1;
      mismatches +=
          std::bit_cast<std::uint32_t>(log_lanes[j]) == std::bit_cast<std::uint32_t>(log_scalar[j])
              ? 0
              : 1;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("gumbel_top_k accepts half and bfloat16 rows", "[draft][gumbel]") {
  // Values exactly representable in both formats: the draws and the result match the float row.
  const std::vector<float> logw = {-1.0f, 0.5f, -2.0f, 0.25f, -0.5f};
  std::vector<Eigen::half> half(logw.begin(), logw.end());
  std::vector<Eigen::bfloat16> bf16(logw.begin(), logw.end());
  Workspace ws;
  Token a[3], b[3], c[3];
  for (std::uint32_t s = 0; s < 50; ++s) {
    gumbel_top_k<float>(logw, 3, stream_for(s), a, ws);
    gumbel_top_k<Eigen::half>(half, 3, stream_for(s), b, ws);
    gumbel_top_k<Eigen::bfloat16>(bf16, 3, stream_for(s), c, ws);
    for (int j = 0; j < 3; ++j) {
      CHECK(a[j] == b[j]);
      CHECK(a[j] == c[j]);
    }
  }
}
