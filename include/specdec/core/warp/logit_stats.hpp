// SPDX-License-Identifier: MIT
// The statistics of a warped row of logits (WarpStats: max, 1/sum, the top-k and top-p cuts as a
// value and the last id kept, 1/kept mass, the min-p threshold), found in one read of the row
// (core/tile_sum.hpp) plus a pass over the pruned candidates, and warp_logits's row written from
// them. The cuts are the warp's one top-k (core/top_k.hpp) and one top-p (core/top_p.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "specdec/core/exponential.hpp"
#include "specdec/core/key_range.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/row_gather.hpp"
#include "specdec/core/tile_sum.hpp"
#include "specdec/core/top_k.hpp"
#include "specdec/core/top_p.hpp"
#include "specdec/core/warp/params.hpp"
#include "specdec/core/warp/cut_rules.hpp"
#include "specdec/core/warp/scratch.hpp"
#include "specdec/core/warp/row_writer.hpp"

namespace specdec::detail {

/// Bytes of scratch warp_stats needs for a row of `vocab` (warp_workspace_size).
inline std::size_t warp_stats_scratch_size(std::int64_t vocab) {
  return warp_workspace_size(vocab);
}

/// A guess at a gate for the nucleus from a strided sample of the row: the logit below which the
/// sample puts (1 - top_p) / 2 of the mass, less two bins of margin; -inf for a short row. The
/// mass below is the well-sampled part (many small entries; the few heavy ones a sample misses
/// are all above), measured against the row's own sum. Only a guess: the caller checks that what
/// it gathers holds the nucleus.
template <class T>
float nucleus_gate_estimate(const T* logits, std::int64_t n, float top_p, float max, float inv_t,
                            float inv_sum) {
  constexpr std::int64_t kSample = 1024;
  constexpr int kBins = 128;
  constexpr float kBinWidth = 0.25f;  // in z = (logit - max) / T; the last bin takes z <= -32
  if (n < 8 * kSample) return kNegInf;
  const std::int64_t stride = n / kSample;
  float z[kSample], term[kSample];
  for (std::int64_t k = 0; k < kSample; ++k) {
    z[k] = scaled_exponent(to_float(logits[k * stride + stride / 2]), max, inv_t);
  }
  for (std::int64_t k = 0; k < kSample; ++k) term[k] = exp_flush(z[k]);
  double mass[kBins] = {};
  for (std::int64_t k = 0; k < kSample; ++k) {
    mass[z[k] > -kBins * kBinWidth ? static_cast<int>(-z[k] / kBinWidth) : kBins - 1] += term[k];
  }
  const double weight = static_cast<double>(n) / kSample * static_cast<double>(inv_sum);
  const double allowance = 0.5 * (1.0 - static_cast<double>(top_p));
  double below = 0.0;
  for (int b = kBins - 1; b >= 1; --b) {
    below += weight * mass[b];
    if (below > allowance) {
      return b + 2 < kBins ? max - static_cast<float>(b + 2) * kBinWidth / inv_t : kNegInf;
    }
  }
  return max - kBinWidth / inv_t;
}

/// The top-p and min-p cuts of statistics `s` whose softmax part (inverse temperature, max,
/// 1/sum) is known, for warp_stats: `top_k` with its m candidates in scratch.ids (ascending), or
/// without top-k the row's tiles in scratch.tiles (tile_pass), which let the gathers skip tiles.
template <class T>
void cut_statistics(const Warp& w, const T* logits, std::int64_t n, WarpScratch scratch, bool top_k,
                    std::int64_t m, WarpStats& s, std::int64_t* support) {
  std::int32_t* ids = scratch.ids;
  float* values = scratch.values;
  const float inv_t = s.inv_temperature;
  const bool top_p = w.top_p < 1.0f;
  const bool min_p = w.min_p > 0.0f;
  const bool small = n <= kSmallRow;
  if (!top_p && !min_p) {
    if (support != nullptr && top_k) *support = m;
    return;
  }

  // Candidates with their softmax probabilities: without top-k, those that can matter. A token
  // below (1 - top_p) / n can never be in the nucleus (all of them hold less than 1 - top_p); one
  // below min_p times the top probability is cut by min-p. Half the bound leaves room for rounding.
  bool cut_found = false;  // the nucleus was cut on an estimated gate's candidates
  const float max = s.max, inv_sum = s.inv_sum;
  // The one top-p selection over the m candidates in ids / values.
  RowCut nucleus_cut;
  double nucleus_mass = 0.0;
  const auto nucleus = [&](std::int64_t count) {
    return select_nucleus(ids, values, count, w.top_p, scratch.bucket, scratch.work_values,
                          nucleus_cut, nucleus_mass);
  };
  const auto to_probabilities = [&] {
    for (std::int64_t j = 0; j < m; ++j) {
      values[j] = exp_flush(scaled_exponent(values[j], max, inv_t)) * inv_sum;
    }
  };
  if (top_k) {
    std::int64_t kept = 0;
    for (std::int64_t j = 0; j < m; ++j) {
      const float p = exp_flush(scaled_exponent(to_float(logits[ids[j]]), max, inv_t)) * inv_sum;
      ids[kept] = ids[j];
      values[kept] = p;
      kept += p > 0.0f ? 1 : 0;
    }
    m = kept;
  } else {
    double bound = 0.0;  // in probability
    if (top_p && !small) {
      bound = 0.5 * (1.0 - static_cast<double>(w.top_p)) / static_cast<double>(n);
    }
    if (!top_p && min_p) bound = 0.5 * static_cast<double>(w.min_p) * static_cast<double>(inv_sum);
    // p >= bound  <=>  logit >= max + temperature * log(bound * sum), less a margin for rounding.
    const float gate =
        bound > 0.0 ? static_cast<float>(static_cast<double>(max) +
                                         (std::log(bound / static_cast<double>(inv_sum)) - 0.01) /
                                             static_cast<double>(inv_t))
                    : kNegInf;
    if (top_p && bound > 0.0) {
      // The nucleus is usually a small part of the bound's candidates (1% against 14% of V for
      // logits ~ normal(0, 3)): try an estimated gate first. Its cut stands when the candidates
      // hold top_p and every entry left out ranks after the cut.
      const float estimate = nucleus_gate_estimate(logits, n, w.top_p, max, inv_t, inv_sum);
      if (estimate > gate) {
        m = gather_at_least<true>(logits, n, estimate, ids, values, scratch.tiles);
        to_probabilities();
        cut_found = nucleus(m) &&
                    nucleus_cut.value > exp_flush(scaled_exponent(estimate, max, inv_t)) * inv_sum;
      }
    }
    if (!cut_found) {
      m = gather_at_least(logits, n, gate, ids, values, scratch.tiles);
      to_probabilities();
    }
    // Behind the top-p gate every probability is at least about the bound (> 1e-17): positive.
    if (!(top_p && bound > 0.0)) {
      std::int64_t kept = 0;
      for (std::int64_t j = 0; j < m; ++j) {
        ids[kept] = ids[j];
        values[kept] = values[j];
        kept += values[j] > 0.0f ? 1 : 0;
      }
      m = kept;
    }
  }
  if (top_p) {
    // Candidates that are every positive entry of the row: short of the mass only by rounding,
    // and then the row keeps them all.
    const bool complete = top_k || small;
    bool gated = !complete;  // the candidates are behind a prune bound
    bool found = cut_found || nucleus(m);
    if (!found && !complete) {
      gated = false;
      // Rounding left the gated candidates short of the mass: take every positive entry.
      m = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float p = exp_flush(scaled_exponent(to_float(logits[i]), max, inv_t)) * inv_sum;
        ids[m] = static_cast<std::int32_t>(i);
        values[m] = p;
        m += p > 0.0f ? 1 : 0;
      }
      found = nucleus(m);
    }
    if (found) {
      s.top_p_value = nucleus_cut.value;
      s.top_p_last = static_cast<std::int32_t>(nucleus_cut.last);
      // Gated candidates are at least the prune bound (> 2^-30): their sum by rank is exact. All
      // positive entries may hold smaller ones: summed in id order, as keep_top_p sums the row.
      const double kept = gated ? nucleus_mass : kept_mass(ids, values, m, nucleus_cut);
      s.inv_top_p_kept = static_cast<float>(1.0 / kept);
    }
    if (min_p && s.top_p_last >= 0) {
      for (std::int64_t j = 0; j < m; ++j) {
        values[j] = below_cut(values[j], ids[j], s.top_p_value, s.top_p_last)
                        ? 0.0f
                        : values[j] * s.inv_top_p_kept;
      }
    }
  }
  if (min_p) {
    float top = 0.0f;
    for (std::int64_t j = 0; j < m; ++j) top = std::max(top, values[j]);
    const float threshold = min_p_threshold(w.min_p, top);
    float kept = 0.0f;
    for (std::int64_t j = 0; j < m; ++j) {
      if (!(values[j] < threshold)) kept += values[j];
    }
    s.min_p_threshold = threshold;
    s.inv_min_p_kept = 1.0f / kept;
  }
  if (support != nullptr && (top_k || top_p || min_p)) *support = m;
}

