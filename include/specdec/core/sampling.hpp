// SPDX-License-Identifier: MIT
// Drawing one token from a row with one uniform (inverse CDF). Draws: exactly one uniform.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "specdec/config.hpp"
#include "specdec/core/inverse_cdf.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"

namespace specdec {
namespace detail {

/// The inverse-CDF rule (core/inverse_cdf.hpp) in float on non-negative `weights` whose sum is
/// `total` (any positive scale: the row need not be normalised); -1 when no weight is positive.
SPECDEC_HOST_DEVICE std::int64_t sample_weights(const float* weights, std::int64_t n, float total,
                                                float u) {
  const auto value = [=](std::int64_t i) { return weights[i]; };
  float running = 0.0f;
  const std::int64_t found = inverse_cdf_scan(value, 0, n, running, u * total);
  return found >= 0 ? found : last_positive(value, 0, n, -1);
}

}  // namespace detail

/// One token from a probability row, by inverse CDF with the uniform u in (0, 1): the library's
/// own draw (detail::sample_row, sums in double), so the token a verifier would sample from the
/// same row and uniform.
inline Token sample(std::span<const float> probabilities, float u) {
  check_probability_row("probabilities", probabilities);
  if (!(u > 0.0f && u < 1.0f)) detail::fail("u", "{} is not strictly inside (0, 1)", u);
  return detail::sample_row(probabilities.data(), static_cast<std::int64_t>(probabilities.size()),
                            u);
}

/// One index drawn from non-negative `weights` that need not sum to 1 (the inverse CDF of
/// weights / their sum at the uniform u in (0, 1)); -1 when no weight is positive. As `sample`
/// draws: sample_from_weights(row, u) == sample(row, u) for a probability row.
inline std::int64_t sample_from_weights(std::span<const float> weights, float u) {
  float total = 0.0f;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] >= 0.0f) || std::isinf(weights[i])) {
      detail::fail(ArgName("weights", static_cast<std::int64_t>(i)),
                   "{} is not a finite non-negative weight", weights[i]);
    }
    total += weights[i];
  }
  if (!(u > 0.0f && u < 1.0f)) detail::fail("u", "{} is not strictly inside (0, 1)", u);
  if (!(total > 0.0f)) return -1;
  return detail::sample_row(weights.data(), static_cast<std::int64_t>(weights.size()), u);
}

}  // namespace specdec
