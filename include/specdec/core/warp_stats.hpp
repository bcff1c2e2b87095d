// SPDX-License-Identifier: MIT
// A warped row as a handful of numbers. Verification needs the warped probability of a few drafted
// tokens, not whole rows: the statistics (max, 1/sum, the top-k and top-p cuts as a value and the
// last id kept, 1/kept mass, the min-p threshold) are found in one read of the row plus a pass over
// the pruned candidates, and any entry is then recomputed from its logit with exactly the float
// operations that write_warped_row uses for the whole row (warp_logits writes rows that way).
//
// Deterministic reduction rule (shared with the CUDA backend, docs/backends.md): the softmax sum
// is taken over tiles of kSumTile consecutive entries; inside a tile, lane j (of kSumLanes) adds
// the entries whose offset in the tile is j mod kSumLanes in increasing order, the lanes are added
// in order 0..kSumLanes-1, and the tile sums are added in double in tile order. Entries outside the
// kept set add +0, so a sparse set (top-k) gives the same bits as the dense row.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/core/numerics.hpp"
#include "specdec/core/warp.hpp"

// The row loops are compiled twice when the including code targets less than AVX2 (the
// distributions' default): once as is and once for AVX2, picked at load time by the CPU. AVX2
// without FMA, so both clones round every operation alike and match the entries recomputed alone.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__) && \
    !defined(__AVX2__) && !defined(SPECDEC_NO_CPU_CLONES)
#define SPECDEC_ROW_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define SPECDEC_ROW_LOOP
#endif

// Entry functions the row loops call: inlined always, or the loops do not vectorise.
#if defined(__GNUC__)
#define SPECDEC_ENTRY_INLINE [[gnu::always_inline]] inline
#else
#define SPECDEC_ENTRY_INLINE inline
#endif

namespace specdec::detail {

inline constexpr std::int64_t kSumTile = 1024;
inline constexpr int kSumLanes = 16;

/// The float's bits as a signed integer with the floats' order (for vectorisable max and clamps).
SPECDEC_ENTRY_INLINE constexpr std::int32_t signed_order_key(float x) {
  const auto u = std::bit_cast<std::int32_t>(x);
  return u ^ ((u >> 31) & 0x7fffffff);
}
SPECDEC_ENTRY_INLINE constexpr float from_signed_order_key(std::int32_t key) {
  return std::bit_cast<float>(key ^ ((key >> 31) & 0x7fffffff));
}

/// e^x as a branch-free polynomial (Cephes' coefficients) that the compiler vectorises at any ISA
/// level, so a row written in a vectorised loop and an entry recomputed alone give the same bits.
/// Arguments at or below -88 (-inf included) give exactly 0: the clamp lands on 2^-127, whose
/// exponent field is zero.
SPECDEC_ENTRY_INLINE float exp_flush(float x) {
  // The clamp to [-88, 88] on integer keys with the floats' order: a float select here keeps GCC
  // from vectorising the loop without SSE4.1.
  constexpr std::int32_t lo = signed_order_key(-88.0f), hi = signed_order_key(88.0f);
  std::int32_t key = signed_order_key(x);
  key = key >= lo ? key : lo;
  key = key <= hi ? key : hi;
  x = from_signed_order_key(key);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float k = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - k * 0.693359375f) - k * -2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = (y * (r * r) + r) + 1.0f;
  return y * std::bit_cast<float>((static_cast<std::int32_t>(k) + 127) << 23);
}

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

/// Bytes of scratch warp_stats needs for a row of `vocab`: candidate ids, a bucket list and the
/// candidates' probabilities.
inline std::size_t warp_stats_scratch_size(std::int64_t vocab) {
  return Workspace::round_up(3 * static_cast<std::size_t>(vocab) * sizeof(std::int32_t));
}

