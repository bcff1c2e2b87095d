// SPDX-License-Identifier: MIT
// A warped row as a handful of numbers (WarpStats) and the warped probability of one entry
// recomputed from its logit: the host's row writers (core/warp/row_writer.hpp) and the CUDA kernels
// compute every entry this way. Nothing here formats or allocates, so nvcc compiles it for the
// device.
#pragma once

#include <cstdint>

#include "specdec/core/exponential.hpp"
#include "specdec/core/tile_combine.hpp"
#include "specdec/core/warp/cut_rules.hpp"

namespace specdec::detail {

/// The statistics of one warped row. An entry's warped probability is warped_probability().
/// The same struct on both backends: the CUDA kernels keep it in device and shared memory
/// (RowStats adds whether the row is invalid), so it has no padding, 32-bit ids (as tokens are)
/// and no default member initializers (shared memory runs no constructor): uncut() starts one.
struct WarpStats {
  float inv_temperature;    // z = logit * inv_temperature
  float max;                // largest logit kept by top-k
  float inv_sum;            // 1 / sum of exp(z - max) over the top-k survivors
  std::int32_t greedy;      // >= 0: the row is one-hot on this token
  float top_p_value;        // probability of the last entry of the nucleus
  std::int32_t top_p_last;  // its id; -1: top-p off
  float inv_top_p_kept;
  float top_k_value;        // logit of the k-th entry kept
  std::int32_t top_k_last;  // its id; -1: top-k off
  float min_p_threshold;    // > 0: min-p on
  float inv_min_p_kept;

  /// Temperature 1, no cut, not greedy: where warp_stats starts.
  SPECDEC_HOST_DEVICE static constexpr WarpStats uncut() {
    return {1.0f, 0.0f, 1.0f, -1, 0.0f, -1, 1.0f, 0.0f, -1, 0.0f, 1.0f};
  }
};
static_assert(sizeof(WarpStats) == 11 * 4, "WarpStats has no padding");

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

/// 1 + 2^-16: exp_flush is nondecreasing to within 1 + 2^-23.6 over [-88, 0] (checked on every
/// float there; tests/core/test_warp_stats.cpp keeps a sample), so a softmax probability is at
/// most its row's value at a larger logit times this.
inline constexpr float kMonotoneMargin = 1.0f + 0x1p-16f;

/// Whether every entry of logit at most `logit` warps to +0, whatever its id (not greedy): cut by
/// top-k, or its probability, at most the one at `logit` with the margin, cut by top-p or min-p
/// (id 0 keeps a tie). Lets a pass skip the entries of a tile whose largest logit it knows.
SPECDEC_ENTRY_INLINE bool cuts_all_up_to(const WarpStats& s, float logit) {
  if (s.greedy >= 0) return false;
  if (s.top_k_last >= 0 && logit < s.top_k_value) return true;
  const float p = softmax_probability(s, logit, 0);
  return p > 0.0f && cut_probability(s, mul_rn(p, kMonotoneMargin), 0) == 0.0f;
}

}  // namespace specdec::detail
