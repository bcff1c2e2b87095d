// SPDX-License-Identifier: MIT
// Drawing one token from a row with one uniform (inverse CDF). Draws: exactly one uniform.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/config.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"

namespace specdec {
namespace detail {

/// The first index whose running sum of non-negative `weights` exceeds u * total, where `total` is
/// the weights' sum (any positive scale: the row need not be normalised). Rounding that runs past
/// the end falls back to the last positive weight, so a zero weight is never returned.
SPECDEC_HOST_DEVICE std::int64_t sample_weights(const float* weights, std::int64_t n, float total,
                                                float u) {
  const float threshold = u * total;
  float running = 0.0f;
  std::int64_t last_positive = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    if (weights[i] > 0.0f) {
      running += weights[i];
      last_positive = i;
      if (running > threshold) return i;
    }
  }
  return last_positive;
}

}  // namespace detail

/// One token from a probability row, by inverse CDF with the uniform u in (0, 1).
inline Token sample(std::span<const float> probabilities, float u) {
  check_probability_row("probabilities", probabilities);
  if (!(u > 0.0f && u < 1.0f)) detail::fail("u", "{} is not strictly inside (0, 1)", u);
  float total = 0.0f;
  for (float p : probabilities) total += p;
  return static_cast<Token>(detail::sample_weights(
      probabilities.data(), static_cast<std::int64_t>(probabilities.size()), total, u));
}

}  // namespace specdec
