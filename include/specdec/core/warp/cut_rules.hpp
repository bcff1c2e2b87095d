// SPDX-License-Identifier: MIT
// Row functions of the warp shared by the CPU (core/top_k.hpp, core/top_p.hpp, core/warp/row_writer.hpp)
// and the CUDA warp kernel: the ranking of a cut, the nucleus boundary, the key a threshold search
// over probabilities compares, and the min-p cut. Plain SPECDEC_HOST_DEVICE code.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/order_key.hpp"

namespace specdec::detail {

/// A top-k or top-p cut: the value of the last entry kept and its id (last < 0: no cut). Entries
/// rank by value, descending, ties to the lowest id; the cut keeps every entry ranked up to it.
struct RowCut {
  float value = 0.0f;
  std::int64_t last = -1;
};

/// Whether (value, id) ranks after the cut at (cut_value, cut_last), so the cut removes it.
/// Inlined always on the host too: the row loops that call it vectorise only then.
#if defined(__GNUC__) && !defined(__CUDACC__)
[[gnu::always_inline]]
#endif
SPECDEC_HOST_DEVICE bool below_cut(float value, std::int64_t id, float cut_value,
                                   std::int64_t cut_last) {
  return value < cut_value || (value == cut_value && id > cut_last);
}

/// The nucleus boundary: a prefix (by rank) whose mass, summed in double, is `mass` holds the
/// nucleus of `top_p` when this holds. The nucleus is the shortest such prefix.
SPECDEC_HOST_DEVICE bool reaches_nucleus(double mass, double top_p) { return mass >= top_p; }

/// How many of `ties` entries of value v, ranked after a mass `above` that does not reach top_p,
/// the nucleus takes: the fewest j with reaches_nucleus(above + j v), or all of them.
SPECDEC_HOST_DEVICE std::int64_t ties_in_nucleus(double above, double v, std::int64_t ties,
                                                 double top_p) {
  if (!(v > 0.0)) return ties;
  // A first guess by division, then steps to the exact boundary of the products.
  double guess = (top_p - above) / v;
  guess = guess < 1.0 ? 1.0 : guess;
  std::int64_t j = guess < static_cast<double>(ties) ? static_cast<std::int64_t>(guess) : ties;
  j = j < 1 ? 1 : j;
  while (j > 1 && reaches_nucleus(above + static_cast<double>(j - 1) * v, top_p)) --j;
  while (j < ties && !reaches_nucleus(above + static_cast<double>(j) * v, top_p)) ++j;
  return j;
}

/// The order key of a probability without its sign bit: the bits of p > 0, 0 for a zero (either
/// sign) or NaN. Probabilities are non-negative, so 31 bits order them and a threshold search over
/// them starts at bit 30.
SPECDEC_HOST_DEVICE std::uint32_t probability_key(float p) {
  return p > 0.0f ? order_key(p) & 0x7FFFFFFFu : 0u;
}

/// The min-p threshold of a probability row whose largest entry is `max_probability`: entries
/// below it are cut (set to 0) before the row is renormalised.
SPECDEC_HOST_DEVICE float min_p_threshold(float min_p, float max_probability) {
  return min_p * max_probability;
}

/// One entry of the min-p cut: p, or 0 when p is below the threshold.
SPECDEC_HOST_DEVICE float min_p_cut(float p, float threshold) { return p < threshold ? 0.0f : p; }

}  // namespace specdec::detail
