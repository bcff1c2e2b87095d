// SPDX-License-Identifier: MIT
// Rough bounds: a row read once with rough exponentials (rough_exp2) bounds an entry's warped
// probability closely enough to decide most acceptances in about half the arithmetic of the exact
// statistics; the rest are decided exactly (verify/chain_logits.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

#include "specdec/core/exponential.hpp"
#include "specdec/core/tile_sum.hpp"
#include "specdec/core/warp/params.hpp"

namespace specdec::detail {

/// How far a rough pass's sums may stray, relative, from the exact ones: its terms lie within
/// 1.2e-4 of exp_flush's (plus 2^-125, nothing against a sum of at least 1), each float sum within
/// 5e-6 of its terms' sum; the margin is eight times that.
inline constexpr double kRoughSum = 1e-3;

/// A row read once with rough exponentials, for a warp whose only cut is top-p: a reference logit
/// (the largest, or for a row read through a mask possibly one behind it, at most about 35
/// temperatures above the largest kept), the softmax sum relative to it and the mass at or above a
/// threshold within kRoughSum. That bounds an entry's warped probability
/// (warped_probability_bounds) closely enough to decide most acceptances, in about half the
/// arithmetic of the exact pass; the rest are decided exactly.
struct RoughRow {
  float inv_temperature = 1.0f;
  float max = 0.0f;
  double sum = 0.0;    // the softmax sum, relative to max
  double above = 0.0;  // the mass at or above the threshold, over `sum`
  bool invalid = false;
};

/// Whether rough_row and warped_probability_bounds apply to warp `w` on rows of `n`: a sampling
/// warp that cuts by top-p (at most 0.999, so the row's mass always reaches it) or not at all.
inline bool roughly_bounded(const Warp& w, std::int64_t n) {
  return !w.is_greedy() && (w.top_k == 0 || w.top_k >= n) && !(w.min_p > 0.0f) &&
         (w.top_p >= 1.0f || w.top_p <= 0.999f) && n > kSmallRow &&
         std::isfinite(1.0f / w.temperature * std::numbers::log2e_v<float>);
}

/// The threshold of a rough pass's mass above for an entry whose logit is `logit`: the margin
/// (1e-3 in units of the exponent) covers the rounding by which an entry of a lower logit can
/// reach the entry's probability.
inline float rough_threshold(float logit, float inv_t) { return logit - 1e-3f / inv_t; }

/// The RoughRow of a row whose entries, each once, were summed into `count` tiles of at most
/// kSumTile entries by a rough pass (any grouping: the bounds hold for every tile alike); `valid`:
/// the pass saw no NaN or +inf.
inline RoughRow rough_row_of_tiles(const TileSum* tiles, std::int64_t count, float inv_t,
                                   bool valid) {
  RoughRow row;
  row.inv_temperature = inv_t;
  const RowSum sum = combine_tiles(tiles, count, inv_t);
  row.invalid = !valid || !(sum.max > kNegInf);
  if (row.invalid) return row;
  row.max = sum.max;
  row.sum = sum.sum;
  row.above = sum.above / sum.sum;
  return row;
}

/// The rough pass of a row for an entry whose logit is `logit` (with top-p, also the mass at or
/// above rough_threshold).
template <class T>
RoughRow rough_row(const Warp& w, const T* logits, std::int64_t n, float logit, TileSum* tiles) {
  const float inv_t = 1.0f / w.temperature;
  const bool valid = w.top_p < 1.0f ? rough_tile_pass<true>(logits, n, inv_t, tiles,
                                                            rough_threshold(logit, inv_t))
                                    : rough_tile_pass<false>(logits, n, inv_t, tiles);
  return rough_row_of_tiles(tiles, tile_count(n), inv_t, valid);
}

/// Bounds on a warped probability: lo > 0 claims the entry is kept, with lo <= p <= hi.
struct ProbabilityBounds {
  float lo = 0.0f;
  float hi = 0.0f;
};

/// Bounds on an entry's warped probability from a rough row: lo > 0 when the entry certainly
/// has a positive probability, and then lo <= warped_probability(exact statistics, logit, id) <=
/// hi. Its softmax probability is exp_flush of its exponent (exact) times 1/sum, the sum known to
/// kRoughSum (the margins of 1e-6 cover the float roundings). With top-p, the entry is in the
/// nucleus when the mass ranked before it is below top_p; that mass is at most the row's mass at
/// or above the threshold, known to 2 kRoughSum plus the exact path's own roundings (far below
/// 1e-3). In the nucleus, the kept mass K lies in [top_p, top_p + p): the cut entry is the first
/// where the running mass reaches top_p and ranks no higher than the entry, of probability p.
/// The warped probability p * float(1 / K) is monotone in K, so K's ends bound it.
inline ProbabilityBounds warped_probability_bounds(const RoughRow& row, float top_p, float logit) {
  const auto term =
      static_cast<double>(exp_flush(scaled_exponent(logit, row.max, row.inv_temperature)));
  if (!(term > 0.0)) return {};
  const double lo = term / (row.sum * (1.0 + kRoughSum)) * (1.0 - 1e-6);
  const double hi = term / (row.sum * (1.0 - kRoughSum)) * (1.0 + 1e-6);
  if (top_p >= 1.0f) return {static_cast<float>(lo), static_cast<float>(hi)};
  const auto target = static_cast<double>(top_p);
  if (!(row.above * (1.0 + 2.0 * kRoughSum + 1e-3) < target)) return {};
  return {static_cast<float>(lo / (target + hi) * (1.0 - 1e-6)),
          static_cast<float>(hi / target * (1.0 + 1e-6))};
}

}  // namespace specdec::detail
