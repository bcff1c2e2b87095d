// SPDX-License-Identifier: MIT
// Statistics for the distribution tests: chi-square goodness of fit with an exact p-value, TV
// distances, and enumeration of candidate tuples for small vocabularies.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <stdexcept>
#include <vector>

namespace specdec::test {

/// The p-value threshold of every statistical test in the suite. A correct implementation fails
/// one such test with probability 1e-6 (per test, with the fixed seeds: in practice never).
inline constexpr double kFalseFailureProbability = 1e-6;

/// The sample count of a Monte-Carlo test: `runs`, or an eighth of it in the sanitizer build, whose
/// run checks memory and undefined behaviour, not statistical power (the Release run keeps every
/// sample). The false-failure probability is the same either way: the thresholds are p-values.
constexpr std::uint32_t monte_carlo_runs(std::uint32_t runs) {
#if defined(SPECDEC_SANITIZED_BUILD)
  return runs / 8;
#else
  return runs;
#endif
}

/// Regularised upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a): series for x < a + 1,
/// Lentz's continued fraction otherwise.
inline double regularized_gamma_q(double a, double x) {
  if (a <= 0.0) throw std::invalid_argument("regularized_gamma_q: a must be > 0");
  if (x <= 0.0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::abs(term) < std::abs(sum) * 1e-16) break;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  constexpr double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

/// P(X >= statistic) for X ~ chi-square with `df` degrees of freedom.
inline double chi_square_p_value(double statistic, double df) {
  return regularized_gamma_q(df / 2.0, statistic / 2.0);
}

struct ChiSquare {
  double statistic = 0.0;
  int df = 0;
  double p_value = 1.0;
};

/// Pearson's goodness of fit of `counts` against `expected` probabilities. Bins with an expected
/// count below `min_expected` are pooled into one bin; a count in a bin of probability zero gives
/// p = 0 (an impossible outcome).
inline ChiSquare chi_square_test(std::span<const std::int64_t> counts,
                                 std::span<const double> expected, double min_expected = 5.0) {
  if (counts.size() != expected.size()) throw std::invalid_argument("chi_square_test: sizes");
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), 0LL));
  ChiSquare r;
  double pooled_count = 0.0, pooled_expected = 0.0;
  int bins = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    if (expected[i] <= 0.0) {
      if (counts[i] > 0) return {std::numeric_limits<double>::infinity(), 0, 0.0};
      continue;
    }
    if (e < min_expected) {
      pooled_count += static_cast<double>(counts[i]);
      pooled_expected += e;
      continue;
    }
    r.statistic += (counts[i] - e) * (counts[i] - e) / e;
    ++bins;
  }
  if (pooled_expected > 0.0) {
    r.statistic +=
        (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++bins;
  }
  r.df = std::max(bins - 1, 1);
  r.p_value = chi_square_p_value(r.statistic, r.df);
  return r;
}

inline ChiSquare chi_square_test(std::span<const std::int64_t> counts,
                                 std::span<const float> expected, double min_expected = 5.0) {
  std::vector<double> e(expected.begin(), expected.end());
  return chi_square_test(counts, e, min_expected);
}

/// TV distance between empirical frequencies and a distribution.
template <class T>
double tv_distance(std::span<const std::int64_t> counts, std::span<const T> expected) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), 0LL));
  double tv = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    tv += std::abs(static_cast<double>(counts[i]) / n - static_cast<double>(expected[i]));
  }
  return tv / 2.0;
}

/// Calls f(tuple) for every tuple in {0..vocab-1}^length, in lexicographic order.
inline void for_each_tuple(int vocab, int length,
                           const std::function<void(std::span<const int>)>& f) {
  std::vector<int> t(static_cast<std::size_t>(length), 0);
  for (;;) {
    f(t);
    int i = length - 1;
    while (i >= 0 && ++t[static_cast<std::size_t>(i)] == vocab)
      t[static_cast<std::size_t>(i--)] = 0;
    if (i < 0) return;
  }
}

/// Calls f(tuple) for every ordered tuple of `length` distinct values from {0..vocab-1}.
inline void for_each_distinct_tuple(int vocab, int length,
                                    const std::function<void(std::span<const int>)>& f) {
  for_each_tuple(vocab, length, [&](std::span<const int> t) {
    for (std::size_t i = 0; i < t.size(); ++i)
      for (std::size_t j = i + 1; j < t.size(); ++j)
        if (t[i] == t[j]) return;
    f(t);
  });
}

}  // namespace specdec::test
