// SPDX-License-Identifier: MIT
// The inverse-CDF rule, one uniform u per token: the first index whose running sum of the positive
// entries exceeds the threshold u * total; when rounding runs past the end, the last positive
// index, so a zero entry is never returned. Every sampler of a row is built from these two scans
// (detail::sample_row below: sums in double, whole blocks skipped by their sums, the one the
// library draws with, `sample` included; detail::sample_weights in float for the drafters; the
// CUDA kernels' sample_block with thread chunks skipped by a prefix sum). Plain
// SPECDEC_HOST_DEVICE code.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/blocked_sum.hpp"
#include "specdec/core/scalar.hpp"
#include "specdec/core/token.hpp"

namespace specdec::detail {

/// Scans entries [begin, end) of value(.), adding the positive ones to `running`; returns the
/// first index where running > threshold, or -1.
template <class Sum, class Value>
SPECDEC_HOST_DEVICE std::int64_t inverse_cdf_scan(const Value& value, std::int64_t begin,
                                                  std::int64_t end, Sum& running, Sum threshold) {
  for (std::int64_t i = begin; i < end; ++i) {
    const float v = value(i);
    if (v > 0.0f) {
      running += v;
      if (running > threshold) return i;
    }
  }
  return -1;
}

/// The last index of [begin, end) with a positive value(.), or `none`.
template <class Value>
SPECDEC_HOST_DEVICE std::int64_t last_positive(const Value& value, std::int64_t begin,
                                               std::int64_t end, std::int64_t none) {
  for (std::int64_t i = end - 1; i >= begin; --i) {
    if (value(i) > 0.0f) return i;
  }
  return none;
}

/// One token from a non-negative row of any scale by the inverse-CDF rule with uniform u, summed
/// in double; 0 when no entry is positive. Whole blocks of 1024 entries are skipped by their
/// (vectorised) sums; the block holding the threshold is scanned.
template <class S>
SPECDEC_HOST_DEVICE Token sample_row(const S* row, std::int64_t n, float u) {
  constexpr std::int64_t kBlock = kBlockedSumBlock;
  const auto value = [=](std::int64_t i) { return to_float(row[i]); };
  const double threshold = u * blocked_sum(value, 0, n);
  double running = 0.0;
  for (std::int64_t group = 0; group < n; group += kBlockedSumGroup * kBlock) {
    float sums[kBlockedSumGroup];
    const int count = block_sums(value, group, n, sums);
    for (int k = 0; k < count; ++k) {
      const std::int64_t b = group + k * kBlock, e = b + kBlock < n ? b + kBlock : n;
      if (running + sums[k] <= threshold && e < n) {
        running += sums[k];
        continue;
      }
      const std::int64_t found = inverse_cdf_scan(value, b, e, running, threshold);
      if (found >= 0) return static_cast<Token>(found);
    }
  }
  return static_cast<Token>(last_positive(value, 0, n, 0));
}

}  // namespace specdec::detail
