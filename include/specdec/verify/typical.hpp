// SPDX-License-Identifier: MIT
// Typical acceptance (Medusa; docs/algorithms.md §1.7). Deterministic and not lossless.
#pragma once

#include <cmath>

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// The most the threshold of typical_row can be for a row of probabilities summing to at most
/// 1 + 1e-3 (check_probability_row's tolerance): its entropy is at least -1.001 ln 1.001 (only an
/// entry above 1 adds a negative term), so exp(-H) is below 1.0011; 1.002 leaves room for
/// rounding.
SPECDEC_HOST_DEVICE float typical_threshold_bound(float epsilon, float delta) {
  return fminf(epsilon, delta * 1.002f);
}

/// Accepts the first candidate x with target(x) > min(epsilon, delta * exp(-H(target)));
/// otherwise the correction is drawn from `target`. Draws: draw `count` the correction (the tests
/// draw nothing). `target` is the warped row. A first candidate above every threshold the row's
/// entropy allows is accepted without reading the row.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict typical_row(const T* target, std::int64_t vocab,
                                            const Token* candidates, std::int32_t count,
                                            float epsilon, float delta, const U& uniforms) {
  if (count > 0 && to_float(target[candidates[0]]) > typical_threshold_bound(epsilon, delta)) {
    return {0, candidates[0]};
  }
  const float h = row_entropy(target, vocab);
  const float threshold = fminf(epsilon, delta * expf(-h));
  for (std::int32_t k = 0; k < count; ++k) {
    if (to_float(target[candidates[k]]) > threshold) return {k, candidates[k]};
  }
  return {-1, sample_row(target, vocab, uniforms.uniform(static_cast<std::uint32_t>(count)))};
}

}  // namespace detail

inline void check_typical_parameters(float epsilon, float delta) {
  detail::check_in_closed("epsilon", epsilon, 0.0f, 1.0f);
  if (!(delta >= 0.0f) || !std::isfinite(delta)) {
    detail::fail("delta", "{} must be finite and >= 0", delta);
  }
}

/// Typical acceptance on a warped target row (defaults epsilon = 0.3, delta = 0.09).
template <class T = float, UniformSource U>
NodeVerdict verify_typical(std::type_identity_t<std::span<const T>> target,
                           std::span<const Token> candidates, float epsilon, float delta,
                           const U& uniforms) {
  check_probability_row<T>("target", target);
  detail::check_count("candidates", candidates.size(), 1, 1u << 20);
  detail::check_tokens("candidates", candidates, static_cast<std::int64_t>(target.size()));
  check_typical_parameters(epsilon, delta);
  return detail::typical_row(target.data(), static_cast<std::int64_t>(target.size()),
                             candidates.data(), static_cast<std::int32_t>(candidates.size()),
                             epsilon, delta, uniforms);
}

}  // namespace specdec
