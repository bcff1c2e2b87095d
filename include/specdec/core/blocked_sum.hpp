// SPDX-License-Identifier: MIT
// The library's sum of a row of non-negative terms (probabilities, residual entries, entropy
// terms): a fixed order, so the result depends only on the row, and lanes, so it vectorises.
// Plain SPECDEC_HOST_DEVICE code (no Eigen, no fmt).
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/row_loop.hpp"

namespace specdec::detail {

inline constexpr int kBlockedSumLanes = 8;
inline constexpr std::int64_t kBlockedSumBlock = 1024;
inline constexpr int kBlockedSumGroup = 4;  // blocks summed side by side on the host

/// The float sum of block [b, e) (at most kBlockedSumBlock entries) of f: lane j adds f(i) for the
/// i = b + j mod 8 in order; the tail past the last whole 8 is added first, then lanes 0..7.
template <class F>
SPECDEC_HOST_DEVICE float block_sum(const F& f, std::int64_t b, std::int64_t e) {
  constexpr int kLanes = kBlockedSumLanes;
  float lanes[kLanes] = {};
  std::int64_t i = b;
  for (; i + kLanes <= e; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += f(i + j);
  }
  float block = 0.0f;
  const int tail = static_cast<int>(e - i);  // fewer than kLanes: a bound GCC can see
  for (int j = 0; j < tail; ++j) block += f(i + j);
  for (int j = 0; j < kLanes; ++j) block += lanes[j];
  return block;
}

/// block_sum of the blocks of [b, end) from b on, up to kBlockedSumGroup of them, into sums[];
/// returns how many. On the host, a group of whole blocks is summed side by side: one block's
/// 128 dependent additions per lane would bound the loop by the addition's latency.
template <class F>
SPECDEC_HOST_DEVICE SPECDEC_ROW_LOOP int block_sums(const F& f, std::int64_t b, std::int64_t end,
                                                   float* sums) {
  constexpr std::int64_t kBlock = kBlockedSumBlock;
#if defined(__GNUC__) && !defined(__CUDACC__)
  if (b + kBlockedSumGroup * kBlock <= end) {
    using Lanes = float __attribute__((vector_size(kBlockedSumLanes * sizeof(float))));
    Lanes lanes[kBlockedSumGroup] = {};
    for (std::int64_t i = 0; i < kBlock; i += kBlockedSumLanes) {
      for (int g = 0; g < kBlockedSumGroup; ++g) {
        const std::int64_t at = b + g * kBlock + i;
        lanes[g] += Lanes{f(at),     f(at + 1), f(at + 2), f(at + 3),
                          f(at + 4), f(at + 5), f(at + 6), f(at + 7)};
      }
    }
    for (int g = 0; g < kBlockedSumGroup; ++g) {
      float block = 0.0f;  // a whole block has no tail
      for (int j = 0; j < kBlockedSumLanes; ++j) block += lanes[g][j];
      sums[g] = block;
    }
    return kBlockedSumGroup;
  }
#endif
  int count = 0;
  for (; count < kBlockedSumGroup && b < end; ++count, b += kBlock) {
    sums[count] = block_sum(f, b, b + kBlock < end ? b + kBlock : end);
  }
  return count;
}

/// sum of f(i) for i in [begin, end): block_sum over blocks of 1024 elements (fp32 partial sums
/// in 8 independent lanes: vectorisable, no long serial dependency), blocks added in double.
template <class F>
SPECDEC_HOST_DEVICE double blocked_sum(const F& f, std::int64_t begin, std::int64_t end) {
  double total = 0.0;
  for (std::int64_t b = begin; b < end; b += kBlockedSumGroup * kBlockedSumBlock) {
    float sums[kBlockedSumGroup];
    const int count = block_sums(f, b, end, sums);
    for (int k = 0; k < count; ++k) total += sums[k];
  }
  return total;
}

}  // namespace specdec::detail
