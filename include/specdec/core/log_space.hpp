// SPDX-License-Identifier: MIT
// Scalar log-space helpers (-inf, log(1 - exp(a)), log(exp(a) - exp(b))): plain SPECDEC_HOST_DEVICE
// code with no Eigen or fmt, compiled for the host and by nvcc.
#pragma once

#include <cmath>
#include <limits>

#include "specdec/config.hpp"

namespace specdec {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// log(1 - exp(a)) for a <= 0, accurate near 0 and for very negative a (Maechler 2012).
SPECDEC_HOST_DEVICE float log1mexp(float a) {
  return a > -0.693147180559945f ? logf(-expm1f(a)) : log1pf(-expf(a));
}
SPECDEC_HOST_DEVICE double log1mexp(double a) {
  return a > -0.693147180559945 ? log(-expm1(a)) : log1p(-exp(a));
}

/// log(exp(a) - exp(b)) for a >= b; -inf when a == b (the log-space residual of docs/algorithms.md
/// §2.5).
SPECDEC_HOST_DEVICE float log_sub_exp(float a, float b) {
  if (b == kNegInf) return a;
  if (!(a > b)) return kNegInf;
  return a + log1mexp(b - a);
}

}  // namespace specdec
