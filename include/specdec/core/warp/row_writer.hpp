// SPDX-License-Identifier: MIT
// A warped row as a handful of numbers (WarpStats): verification needs the warped probability of a
// few drafted tokens, not whole rows. Any entry is recomputed from its logit with exactly the float
// operations that write_warped_row uses for the whole row (warp_logits writes rows that way). The
// statistics themselves are found by core/warp/logit_stats.hpp.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "specdec/core/exponential.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/row_loop.hpp"
#include "specdec/core/tile_sum.hpp"
#include "specdec/core/warp/cut_rules.hpp"
#include "specdec/core/warp/scratch.hpp"
#include "specdec/core/warp/stats.hpp"

namespace specdec::detail {

/// The row one-hot on `hot`.
inline void one_hot(float* out, std::int64_t n, std::int64_t hot) {
  std::fill(out, out + n, 0.0f);
  out[hot] = 1.0f;
}

/// Writes the whole warped row (the same values warped_probability gives entry by entry).
template <class T>
SPECDEC_ROW_LOOP void write_warped_row(const WarpStats& s, const T* logits, std::int64_t n,
                                       float* out) {
  if (s.greedy >= 0) return one_hot(out, n, s.greedy);
  const float inv_t = s.inv_temperature, max = s.max, inv_sum = s.inv_sum;
  if (s.top_k_last < 0 && s.top_p_last < 0 && !(s.min_p_threshold > 0.0f)) {
    for (std::int64_t i = 0; i < n; ++i) {
      out[i] = exp_flush(scaled_exponent(to_float(logits[i]), max, inv_t)) * inv_sum;
    }
    return;
  }
  if (s.top_k_last < 0 && s.top_p_last >= 0 && !(s.min_p_threshold > 0.0f)) {
    const float cut = s.top_p_value, inv_kept = s.inv_top_p_kept;
    // Up to the last id kept a tie with the cut stays, after it a tie goes: two loops without an
    // index comparison, so both vectorise.
    const std::int64_t split = std::min<std::int64_t>(n, s.top_p_last + 1);
    // Probabilities are >= +0, so their bits order as integers (integer selects vectorise
    // without SSE4.1, float ones do not).
    const auto cut_bits = std::bit_cast<std::int32_t>(cut);
    for (std::int64_t i = 0; i < split; ++i) {
      const float p = exp_flush(scaled_exponent(to_float(logits[i]), max, inv_t)) * inv_sum;
      out[i] = keep_if(std::bit_cast<std::int32_t>(p) >= cut_bits, p * inv_kept);
    }
    for (std::int64_t i = split; i < n; ++i) {
      const float p = exp_flush(scaled_exponent(to_float(logits[i]), max, inv_t)) * inv_sum;
      out[i] = keep_if(std::bit_cast<std::int32_t>(p) > cut_bits, p * inv_kept);
    }
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) out[i] = warped_probability(s, to_float(logits[i]), i);
}

/// The entries a cut row keeps among the candidates warp_stats left (`support` of them: ids
/// ascending in scratch.ids, and in scratch.values their softmax probabilities, unless min-p
/// rescaled them): their ids into kept_ids and their warped probabilities into kept, ascending;
/// returns their count. Whatever is drawn from or summed over the row is drawn or summed over
/// these alone (the rest are +0). A nucleus-only cut reads the probabilities the cut left.
template <class T>
std::int64_t kept_candidates(const WarpStats& s, const T* logits, const WarpScratch& scratch,
                             std::int64_t support, std::int32_t* kept_ids, float* kept) {
  const std::int32_t* ids = scratch.ids;
  const float* values = scratch.values;
  std::int64_t count = 0;
  if (s.top_k_last < 0 && s.top_p_last >= 0 && !(s.min_p_threshold > 0.0f)) {
    // warped_probability's top-p step on softmax_probability, which values[j] already is.
    for (std::int64_t j = 0; j < support; ++j) {
      const float p = below_cut(values[j], ids[j], s.top_p_value, s.top_p_last)
                          ? 0.0f
                          : values[j] * s.inv_top_p_kept;
      kept_ids[count] = ids[j];
      kept[count] = p;
      count += p > 0.0f ? 1 : 0;
    }
    return count;
  }
  for (std::int64_t j = 0; j < support; ++j) {
    const float p = warped_probability(s, to_float(logits[ids[j]]), ids[j]);
    kept_ids[count] = ids[j];
    kept[count] = p;
    count += p > 0.0f ? 1 : 0;
  }
  return count;
}

}  // namespace specdec::detail
