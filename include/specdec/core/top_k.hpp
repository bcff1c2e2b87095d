// SPDX-License-Identifier: MIT
// The top-k selection: the k largest entries of a row (ties to the lowest id), as a cut (RowCut).
// The one selection of the warp's top-k: the statistics path (core/warp/logit_stats.hpp) and the
// probability path (keep_top_k) both call select_top_k.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "specdec/core/key_range.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/row_gather.hpp"
#include "specdec/core/tile_sum.hpp"
#include "specdec/core/warp/cut_rules.hpp"

namespace specdec::detail {

/// Top-k of z (the k largest, ties to the lowest id; 1 <= k < n) in one read of the row that also
/// checks it: returns false (and cuts nothing) when the row holds a NaN or +inf or no finite
/// entry, else sets `cut` and leaves the k kept ids sorted by id in ids[0, k). A long row is
/// gathered behind a gate from a sample of 32 runs spread over it (its 3k n / 2048-th largest
/// value, so the gate keeps about three times k) and the gathered entries narrowed with
/// nth_element; a row too short for that, or a gate that kept fewer than k, is gathered behind a
/// running threshold instead. `values` is scratch of n + kScratchSlack floats.
template <class T>
bool select_top_k(const T* logits, std::int64_t n, std::int64_t k, std::int32_t* ids, float* values,
                  RowCut& cut) {
  const auto z = [=](std::int32_t i) { return to_float(logits[i]); };
  const auto better = [&](std::int32_t a, std::int32_t b) {
    const float za = z(a), zb = z(b);
    return za > zb || (za == zb && a < b);
  };
  std::int64_t m = 0;
  KeyRange range;
  constexpr std::int64_t kSample = 2048;
  if (n >= 8 * kSample && k <= n / 256) {
    // 32 runs of 64 consecutive entries spread over the row: 128 cache lines, not 2048.
    constexpr std::int64_t kRun = 64;
    float sample[kSample];
    const std::int64_t stride = n / (kSample / kRun);
    KeyRange sampled;
    for (std::int64_t j = 0; j < kSample; ++j) {
      sample[j] = z(static_cast<std::int32_t>(j / kRun * stride + j % kRun));
    }
    sampled.add(sample, kSample);
    if (!sampled.invalid()) {  // a NaN would break the ordering
      const std::int64_t rank = std::min(kSample, 3 * k * kSample / n + 1);
      float gate;
      if (rank <= 16) {
        // The rank-th largest by insertion into a short sorted list (most entries fail one test).
        float best[16];
        std::int64_t held = 0;
        for (const float x : sample) {
          if (held == rank && !(x > best[rank - 1])) continue;
          std::int64_t at = held < rank ? held++ : rank - 1;
          for (; at > 0 && best[at - 1] < x; --at) best[at] = best[at - 1];
          best[at] = x;
        }
        gate = best[rank - 1];
      } else {
        std::nth_element(sample, sample + (rank - 1), sample + kSample, std::greater<>());
        gate = sample[rank - 1];
      }
      m = gather_at_least<true>(logits, n, gate, ids, values, nullptr, &range);
      if (range.invalid()) return false;
    }
  }
  if (m < k) {
    // A small buffer: each narrowing raises the threshold, so few entries are gathered after it.
    const std::int64_t cap = std::min(n, std::max<std::int64_t>(4 * k, 256));
    float threshold = kNegInf;
    m = 0;
    const auto visit = [&](std::int64_t i) {
      if (!(z(static_cast<std::int32_t>(i)) >= threshold)) return;
      ids[m++] = static_cast<std::int32_t>(i);
      if (m == cap) {
        std::nth_element(ids, ids + (k - 1), ids + m, better);
        threshold = z(ids[k - 1]);
        m = k;
      }
    };
    // Blocks whose largest logit is below the running threshold are skipped whole (the block's
    // keys are a vectorised integer reduction, which also checks the row).
    range = KeyRange{};
    std::int64_t b = 0;
    for (; b + kSumLanes <= n; b += kSumLanes) {
      KeyRange block;
      key_range(logits + b, kSumLanes, block.best, block.worst);
      range.best = std::max(range.best, block.best);
      range.worst = std::min(range.worst, block.worst);
      if (block.invalid() || !(from_signed_order_key(block.best) >= threshold)) continue;
      for (int j = 0; j < kSumLanes; ++j) visit(b + j);
    }
    range.add(logits + b, n - b);
    if (range.invalid()) return false;
    for (; b < n; ++b) visit(b);
  }
  std::nth_element(ids, ids + (k - 1), ids + m, better);
  cut = {z(ids[k - 1]), ids[k - 1]};
  std::sort(ids, ids + k);
  return true;
}

/// Keeps the `k` largest entries of z (ties to the lowest id) and sets the rest to `fill`; z holds
/// no NaN or +inf. `ids` and `values` have room for n + kScratchSlack entries.
inline void keep_top_k(float* z, std::int64_t n, std::int64_t k, float fill, std::int32_t* ids,
                       float* values) {
  RowCut cut;
  if (k <= 0 || k >= n || !select_top_k(z, n, k, ids, values, cut)) return;
  for (std::int64_t i = 0; i < n; ++i) {
    if (below_cut(z[i], i, cut.value, cut.last)) z[i] = fill;
  }
}

}  // namespace specdec::detail
