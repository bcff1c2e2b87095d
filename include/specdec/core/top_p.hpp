// SPDX-License-Identifier: MIT
// The top-p (nucleus) selection: the shortest prefix of a row, ranked by probability descending
// with ties to the lowest id, whose mass summed in double reaches top_p (reaches_nucleus), as a cut
// (RowCut). The one selection of the warp's top-p: the statistics path (core/warp/logit_stats.hpp)
// and the probability path (keep_top_p) both call select_nucleus; the CUDA kernel shares its
// ranking and boundary (core/warp/cut_rules.hpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "specdec/core/compaction.hpp"
#include "specdec/core/row_loop.hpp"
#include "specdec/core/tile_sum.hpp"
#include "specdec/core/warp/cut_rules.hpp"

namespace specdec::detail {

/// Masses in double of the entries below `lo`, inside [lo, hi] and above `hi` (lo, hi >= 0).
/// Probabilities of at least 2^-30 (the prune bound is 2e-7 for top-p 0.9 at V = 256000) are
/// multiples of 2^-53 and sum to at most 1, so every sum is exact and the order is free: lanes
/// let it vectorise. Non-negative floats order as their bits, and integer selects vectorise.
struct Masses {
  double below = 0.0, within = 0.0, above = 0.0;
};
SPECDEC_ROW_LOOP inline Masses masses_around(const float* values, std::int64_t n, float lo,
                                             float hi) {
  const auto lo_bits = std::bit_cast<std::int32_t>(lo), hi_bits = std::bit_cast<std::int32_t>(hi);
  double total = 0.0;
  Masses m;
  std::int64_t i = 0;
#if defined(__GNUC__) && !defined(__CUDACC__)
  // Vector extensions: the compiler does not vectorise a float-to-double reduction by itself.
  using Bits4 = std::int32_t __attribute__((vector_size(16)));
  using Floats4 = float __attribute__((vector_size(16)));
  using Doubles4 = double __attribute__((vector_size(32)));
  Doubles4 lanes_total[2] = {}, lanes_below[2] = {}, lanes_above[2] = {};
  for (; i + 8 <= n; i += 8) {
    for (int h = 0; h < 2; ++h) {
      Bits4 bits;
      std::memcpy(&bits, values + i + 4 * h, sizeof bits);
      lanes_total[h] += __builtin_convertvector(reinterpret_cast<Floats4>(bits), Doubles4);
      lanes_below[h] +=
          __builtin_convertvector(reinterpret_cast<Floats4>(bits & (bits < lo_bits)), Doubles4);
      lanes_above[h] +=
          __builtin_convertvector(reinterpret_cast<Floats4>(bits & (bits > hi_bits)), Doubles4);
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      total += lanes_total[h][j];
      m.below += lanes_below[h][j];
      m.above += lanes_above[h][j];
    }
  }
#endif
  for (; i < n; ++i) {
    const float v = values[i];
    const auto bits = std::bit_cast<std::int32_t>(v);
    total += static_cast<double>(v);
    m.below += static_cast<double>(keep_if(bits < lo_bits, v));
    m.above += static_cast<double>(keep_if(bits > hi_bits, v));
  }
  m.within = total - m.below - m.above;
  return m;
}

/// The nucleus of `top_p` over m candidates: `ids` ascending (nullptr: the candidates are the
/// positions 0..m-1) with their probabilities `values` (>= 0). Sets `cut` and `mass` (the
/// prefix's mass, summed by rank) and returns true, or returns false when all of them together do
/// not reach top_p. `work_ids` and `work_values` have
/// room for m + kScratchSlack entries each.
///
/// The candidates are never ordered: a sample of 64 picks a bracket around the estimated cut, one
/// pass sums the mass above it and inside it (exactly, masses_around) and the part holding the cut
/// is compacted into `work`, ids ascending still. A bracket that keeps everything (ties) is split
/// at one value next; a cut inside a run of equal values is resolved by their count
/// (ties_in_nucleus), the run's ids ascending. The last <= 96 entries are ordered.
inline bool select_nucleus(const std::int32_t* ids, const float* values, std::int64_t m,
                           float top_p, std::int32_t* work_ids, float* work_values, RowCut& cut,
                           double& mass) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr int kSample = 64, kMargin = 3;
  constexpr std::int64_t kOrderAll = 96;
  const double target = static_cast<double>(top_p);
  // Invariant once the set's mass is known: above (the mass ranked before the set) does not reach
  // the target, above + set_mass does. Before that the set is every candidate and its mass about 1.
  double above = 0.0, set_mass = 1.0;
  bool mass_known = false;
  const float* set_values = values;
  const std::int32_t* set_ids = ids;
  std::int64_t count = m;
  const auto id_at = [&](std::int64_t j) {
    return set_ids == nullptr ? static_cast<std::int32_t>(j) : set_ids[j];
  };
  if (count <= kOrderAll && !reaches_nucleus(masses_around(values, m, 0.0f, kInf).within, target)) {
    return false;
  }
  int margin = kMargin;
  while (count > kOrderAll) {
    float sample[kSample];
    const std::int64_t stride = count / kSample;
    for (int k = 0; k < kSample; ++k) sample[k] = set_values[k * stride + stride / 2];
    std::sort(sample, sample + kSample, [](float a, float b) { return a > b; });
    double sample_mass = 0.0;
    for (const float v : sample) sample_mass += v;
    int at = kSample - 1;  // the sample entry where the estimated running mass reaches the target
    double prefix = 0.0;
    for (int k = 0; k < kSample; ++k) {
      prefix += sample[k];
      if (reaches_nucleus(above + set_mass * (prefix / sample_mass), target)) {
        at = k;
        break;
      }
    }
    const float hi = at >= margin ? sample[at - margin] : kInf;
    const float lo = at + margin < kSample ? sample[at + margin] : 0.0f;
    const Masses part = masses_around(set_values, count, lo, hi);
    if (!mass_known) {
      set_mass = part.below + part.within + part.above;
      if (!reaches_nucleus(set_mass, target)) return false;
      mass_known = true;
    }
    float keep_lo = lo, keep_hi = hi;
    if (reaches_nucleus(above + part.above, target)) {  // the cut is above the bracket
      keep_lo = std::nextafter(hi, kInf);
      keep_hi = kInf;
      set_mass = part.above;
    } else if (!reaches_nucleus(above + part.above + part.within, target)) {  // below it
      keep_lo = 0.0f;
      keep_hi = std::nextafter(lo, 0.0f);
      above += part.above + part.within;
      set_mass = part.below;
    } else {
      above += part.above;
      set_mass = part.within;
      if (lo == hi) {
        // The cut is in a run of entries equal to lo, which rank by id: the set's order.
        std::int64_t ties = 0;
        for (std::int64_t j = 0; j < count; ++j) ties += set_values[j] == lo ? 1 : 0;
        const std::int64_t need = ties_in_nucleus(above, static_cast<double>(lo), ties, target);
        for (std::int64_t j = 0, seen = 0; j < count; ++j) {
          seen += set_values[j] == lo ? 1 : 0;
          if (seen == need) {
            cut = {lo, id_at(j)};
            mass = above + static_cast<double>(need) * static_cast<double>(lo);
            return true;
          }
        }
      }
    }
    const std::int64_t kept = set_ids == nullptr
                                  ? compact_between<true>(set_values, nullptr, count, keep_lo,
                                                          keep_hi, work_ids, work_values)
                                  : compact_between<false>(set_values, set_ids, count, keep_lo,
                                                           keep_hi, work_ids, work_values);
    // A bracket that kept every entry (ties around the cut) is split at one value next.
    margin = kept == count ? 0 : kMargin;
    if (kept == count) continue;
    if (kept == 0) return false;  // rounding: no entry holds the rest of the mass
    set_values = work_values;
    set_ids = work_ids;
    count = kept;
  }
  // (value bits, complement of the id): descending keys are the ranking, ties to the lowest id.
  std::uint64_t keys[kOrderAll];
  for (std::int64_t j = 0; j < count; ++j) {
    keys[j] = (static_cast<std::uint64_t>(std::bit_cast<std::uint32_t>(set_values[j])) << 32) |
              (0xffffffffu - static_cast<std::uint32_t>(id_at(j)));
  }
  std::sort(keys, keys + count, [](std::uint64_t a, std::uint64_t b) { return a > b; });
  std::int64_t at = count - 1;  // rounding left the mass short: the last entry
  double running = above;
  for (std::int64_t j = 0; j < count; ++j) {
    running += static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(keys[j] >> 32)));
    if (reaches_nucleus(running, target)) {
      at = j;
      break;
    }
  }
  mass = running;
  cut = {std::bit_cast<float>(static_cast<std::uint32_t>(keys[at] >> 32)),
         static_cast<std::int64_t>(0xffffffffu - static_cast<std::uint32_t>(keys[at]))};
  return true;
}