/// Whether (value, id) is cut by a cut at (cut_value, cut_last): ordering is value descending,
/// ties to the lowest id.
SPECDEC_ENTRY_INLINE bool below_cut(float value, std::int64_t id, float cut_value, std::int64_t cut_last) {
  return value < cut_value || (value == cut_value && id > cut_last);
}

/// The exponent of a logit's softmax term, (logit - max) / temperature. The one form every path
/// uses: a product feeding a subtraction could be fused into an FMA in one context and not in
/// another, a subtraction feeding a product cannot.
SPECDEC_ENTRY_INLINE float scaled_exponent(float logit, float max, float inv_temperature) {
  return (logit - max) * inv_temperature;
}

/// Probability after temperature, top-k and the softmax (before top-p and min-p).
SPECDEC_ENTRY_INLINE float softmax_probability(const WarpStats& s, float logit, std::int64_t id) {
  if (s.top_k_last >= 0 && below_cut(logit, id, s.top_k_value, s.top_k_last)) return 0.0f;
  return exp_flush(scaled_exponent(logit, s.max, s.inv_temperature)) * s.inv_sum;
}

/// The warped probability of token `id` whose logit is `logit`.
SPECDEC_ENTRY_INLINE float warped_probability(const WarpStats& s, float logit, std::int64_t id) {
  if (s.greedy >= 0) return id == s.greedy ? 1.0f : 0.0f;
  float p = softmax_probability(s, logit, id);
  if (s.top_p_last >= 0) {
    p = below_cut(p, id, s.top_p_value, s.top_p_last) ? 0.0f : p * s.inv_top_p_kept;
  }
  if (s.min_p_threshold > 0.0f) p = p < s.min_p_threshold ? 0.0f : p * s.inv_min_p_kept;
  return p;
}

/// `value` when `keep`, else +0, by masking its bits.
SPECDEC_ENTRY_INLINE float keep_if(bool keep, float value) {
  return std::bit_cast<float>(std::bit_cast<std::int32_t>(value) & -static_cast<std::int32_t>(keep));
}

/// Writes the whole warped row (the same values warped_probability gives entry by entry).
template <class T>
SPECDEC_ROW_LOOP void write_warped_row(const WarpStats& s, const T* logits, std::int64_t n, float* out) {
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
    const std::int64_t split = std::min(n, s.top_p_last + 1);
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

/// Adds exp(z - max) of entries given in increasing id order into the tile rule's sum.
class TiledSum {
 public:
  void add(std::int64_t id, float term) {
    const std::int64_t tile = id / kSumTile;
    if (tile != tile_) flush(tile);
    lanes_[(id - tile * kSumTile) % kSumLanes] += term;
  }
  double total() {
    flush(-1);
    return total_;
  }

 private:
  void flush(std::int64_t next) {
    float tile_sum = 0.0f;
    for (float& lane : lanes_) {
      tile_sum += lane;
      lane = 0.0f;
    }
    total_ += tile_sum;
    tile_ = next;
  }
  float lanes_[kSumLanes] = {};
  std::int64_t tile_ = -1;
  double total_ = 0.0;
};

/// The tile rule over a dense row: sum of exp((logits[i] - max) * inv_t).
template <class T>
SPECDEC_ROW_LOOP double dense_exp_sum(const T* logits, std::int64_t n, float inv_t, float max) {
  double total = 0.0;
  float terms[kSumTile];  // a plain loop of exps vectorises at any ISA level; the lanes then add
  for (std::int64_t b = 0; b < n; b += kSumTile) {
    const std::int64_t e = std::min(n, b + kSumTile);
    const std::int64_t count = e - b;
    for (std::int64_t i = 0; i < count; ++i) {
      terms[i] = exp_flush(scaled_exponent(to_float(logits[b + i]), max, inv_t));
    }
    for (std::int64_t i = count; i < kSumTile; ++i) terms[i] = 0.0f;
    float lanes[kSumLanes] = {};
    for (std::int64_t i = 0; i < kSumTile; i += kSumLanes) {
      for (int j = 0; j < kSumLanes; ++j) lanes[j] += terms[i + j];
    }
    float tile_sum = 0.0f;
    for (float lane : lanes) tile_sum += lane;
    total += tile_sum;
  }
  return total;
}

/// Largest logit and whether the row holds a NaN or +inf (then the caller's check names it).
/// Integer keys with the floats' order, so the reductions vectorise at any ISA level.
template <class T>
SPECDEC_ROW_LOOP float scan_max(const T* logits, std::int64_t n, bool& invalid) {
  std::int32_t best = std::numeric_limits<std::int32_t>::min();
  std::int32_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = std::bit_cast<std::int32_t>(to_float(logits[i]));
    const std::int32_t key = u ^ ((u >> 31) & 0x7fffffff);  // signed_order_key
    best = key > best ? key : best;
    // NaN or +inf: magnitude bits at least those of inf, and not -inf.
    bad |= static_cast<std::int32_t>((u & 0x7fffffff) >= 0x7f800000) &
           static_cast<std::int32_t>(u != std::bit_cast<std::int32_t>(kNegInf));
  }
  invalid = bad != 0;
  return from_signed_order_key(best);
}

