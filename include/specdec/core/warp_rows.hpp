// SPDX-License-Identifier: MIT
// Row functions of the warp shared by the CPU (core/warp.hpp) and the CUDA warp kernel: the key a
// threshold search over probabilities compares, and the min-p cut. Plain SPECDEC_HOST_DEVICE code.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/order_key.hpp"

namespace specdec::detail {

/// The order key of a probability without its sign bit: the bits of p > 0, 0 for a zero (either
/// sign) or NaN. Probabilities are non-negative, so 31 bits order them and a threshold search over
/// them starts at bit 30.
SPECDEC_HOST_DEVICE std::uint32_t probability_key(float p) {
  return p > 0.0f ? order_key(p) & 0x7FFFFFFFu : 0u;
}

/// The min-p threshold of a probability row whose largest entry is `max_probability`: entries
/// below it are cut (set to 0) before the row is renormalised.
SPECDEC_HOST_DEVICE float min_p_threshold(float min_p, float max_probability) {
  return min_p * max_probability;
}

/// One entry of the min-p cut: p, or 0 when p is below the threshold.
SPECDEC_HOST_DEVICE float min_p_cut(float p, float threshold) { return p < threshold ? 0.0f : p; }

}  // namespace specdec::detail