/// The mass a cut keeps among candidates (ids ascending with their probabilities), summed in
/// double in id order: the sum keep_top_p takes over the row, which differs from the sum by rank
/// only where probabilities below 2^-30 make the sums inexact.
inline double kept_mass(const std::int32_t* ids, const float* values, std::int64_t m, RowCut cut) {
  double kept = 0.0;
  for (std::int64_t j = 0; j < m; ++j) {
    if (!below_cut(values[j], ids[j], cut.value, cut.last)) kept += static_cast<double>(values[j]);
  }
  return kept;
}

/// p is a probability row; zeroes everything outside the nucleus of mass `top_p` and renormalises
/// (a row whose mass falls short of top_p by rounding stays as it is). The work lists as
/// select_nucleus's for m = n.
inline void keep_top_p(float* p, std::int64_t n, float top_p, std::int32_t* work_ids,
                       float* work_values) {
  RowCut cut;
  double mass = 0.0;
  if (!select_nucleus(nullptr, p, n, top_p, work_ids, work_values, cut, mass)) return;
  double kept = 0.0;  // in double: a float sum of a long row falls short of 1 after the division
  for (std::int64_t i = 0; i < n; ++i) {
    if (below_cut(p[i], i, cut.value, cut.last)) {
      p[i] = 0.0f;
    } else {
      kept += static_cast<double>(p[i]);
    }
  }
  const auto inv = static_cast<float>(1.0 / kept);
  for (std::int64_t i = 0; i < n; ++i) p[i] *= inv;
}

}  // namespace specdec::detail
