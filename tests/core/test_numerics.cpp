// SPDX-License-Identifier: MIT
#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "specdec/core/numerics.hpp"

using namespace specdec;
using Catch::Detail::Approx;

TEST_CASE("log_sum_exp is stable for large and -inf inputs", "[core][numerics]") {
  const std::vector<float> big = {1000.0f, 1000.0f};
  CHECK(log_sum_exp<float>(big) == Approx(1000.0f + std::log(2.0f)));
  const std::vector<float> with_inf = {kNegInf, 0.0f};
  CHECK(log_sum_exp<float>(with_inf) == Approx(0.0f).margin(1e-7));
  const std::vector<float> all_inf = {kNegInf, kNegInf};
  CHECK(log_sum_exp<float>(all_inf) == kNegInf);
  CHECK_THROWS_AS(log_sum_exp<float>(std::span<const float>{}), Error);
}

TEST_CASE("softmax and log_softmax agree with the definition", "[core][numerics]") {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, kNegInf};
  std::vector<float> p(4), lp(4);
  softmax<float>(logits, p);
  log_softmax<float>(logits, lp);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int i = 0; i < 3; ++i) {
    CHECK(p[i] == Approx(std::exp(i + 1.0) / z));
    CHECK(lp[i] == Approx(i + 1.0 - std::log(z)));
  }
  CHECK(p[3] == 0.0f);  // exactly: a banned token can never be drawn
  CHECK(lp[3] == kNegInf);
  softmax<float>(logits, p, 0.5f);
  const double z2 = std::exp(2.0) + std::exp(4.0) + std::exp(6.0);
  CHECK(p[2] == Approx(std::exp(6.0) / z2));
}

TEST_CASE("softmax accepts half and bfloat16 rows and computes in float", "[core][numerics]") {
  const std::vector<Eigen::half> h = {Eigen::half(0.0f), Eigen::half(1.0f)};
  const std::vector<Eigen::bfloat16> b = {Eigen::bfloat16(0.0f), Eigen::bfloat16(1.0f)};
  std::vector<float> ph(2), pb(2);
  softmax<Eigen::half>(h, ph);
  softmax<Eigen::bfloat16>(b, pb);
  CHECK(ph[1] == Approx(std::exp(1.0) / (1.0 + std::exp(1.0))));
  CHECK(pb[1] == Approx(ph[1]));
}

TEST_CASE("softmax rejects bad input", "[core][numerics]") {
  const std::vector<float> logits = {1.0f, 2.0f};
  std::vector<float> wrong(3), out(2);
  CHECK_THROWS_WITH(softmax<float>(logits, wrong), Catch::Contains("probabilities"));
  CHECK_THROWS_WITH(softmax<float>(logits, out, 0.0f), Catch::Contains("temperature"));
  const std::vector<float> all_inf = {kNegInf, kNegInf};
  CHECK_THROWS_WITH(softmax<float>(all_inf, out), Catch::Contains("logits"));
}

TEST_CASE("log1mexp is accurate on both branches", "[core][numerics]") {
  // Reference: log(-expm1(a)) is exact enough near 0; far from 0 use the series
  // log(1 - e^a) = -sum_k e^(ka) / k, which has no cancellation.
  const auto reference = [](double a) {
    if (a > -1.0) return std::log(-std::expm1(a));
    double sum = 0.0;
    for (int k = 1; k < 60; ++k) sum -= std::exp(k * a) / k;
    return sum;
  };
  for (double a : {-1e-10, -1e-3, -0.5, -0.7, -1.0, -20.0, -100.0}) {
    CHECK(log1mexp(a) == Approx(reference(a)).epsilon(1e-13));
    if (a >= -80.0) {  // below that the float result is subnormal
      CHECK(log1mexp(static_cast<float>(a)) == Approx(reference(a)).epsilon(1e-5));
    }
  }
  CHECK(log1mexp(0.0) == -std::numeric_limits<double>::infinity());
}

TEST_CASE("log_sub_exp is the log of a difference", "[core][numerics]") {
  CHECK(log_sub_exp(std::log(0.5f), std::log(0.2f)) == Approx(std::log(0.3f)));
  CHECK(log_sub_exp(0.0f, 0.0f) == kNegInf);
  CHECK(log_sub_exp(-1.0f, kNegInf) == -1.0f);
}

TEST_CASE("entropy and total variation", "[core][numerics]") {
  const std::vector<float> uniform4(4, 0.25f);
  CHECK(entropy<float>(uniform4) == Approx(std::log(4.0)));
  const std::vector<float> one_hot = {0.0f, 1.0f, 0.0f};
  CHECK(entropy<float>(one_hot) == Approx(0.0).margin(1e-7));
  const std::vector<float> a = {0.25f, 0.75f}, b = {0.5f, 0.5f};
  CHECK(tv_distance<float>(a, b) == Approx(0.25));
  CHECK(detail::row_positive_mass(a.data(), b.data(), 2) == Approx(0.25));
  const std::vector<float> c = {1.0f};
  CHECK_THROWS_WITH(tv_distance<float>(a, c), Catch::Contains("b"));
}

TEST_CASE("row functions match the Eigen host functions", "[core][numerics]") {
  const std::vector<float> logits = {0.3f, -1.2f, 2.5f, 0.0f, 2.5f};
  std::vector<float> host(5), kernel(5);
  softmax<float>(logits, host, 0.7f);
  detail::row_softmax(logits.data(), kernel.data(), 5, 0.7f);
  for (int i = 0; i < 5; ++i) CHECK(kernel[i] == Approx(host[i]));
  CHECK(detail::row_argmax(logits.data(), 5) == 2);  // ties go to the lowest index
  CHECK(detail::row_log_sum_exp(logits.data(), 5) == Approx(log_sum_exp<float>(logits)));
  CHECK(detail::row_entropy(host.data(), 5) == Approx(entropy<float>(host)));
}
