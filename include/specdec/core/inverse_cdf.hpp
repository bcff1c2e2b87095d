// SPDX-License-Identifier: MIT
// The inverse-CDF rule, one uniform u per token: the first index whose running sum of the positive
// entries exceeds the threshold u * total; when rounding runs past the end, the last positive
// index, so a zero entry is never returned. Every sampler of a row is built from these two scans
// (core/sampling.hpp in float, detail::sample_row in double with whole blocks skipped by their
// sums, the CUDA kernels' sample_block with thread chunks skipped by a prefix sum). Plain
// SPECDEC_HOST_DEVICE code.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"

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

}  // namespace specdec::detail