/// The statistics of warp `w` applied to a row of logits (valid: finite or -inf, one finite).
/// `invalid` is set (and nothing else computed) when the row holds a NaN or +inf or no finite
/// entry, for the caller to report. When the warp cuts (top-k, top-p or min-p) and `support` is
/// given, *support = m: every entry the warp keeps is among scratch.ids[0, m), ascending.
template <class T>
WarpStats warp_stats(const Warp& w, const T* logits, std::int64_t n, WarpScratch scratch,
                     bool& invalid, std::int64_t* support = nullptr) {
  WarpStats s = WarpStats::uncut();
  const bool top_k = !w.is_greedy() && w.top_k > 0 && w.top_k < n;
  if (w.is_greedy()) {
    // No exponentials: a read for validity, then the argmax.
    KeyRange keys;
    keys.add(logits, n);
    invalid = keys.invalid();
    if (!invalid) s.greedy = static_cast<std::int32_t>(row_argmax(logits, n));
    return s;
  }
  s.inv_temperature = 1.0f / w.temperature;
  const float inv_t = s.inv_temperature;
  std::int64_t m = 0;  // top-k's candidates in scratch.ids, ascending
  if (top_k) {
    RowCut cut;
    invalid = !select_top_k(logits, n, w.top_k, scratch.ids, scratch.values, cut);
    if (invalid) return s;
    s.top_k_value = cut.value;
    s.top_k_last = static_cast<std::int32_t>(cut.last);
    m = w.top_k;
    const std::int32_t* ids = scratch.ids;
    const RowSum row = sparse_row_sum(ids, m, inv_t, scratch.tiles,
                                      [=](std::int64_t j) { return to_float(logits[ids[j]]); });
    s.max = row.max;
    s.inv_sum = 1.0f / static_cast<float>(row.sum);
  } else {
    const bool valid = tile_pass(logits, n, inv_t, scratch.tiles);
    const RowSum row = combine_tiles(scratch.tiles, tile_count(n), inv_t);
    invalid = !valid || !(row.max > kNegInf);
    if (invalid) return s;
    s.max = row.max;
    s.inv_sum = 1.0f / static_cast<float>(row.sum);
  }
  cut_statistics(w, logits, n, scratch, top_k, m, s, support);
  return s;
}

/// Warps a row of logits (a valid warp for its size) unless the row holds a NaN, +inf or no
/// finite entry; returns whether it did.
template <class T>
bool warp_logits_if_valid(const Warp& w, std::span<const T> logits, std::span<float> out,
                          std::int32_t* idx) {
  const auto n = static_cast<std::int64_t>(logits.size());
  bool invalid = false;
  const WarpStats s = warp_stats(w, logits.data(), n, warp_scratch(idx, n), invalid);
  if (invalid) return false;
  write_warped_row(s, logits.data(), n, out.data());
  return true;
}

template <class T>
void warp_logits_unchecked(const Warp& w, std::span<const T> logits, std::span<float> out,
                           std::int32_t* idx) {
  warp_logits_if_valid(w, logits, out, idx);
}

}  // namespace specdec::detail
