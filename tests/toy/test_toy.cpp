// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "specdec/core/validate.hpp"
#include "specdec/toy/toy.hpp"
#include "support/stats.hpp"

using namespace specdec;
using Catch::Detail::Approx;

TEST_CASE("toy random: uniform mean and gamma mean", "[toy][random]") {
  // Gamma(shape) has mean = variance = shape; 6 standard errors over 1e5 draws.
  toy::ToyRandom rng(7);
  for (double shape : {0.3, 1.0, 4.0}) {
    double sum = 0.0;
    const int n = 100000;
    for (int i = 0; i < n; ++i) sum += rng.gamma(shape);
    CHECK(std::abs(sum / n - shape) < 6.0 * std::sqrt(shape / n));
  }
}

TEST_CASE("categorical pairs are valid and their divergence is controlled", "[toy][pairs]") {
  const auto close = toy::make_categorical_pair(64, 1, 1.0, 1.0f, 0.05f);
  const auto far = toy::make_categorical_pair(64, 1, 1.0, 1.0f, 0.8f);
  check_probability_row<float>("target", close.target);
  check_probability_row<float>("draft", far.draft);
  CHECK(close.tv() < far.tv());
  CHECK(close.target == far.target);  // same seed, same target
  const auto same = toy::make_categorical_pair(64, 1, 1.0, 1.0f, 0.0f);
  CHECK(same.tv() == Approx(0.0).margin(1e-6));
}

TEST_CASE("temperature sharpens and flattens", "[toy][pairs]") {
  const std::vector<float> p = {0.2f, 0.8f};
  const auto sharp = toy::at_temperature(p, 0.5f);
  CHECK(sharp[1] == Approx(0.64 / 0.68));
  const auto flat = toy::at_temperature(p, 1e6f);
  CHECK(flat[0] == Approx(0.5).epsilon(1e-3));
}

TEST_CASE("bernoulli pairs", "[toy][pairs]") {
  const auto b = toy::bernoulli_pair(0.3f, 0.6f);
  CHECK(b.target == std::vector<float>{0.7f, 0.3f});
  CHECK(b.tv() == Approx(0.3f));
  CHECK_THROWS_WITH(toy::bernoulli_pair(1.5f, 0.2f), Catch::Contains("p_target"));
}

TEST_CASE("order-1 Markov model reads its table", "[toy][markov]") {
  const auto m = toy::MarkovModel::from_rows({{0.5f, 0.5f}, {0.1f, 0.9f}});
  std::vector<float> out(2);
  const std::vector<Token> context = {0, 1};
  m.next_probabilities(context, out);
  CHECK(out == std::vector<float>{0.1f, 0.9f});
  CHECK_THROWS_WITH(m.next_probabilities(std::span<const Token>{}, out),
                    Catch::Contains("context"));
  const std::vector<Token> bad = {2};
  CHECK_THROWS_WITH(m.next_probabilities(bad, out), Catch::Contains("context"));
  CHECK_THROWS_WITH(toy::MarkovModel::from_rows({{0.5f, 0.6f}, {0.1f, 0.9f}}),
                    Catch::Contains("transition[0]"));
  CHECK_THROWS_WITH(toy::MarkovModel::from_rows({{1.0f}, {0.1f, 0.9f}}),
                    Catch::Contains("transition[0]"));
  STATIC_REQUIRE(toy::ToyModel<toy::MarkovModel>);
}

TEST_CASE("n-gram models answer any context deterministically", "[toy][ngram]") {
  const toy::NGramModel target({.vocab = 12, .order = 2, .concentration = 0.5, .seed = 3});
  std::vector<float> a(12), b(12), c(12);
  const std::vector<Token> ctx1 = {4, 5, 6}, ctx2 = {9, 5, 6}, ctx3 = {4, 6, 5};
  target.next_probabilities(ctx1, a);
  target.next_probabilities(ctx2, b);  // same last two tokens
  target.next_probabilities(ctx3, c);
  check_probability_row<float>("row", a);
  CHECK(a == b);
  CHECK(a != c);
  target.next_probabilities(std::span<const Token>{}, c);  // empty context is allowed
  check_probability_row<float>("row", c);
}

TEST_CASE("n-gram drafts diverge with noise", "[toy][ngram]") {
  const toy::NGramModel target({.vocab = 32, .order = 1, .seed = 11});
  const auto near = toy::NGramModel::draft_of(target, 0.1f);
  const auto far = toy::NGramModel::draft_of(target, 0.9f);
  const auto same = toy::NGramModel::draft_of(target, 0.0f);
  std::vector<float> t(32), n(32), f(32), s(32);
  const std::vector<Token> ctx = {3};
  target.next_probabilities(ctx, t);
  near.next_probabilities(ctx, n);
  far.next_probabilities(ctx, f);
  same.next_probabilities(ctx, s);
  CHECK(tv_distance<float>(t, s) == Approx(0.0).margin(1e-6));
  CHECK(tv_distance<float>(t, n) < tv_distance<float>(t, f));
  CHECK_THROWS_WITH(toy::NGramModel::draft_of(target, 1.5f), Catch::Contains("noise"));
  CHECK_THROWS_WITH(toy::NGramModel({.vocab = 0}), Catch::Contains("vocab"));
}