/// The ids (ascending) and logits of the entries whose logit is at least `gate`; returns their
/// count. Branch-free: every entry is written, the count advances for the ones kept.
template <class T>
SPECDEC_ROW_LOOP std::int64_t gather_at_least(const T* logits, std::int64_t n, float gate,
                                              std::int32_t* ids, float* values) {
  std::int64_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float logit = to_float(logits[i]);
    ids[m] = static_cast<std::int32_t>(i);
    values[m] = logit;
    m += logit >= gate ? 1 : 0;
  }
  return m;
}

struct WarpScratch {
  std::int32_t* ids;     // n entries
  std::int32_t* bucket;  // n entries
  float* values;         // n entries
};

inline WarpScratch warp_scratch(std::int32_t* base, std::int64_t n) {
  return {base, base + n, reinterpret_cast<float*>(base + 2 * n)};
}

/// Top-k of z (the k largest, ties to the lowest id): gathers ids above a running threshold and
/// narrows them with nth_element; leaves the k kept ids sorted by id in ids[0, k).
template <class T>
void top_k_cut(const T* logits, std::int64_t n, std::int64_t k, WarpStats& s, std::int32_t* ids) {
  const auto z = [=](std::int32_t i) { return to_float(logits[i]); };
  const auto better = [&](std::int32_t a, std::int32_t b) {
    const float za = z(a), zb = z(b);
    return za > zb || (za == zb && a < b);
  };
  // A small buffer: each narrowing raises the threshold, so few entries are gathered after it.
  const std::int64_t cap = std::min(n, std::max<std::int64_t>(4 * k, 256));
  float threshold = kNegInf;
  std::int64_t m = 0;
  const auto visit = [&](std::int64_t i) {
    if (!(z(static_cast<std::int32_t>(i)) >= threshold)) return;
    ids[m++] = static_cast<std::int32_t>(i);
    if (m == cap) {
      std::nth_element(ids, ids + (k - 1), ids + m, better);
      threshold = z(ids[k - 1]);
      m = k;
    }
  };
  // Blocks whose largest logit is below the running threshold are skipped whole (the block max
  // is a vectorised integer reduction).
  std::int64_t b = 0;
  for (; b + kSumLanes <= n; b += kSumLanes) {
    std::int32_t best = std::numeric_limits<std::int32_t>::min();
    for (int j = 0; j < kSumLanes; ++j) {
      const std::int32_t key = signed_order_key(to_float(logits[b + j]));
      best = key > best ? key : best;
    }
    if (!(from_signed_order_key(best) >= threshold)) continue;
    for (int j = 0; j < kSumLanes; ++j) visit(b + j);
  }
  for (; b < n; ++b) visit(b);
  std::nth_element(ids, ids + (k - 1), ids + m, better);
  s.top_k_last = ids[k - 1];
  s.top_k_value = z(ids[k - 1]);
  std::sort(ids, ids + k);
}

