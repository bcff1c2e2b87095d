// SPDX-License-Identifier: MIT
// The library's sum of a row of non-negative terms (probabilities, residual entries, entropy
// terms): a fixed order, so the result depends only on the row, and lanes, so it vectorises.
// Plain SPECDEC_HOST_DEVICE code (no Eigen, no fmt).
#pragma once

#include <cstdint>

#include "specdec/config.hpp"

namespace specdec::detail {

/// sum of f(i) for i in [begin, end): fp32 partial sums in 8 independent lanes over blocks of
/// 1024 elements (vectorisable, no long serial dependency), blocks added in double.
template <class F>
SPECDEC_HOST_DEVICE double blocked_sum(const F& f, std::int64_t begin, std::int64_t end) {
  constexpr int kLanes = 8;
  constexpr std::int64_t kBlock = 1024;
  double total = 0.0;
  for (std::int64_t b = begin; b < end; b += kBlock) {
    const std::int64_t e = b + kBlock < end ? b + kBlock : end;
    float lanes[kLanes] = {};
    std::int64_t i = b;
    for (; i + kLanes <= e; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] += f(i + j);
    }
    float block = 0.0f;
    const int tail = static_cast<int>(e - i);  // fewer than kLanes: a bound GCC can see
    for (int j = 0; j < tail; ++j) block += f(i + j);
    for (int j = 0; j < kLanes; ++j) block += lanes[j];
    total += block;
  }
  return total;
}

}  // namespace specdec::detail
