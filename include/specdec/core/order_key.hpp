// SPDX-License-Identifier: MIT
// The order-preserving keys of floats and doubles, shared by the CPU row checks and the CUDA
// threshold searches: a < b <=> order_key(a) < order_key(b) for every non-NaN pair, and
// order_key(-0.0f) == order_key(+0.0f), as the two compare equal. Plain SPECDEC_HOST_DEVICE code.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/scalar.hpp"

namespace specdec::detail {

/// Negative values have their bits flipped, the others their sign bit set; -0 is folded onto +0
/// first, so top-k never splits a tie between the two zeros.
SPECDEC_HOST_DEVICE std::uint32_t order_key(float x) {
  const std::uint32_t bits = x == 0.0f ? 0u : float_bits(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

/// The float's bits as a signed integer with the floats' order (-0 below +0, NaNs beyond the
/// infinities): integer maxima and minima vectorise where float ones do not.
SPECDEC_HOST_DEVICE std::int32_t signed_order_key(float x) {
  const auto bits = static_cast<std::int32_t>(float_bits(x));
  return bits ^ ((bits >> 31) & 0x7fffffff);
}
SPECDEC_HOST_DEVICE float from_signed_order_key(std::int32_t key) {
  return bits_float(static_cast<std::uint32_t>(key ^ ((key >> 31) & 0x7fffffff)));
}
/// signed_order_key(+inf); -inf's is -kInfKey - 1.
inline constexpr std::int32_t kInfKey = 0x7f800000;

/// order_key for doubles (the CUDA beam selection ranks candidate scores by it).
SPECDEC_HOST_DEVICE std::uint64_t order_key64(double x) {
  const std::uint64_t bits = x == 0.0 ? 0u : double_bits(x);
  return (bits >> 63) != 0u ? ~bits : (bits | (std::uint64_t{1} << 63));
}

}  // namespace specdec::detail