/// The nucleus cut over candidates (ids ascending with their positive probabilities), ordered
/// and summed exactly as keep_top_p does. `complete`: the candidates are every positive entry of
/// the row; otherwise returns false when they do not reach the mass (the caller widens them).
inline bool top_p_cut(const std::int32_t* ids, const float* values, std::int64_t m, float top_p,
                      bool small, bool complete, std::int32_t* bucket, WarpStats& s) {
  const auto better = [&](std::int32_t a, std::int32_t b) {
    return values[a] > values[b] || (values[a] == values[b] && ids[a] < ids[b]);
  };
  const double target = static_cast<double>(top_p);
  std::int64_t cut_at = -1;  // position in the candidates
  if (small) {
    // keep_top_p_small: order every positive entry, running sum from 0.
    for (std::int64_t j = 0; j < m; ++j) bucket[j] = static_cast<std::int32_t>(j);
    std::sort(bucket, bucket + m, better);
    double running = 0.0;
    for (std::int64_t j = 0; j < m && cut_at < 0; ++j) {
      running += values[bucket[j]];
      if (running >= target) cut_at = bucket[j];
    }
    if (cut_at < 0) cut_at = bucket[m - 1];  // rounding left the mass short: keep everything
  } else {
    double mass[kRadixBuckets] = {};
    for (std::int64_t j = 0; j < m; ++j) mass[radix_bucket(values[j])] += values[j];
    int boundary = kRadixBuckets - 1;
    double above = 0.0;  // mass strictly above the boundary bucket
    while (boundary > 0 && above + mass[boundary] < target) above += mass[boundary--];
    std::int64_t count = 0;
    for (std::int64_t j = 0; j < m; ++j) {
      if (radix_bucket(values[j]) == boundary) bucket[count++] = static_cast<std::int32_t>(j);
    }
    if (count == 0) {
      if (!complete) return false;
      s.top_p_last = -1;  // keep_top_p keeps the row as it is
      return true;
    }
    double running = above;
    std::int64_t lo = 0, chunk = 64;
    while (lo < count && cut_at < 0) {
      const std::int64_t hi = std::min(count, lo + chunk);
      if (hi < count) std::nth_element(bucket + lo, bucket + hi, bucket + count, better);
      std::sort(bucket + lo, bucket + hi, better);
      for (std::int64_t j = lo; j < hi && cut_at < 0; ++j) {
        running += values[bucket[j]];
        if (running >= target) cut_at = bucket[j];
      }
      lo = hi;
      chunk *= 2;
    }
    if (cut_at < 0) {
      if (!complete) return false;
      cut_at = bucket[count - 1];
    }
  }
  s.top_p_value = values[cut_at];
  s.top_p_last = ids[cut_at];
  float kept = 0.0f;
  for (std::int64_t j = 0; j < m; ++j) {
    if (!below_cut(values[j], ids[j], s.top_p_value, s.top_p_last)) kept += values[j];
  }
  s.inv_top_p_kept = 1.0f / kept;
  return true;
}

