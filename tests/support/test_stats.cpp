// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <vector>

#include "support/stats.hpp"

using namespace specdec::test;
using Catch::Detail::Approx;

TEST_CASE("chi-square p-values match published tables", "[support][stats]") {
  // Critical values: P(X >= x) for the chi-square distribution (standard tables).
  CHECK(chi_square_p_value(3.841458820694124, 1) == Approx(0.05).epsilon(1e-9));
  CHECK(chi_square_p_value(6.634896601021214, 1) == Approx(0.01).epsilon(1e-9));
  CHECK(chi_square_p_value(18.307038053275146, 10) == Approx(0.05).epsilon(1e-9));
  CHECK(chi_square_p_value(124.34211340400407, 100) == Approx(0.05).epsilon(1e-8));
  CHECK(chi_square_p_value(2.0, 2) == Approx(std::exp(-1.0)).epsilon(1e-12));
  CHECK(chi_square_p_value(0.0, 3) == 1.0);
}

TEST_CASE("regularised incomplete gamma on both branches", "[support][stats]") {
  // Q(1, x) = exp(-x); Q(0.5, x) = erfc(sqrt(x)).
  for (double x : {0.1, 1.0, 2.5, 10.0, 40.0}) {
    CHECK(regularized_gamma_q(1.0, x) == Approx(std::exp(-x)).epsilon(1e-10));
    CHECK(regularized_gamma_q(0.5, x) == Approx(std::erfc(std::sqrt(x))).epsilon(1e-9));
  }
}

TEST_CASE("chi_square_test pools small bins and flags impossible outcomes", "[support][stats]") {
  const std::vector<std::int64_t> exact = {250, 250, 500};
  const std::vector<double> probs = {0.25, 0.25, 0.5};
  const auto r = chi_square_test(exact, probs);
  CHECK(r.statistic == Approx(0.0).margin(1e-12));
  CHECK(r.df == 2);
  CHECK(r.p_value == Approx(1.0));
  const std::vector<std::int64_t> biased = {400, 100, 500};
  CHECK(chi_square_test(biased, probs).p_value < 1e-10);
  const std::vector<std::int64_t> impossible = {500, 499, 1};
  const std::vector<double> with_zero = {0.5, 0.5, 0.0};
  CHECK(chi_square_test(impossible, with_zero).p_value == 0.0);
  const std::vector<std::int64_t> small = {995, 3, 2};
  const std::vector<double> tiny = {0.995, 0.003, 0.002};
  CHECK(chi_square_test(small, tiny).df == 1);  // the two small bins are pooled
}

TEST_CASE("tv distance and tuple enumeration", "[support][stats]") {
  const std::vector<std::int64_t> counts = {30, 70};
  const std::vector<double> p = {0.5, 0.5};
  CHECK(tv_distance<double>(counts, p) == Approx(0.2));
  int all = 0, distinct = 0;
  for_each_tuple(3, 2, [&](std::span<const int>) { ++all; });
  for_each_distinct_tuple(3, 2, [&](std::span<const int>) { ++distinct; });
  CHECK(all == 9);
  CHECK(distinct == 6);
}
