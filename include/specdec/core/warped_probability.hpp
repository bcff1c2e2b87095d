// SPDX-License-Identifier: MIT
// A warped row as a handful of numbers (WarpStats) and the warped probability of one entry
// recomputed from its logit: the host's row writers (core/warped_row.hpp) and the CUDA kernels
// compute every entry this way. Nothing here formats or allocates, so nvcc compiles it for the
// device.
#pragma once

#include <cstdint>

#include "specdec/core/exponential.hpp"
#include "specdec/core/tile_combine.hpp"
#include "specdec/core/warp_rows.hpp"

namespace specdec::detail {

/// The statistics of one warped row. An entry's warped probability is warped_probability().
struct WarpStats {
  float inv_temperature = 1.0f;  // z = logit * inv_temperature
  std::int64_t greedy = -1;      // >= 0: the row is one-hot on this token
  float max = 0.0f;              // largest logit kept by top-k
  float inv_sum = 1.0f;          // 1 / sum of exp(z - max) over the top-k survivors
  float top_k_value = 0.0f;      // logit of the k-th entry kept
  std::int64_t top_k_last = -1;  // its id; -1: top-k off
  float top_p_value = 0.0f;      // probability of the last entry of the nucleus
  std::int64_t top_p_last = -1;  // its id; -1: top-p off
  float inv_top_p_kept = 1.0f;
  float min_p_threshold = 0.0f;  // > 0: min-p on
  float inv_min_p_kept = 1.0f;
};

/// Probability after temperature, top-k and the softmax (before top-p and min-p).
SPECDEC_ENTRY_INLINE float softmax_probability(const WarpStats& s, float logit, std::int64_t id) {
  if (s.top_k_last >= 0 && below_cut(logit, id, s.top_k_value, s.top_k_last)) return 0.0f;
  return exp_flush(scaled_exponent(logit, s.max, s.inv_temperature)) * s.inv_sum;
}

/// The top-p step of the warp on softmax probability p of token `id`: p rescaled to the nucleus,
/// or 0 outside it (p itself without top-p). What min-p then compares with its threshold.
SPECDEC_ENTRY_INLINE float nucleus_probability(const WarpStats& s, float p, std::int64_t id) {
  if (s.top_p_last < 0) return p;
  return below_cut(p, id, s.top_p_value, s.top_p_last) ? 0.0f : p * s.inv_top_p_kept;
}

/// The top-p and min-p steps of the warp on softmax probability p of token `id` (not greedy).
SPECDEC_ENTRY_INLINE float cut_probability(const WarpStats& s, float p, std::int64_t id) {
  p = nucleus_probability(s, p, id);
  if (s.min_p_threshold > 0.0f) p = p < s.min_p_threshold ? 0.0f : p * s.inv_min_p_kept;
  return p;
}

/// The warped probability of token `id` whose logit is `logit`.
SPECDEC_ENTRY_INLINE float warped_probability(const WarpStats& s, float logit, std::int64_t id) {
  if (s.greedy >= 0) return id == s.greedy ? 1.0f : 0.0f;
  return cut_probability(s, softmax_probability(s, logit, id), id);
}

}  // namespace specdec::detail