/// The statistics of warp `w` applied to a row of logits (valid: finite or -inf, one finite).
/// `invalid` is set (and nothing else computed) when the row holds a NaN or +inf or no finite
/// entry, for the caller to report.
template <class T>
WarpStats warp_stats(const Warp& w, const T* logits, std::int64_t n, WarpScratch scratch,
                     bool& invalid) {
  WarpStats s;
  bool bad = false;
  const float raw_max = scan_max(logits, n, bad);
  invalid = bad || raw_max == kNegInf;
  if (invalid) return s;
  if (w.is_greedy()) {
    s.greedy = row_argmax(logits, n);
    return s;
  }
  s.inv_temperature = 1.0f / w.temperature;
  const float inv_t = s.inv_temperature;
  std::int32_t* ids = scratch.ids;
  float* values = scratch.values;
  const bool top_k = w.top_k > 0 && w.top_k < n;
  std::int64_t m = 0;  // candidates in ids / values, ascending ids
  if (top_k) {
    top_k_cut(logits, n, w.top_k, s, ids);
    m = w.top_k;
    float max = kNegInf;
    for (std::int64_t j = 0; j < m; ++j) max = std::max(max, to_float(logits[ids[j]]));
    s.max = max;
    TiledSum sum;
    for (std::int64_t j = 0; j < m; ++j) {
      sum.add(ids[j], exp_flush(scaled_exponent(to_float(logits[ids[j]]), max, inv_t)));
    }
    s.inv_sum = 1.0f / static_cast<float>(sum.total());
  } else {
    s.max = raw_max;
    s.inv_sum = 1.0f / static_cast<float>(dense_exp_sum(logits, n, inv_t, s.max));
  }
  const bool top_p = w.top_p < 1.0f;
  const bool min_p = w.min_p > 0.0f;
  if (!top_p && !min_p) return s;

  // Candidates with their softmax probabilities: without top-k, those that can matter. A token
  // below (1 - top_p) / n can never be in the nucleus (all of them hold less than 1 - top_p); one
  // below min_p times the top probability is cut by min-p. Half the bound leaves room for rounding.
  const bool small = n <= kSmallRow;
  if (top_k) {
    std::int64_t kept = 0;
    for (std::int64_t j = 0; j < m; ++j) {
      const float p =
          exp_flush(scaled_exponent(to_float(logits[ids[j]]), s.max, inv_t)) * s.inv_sum;
      ids[kept] = ids[j];
      values[kept] = p;
      kept += p > 0.0f ? 1 : 0;
    }
    m = kept;
  } else {
    double bound = 0.0;  // in probability
    if (top_p && !small) bound = 0.5 * (1.0 - static_cast<double>(w.top_p)) / static_cast<double>(n);
    if (!top_p && min_p) bound = 0.5 * static_cast<double>(w.min_p) * static_cast<double>(s.inv_sum);
    // p >= bound  <=>  logit >= max + temperature * log(bound * sum), less a margin for rounding.
    const float gate =
        bound > 0.0 ? static_cast<float>(static_cast<double>(s.max) +
                                         (std::log(bound / static_cast<double>(s.inv_sum)) - 0.01) /
                                             static_cast<double>(inv_t))
                    : kNegInf;
    m = gather_at_least(logits, n, gate, ids, values);
    const float max = s.max, inv_sum = s.inv_sum;
    for (std::int64_t j = 0; j < m; ++j) {
      values[j] = exp_flush(scaled_exponent(values[j], max, inv_t)) * inv_sum;
    }
    std::int64_t kept = 0;
    for (std::int64_t j = 0; j < m; ++j) {
      ids[kept] = ids[j];
      values[kept] = values[j];
      kept += values[j] > 0.0f ? 1 : 0;
    }
    m = kept;
  }
  if (top_p) {
    const bool complete = top_k || small;
    if (!top_p_cut(ids, values, m, w.top_p, small, complete, scratch.bucket, s)) {
      // Rounding left the candidates short of the mass: take every positive entry.
      m = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float p = exp_flush(scaled_exponent(to_float(logits[i]), s.max, inv_t)) * s.inv_sum;
        ids[m] = static_cast<std::int32_t>(i);
        values[m] = p;
        m += p > 0.0f ? 1 : 0;
      }
      top_p_cut(ids, values, m, w.top_p, small, true, scratch.bucket, s);
    }
    if (s.top_p_last >= 0) {
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
    const float threshold = w.min_p * top;
    float kept = 0.0f;
    for (std::int64_t j = 0; j < m; ++j) {
      if (!(values[j] < threshold)) kept += values[j];
    }
    s.min_p_threshold = threshold;
    s.inv_min_p_kept = 1.0f / kept;
  }
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
