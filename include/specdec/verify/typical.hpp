// SPDX-License-Identifier: MIT
// Typical acceptance (Medusa; docs/algorithms.md §1.7). Deterministic and not lossless.
#pragma once

#include <cmath>

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// Accepts the first candidate x with target(x) > min(epsilon, delta * exp(-H(target)));
/// otherwise the correction is drawn from `target`. Draws: draw `count` the correction (the tests
/// draw nothing). `target` is the warped row.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict typical_row(const T* target, std::int64_t vocab,
                                            const Token* candidates, std::int32_t count,
                                            float epsilon, float delta, const U& uniforms) {
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
