// SPDX-License-Identifier: MIT
// A warped row as a handful of numbers. Verification needs the warped probability of a few drafted
// tokens, not whole rows: the statistics (max, 1/sum, the top-k and top-p cuts as a value and the
// last id kept, 1/kept mass, the min-p threshold) are found in one read of the row plus a pass over
// the pruned candidates, and any entry is then recomputed from its logit with exactly the float
// operations that write_warped_row uses for the whole row (warp_logits writes rows that way).
//
// Deterministic reduction rule (docs/backends.md): the softmax sum is taken over tiles of kSumTile
// consecutive entries, each with its own largest logit m_t: lane j (of kSumLanes) adds
// exp((logit - m_t) / T) of the entries whose offset in the tile is j mod kSumLanes in increasing
// order, the lanes are added in order 0..kSumLanes-1 (the tile's sum s_t), and the row's sum is
// s_t * exp((m_t - max) / T) added in double in tile order. So the row is read once, a tile at a
// time while it is in the first-level cache. Entries outside the kept set add +0, so a sparse set
// (top-k) gives the bits of a row holding -inf elsewhere.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <type_traits>

#include "specdec/core/exponential.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/row_loop.hpp"
#include "specdec/core/warp.hpp"

// Compactions (keep the entries inside a range, in order) use x86 permutes: a compiler does not
// vectorise a loop whose store position depends on the data.
#if defined(__GNUC__) && !defined(__CUDACC__) && defined(__x86_64__)
#include <immintrin.h>
#define SPECDEC_X86_COMPACT 1
#endif

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

/// Bytes of scratch warp_stats needs for a row of `vocab` (warp_workspace_size).
inline std::size_t warp_stats_scratch_size(std::int64_t vocab) { return warp_workspace_size(vocab); }

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

/// One tile of the reduction rule: its largest logit and the float sum of
/// exp((logit - max) * inv_t) over its entries, with max the tile's own; `above` is the same sum
/// over the entries at or above a threshold, when the pass was asked for one.
struct TileSum {
  float max;
  float sum;
  float above;
};

inline std::int64_t tile_count(std::int64_t n) { return (n + kSumTile - 1) / kSumTile; }

/// The tile rule's lane sums over `count` (at most kSumTile) entries of a tile: lane j adds
/// exp((logit - max) * inv_t) of the entries at offsets j mod kSumLanes in order (an entry past
/// the tile's end would add +0), into `lanes`; with kAbove, `above` gets the same sums over the
/// entries whose logit is at least `threshold`. The exponentials go straight into the lanes.
/// kClamp: some entry's exponent may be below exp_flush's floor. kRough: rough_exp2 terms instead.
template <bool kAbove, bool kRough, bool kClamp, class T>
SPECDEC_ENTRY_INLINE void add_tile_terms(const T* x, std::int64_t count, float max, float inv_t,
                                         float threshold, float* lanes, float* above) {
  const float rough_scale = inv_t * 1.44269504088896341f;
  const float rough_floor = -126.0f / rough_scale;
  const auto add = [&](int j, float logit) {
    float term;
    if constexpr (kRough) {
      const float d = logit - max;
      term = rough_exp2(kClamp ? (d > rough_floor ? d : rough_floor) : d, rough_scale);
    } else {
      const float z = scaled_exponent(logit, max, inv_t);
      term = kClamp ? exp_flush(z) : exp_in_range(z);
    }
    lanes[j] += term;
    if constexpr (kAbove) above[j] += keep_if(logit >= threshold, term);
  };
  std::int64_t i = 0;
  for (; i + kSumLanes <= count; i += kSumLanes) {
    for (int j = 0; j < kSumLanes; ++j) add(j, to_float(x[i + j]));
  }
  for (int j = 0; i + j < count; ++j) add(j, to_float(x[i + j]));
}

/// The lanes added in order 0..kSumLanes-1: a tile's sum.
SPECDEC_ENTRY_INLINE float add_lanes(const float* lanes) {
  float sum = 0.0f;
  for (int j = 0; j < kSumLanes; ++j) sum += lanes[j];
  return sum;
}

/// A row's largest logit and its softmax sum: sum of exp((logit - max) * inv_t) over the row
/// (`above`: over the entries at or above the pass's threshold).
struct RowSum {
  float max = kNegInf;
  double sum = 0.0;
  double above = 0.0;
};

/// The row's sum from its tiles: each tile's sum times exp((tile max - max) * inv_t), the product
/// exact in double, added in double in tile order. A tile without a finite entry adds nothing.
inline RowSum combine_tiles(const TileSum* tiles, std::int64_t count, float inv_t) {
  RowSum row;
  for (std::int64_t t = 0; t < count; ++t) row.max = tiles[t].max > row.max ? tiles[t].max : row.max;
  for (std::int64_t t = 0; t < count; ++t) {
    if (!(tiles[t].max > kNegInf)) continue;
    const auto scale = static_cast<double>(exp_flush(scaled_exponent(tiles[t].max, row.max, inv_t)));
    row.sum += static_cast<double>(tiles[t].sum) * scale;
    row.above += static_cast<double>(tiles[t].above) * scale;
  }
  return row;
}

/// The tile rule over the entries ids[0, m) (ascending) of a row, every other entry counting as
/// -inf: the tiles, lanes and order of that dense row, whose -inf entries would add +0. `tiles`
/// has room for tile_count(n) entries.
template <class T>
RowSum sparse_row_sum(const T* logits, const std::int32_t* ids, std::int64_t m, float inv_t,
                      TileSum* tiles) {
  std::int64_t count = 0;
  for (std::int64_t j = 0; j < m;) {
    const std::int64_t tile = ids[j] / kSumTile;
    std::int64_t end = j;
    float max = kNegInf;
    for (; end < m && ids[end] / kSumTile == tile; ++end) {
      const float x = to_float(logits[ids[end]]);
      max = x > max ? x : max;
    }
    float lanes[kSumLanes] = {};
    for (; j < end; ++j) {
      lanes[(ids[j] - tile * kSumTile) % kSumLanes] +=
          exp_flush(scaled_exponent(to_float(logits[ids[j]]), max, inv_t));
    }
    tiles[count++] = {max, add_lanes(lanes), 0.0f};
  }
  return combine_tiles(tiles, count, inv_t);
}

/// Compaction: the entries of `values` inside [lo, hi] with their ids (their positions when
/// kPositions), in order, into out_ids / out_values; returns their count. The outputs may be the inputs
/// (the write position never passes the read position). Writes stay within the first n entries.
template <bool kPositions>
std::int64_t compact_between_scalar(const float* values, const std::int32_t* ids, std::int64_t begin,
                                    std::int64_t n, float lo, float hi, std::int32_t* out_ids,
                                    float* out_values, std::int64_t m) {
  const float* v = values + begin;
  const std::int32_t* id = kPositions ? nullptr : ids + begin;
  for (std::int64_t k = 0; k < n - begin; ++k) {
    out_ids[m] = kPositions ? static_cast<std::int32_t>(begin + k) : id[k];
    out_values[m] = v[k];
    m += v[k] >= lo && v[k] <= hi ? 1 : 0;
  }
  return m;
}

#ifdef SPECDEC_X86_COMPACT
/// For each 8-bit keep mask, the lanes kept, packed to the front.
struct CompactTable {
  alignas(32) std::int32_t lanes[256][8];
};
constexpr CompactTable make_compact_table() {
  CompactTable t{};
  for (int mask = 0; mask < 256; ++mask) {
    int k = 0;
    for (int lane = 0; lane < 8; ++lane) {
      if ((mask >> lane) & 1) t.lanes[mask][k++] = lane;
    }
  }
  return t;
}
inline constexpr CompactTable kCompactTable = make_compact_table();

template <bool kPositions>
[[gnu::target("avx2,popcnt")]] inline std::int64_t compact_between_avx2(
    const float* values, const std::int32_t* ids, std::int64_t n, float lo, float hi,
    std::int32_t* out_ids, float* out_values) {
  const __m256 low = _mm256_set1_ps(lo), high = _mm256_set1_ps(hi);
  const __m256i lane_offsets = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  std::int64_t m = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(values + i);
    const int mask = _mm256_movemask_ps(
        _mm256_and_ps(_mm256_cmp_ps(v, low, _CMP_GE_OQ), _mm256_cmp_ps(v, high, _CMP_LE_OQ)));
    const __m256i id =
        kPositions ? _mm256_add_epi32(lane_offsets, _mm256_set1_epi32(static_cast<int>(i)))
                   : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + i));
    const __m256i lanes =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(kCompactTable.lanes[mask]));
    _mm256_storeu_ps(out_values + m, _mm256_permutevar8x32_ps(v, lanes));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_ids + m),
                        _mm256_permutevar8x32_epi32(id, lanes));
    m += __builtin_popcount(static_cast<unsigned>(mask));
  }
  return compact_between_scalar<kPositions>(values, ids, i, n, lo, hi, out_ids,
                                out_values, m);
}
#endif

/// Whether the x86 AVX2 paths run: always when the build targets AVX2, otherwise when the CPU has
/// it (as the row-loop clones pick), never with SPECDEC_NO_CPU_CLONES or off x86.
inline bool use_x86_avx2() {
#if defined(SPECDEC_X86_COMPACT) && defined(__AVX2__)
  return true;
#elif defined(SPECDEC_X86_COMPACT) && !defined(SPECDEC_NO_CPU_CLONES)
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

/// compact_between_* for this CPU: AVX2 (use_x86_avx2) else the scalar loop. (AVX-512's compress
/// measured slower than the permute table on the machine of docs/backends.md.)
template <bool kPositions>
inline std::int64_t compact_between(const float* values, const std::int32_t* ids, std::int64_t n,
                                    float lo, float hi, std::int32_t* out_ids, float* out_values) {
#ifdef SPECDEC_X86_COMPACT
  if (use_x86_avx2()) {
    return compact_between_avx2<kPositions>(values, ids, n, lo, hi, out_ids, out_values);
  }
#endif
  return compact_between_scalar<kPositions>(values, ids, 0, n, lo, hi, out_ids, out_values, 0);
}

#ifdef SPECDEC_X86_COMPACT
/// The positions of the entries of `values` at least `lo`, ascending, when few are (a few in a
/// hundred): a 64-bit mask per 64 entries, whose set bits are taken four at a time without a
/// branch (a compaction of every 8 entries, or a branch on each, costs more when most are empty
/// and the data is random). Returns their count; ids[count .. count + 3] may be written.
[[gnu::target("avx2,popcnt")]] inline std::int64_t select_at_least_avx2(const float* values,
                                                                        std::int64_t n, float lo,
                                                                        std::int32_t* ids,
                                                                        std::int32_t first = 0) {
  const __m256 low = _mm256_set1_ps(lo);
  std::int64_t m = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    std::uint64_t word = 0;
    for (int k = 0; k < 8; ++k) {
      const __m256 v = _mm256_loadu_ps(values + i + 8 * k);
      word |= static_cast<std::uint64_t>(static_cast<unsigned>(
                  _mm256_movemask_ps(_mm256_cmp_ps(v, low, _CMP_GE_OQ))))
              << (8 * k);
    }
    for (int k = 0; k < 4; ++k) {
      ids[m] = first + static_cast<std::int32_t>(i + __builtin_ctzll(word | (1ull << 63)));
      m += word != 0 ? 1 : 0;
      word &= word - 1;
    }
    while (word != 0) {  // more than four in 64: rare
      ids[m++] = first + static_cast<std::int32_t>(i + __builtin_ctzll(word));
      word &= word - 1;
    }
  }
  for (; i < n; ++i) {
    ids[m] = first + static_cast<std::int32_t>(i);
    m += values[i] >= lo ? 1 : 0;
  }
  return m;
}
#endif

/// The ids (ascending) and logits of the entries of a tile at least `gate`, the tile's first entry
/// having id `first`; returns their count. Entries up to kScratchSlack past it may be written.
/// kSelective: a gate that keeps few entries.
template <bool kSelective, class T>
std::int64_t gather_tile(const T* logits, std::int64_t count, std::int32_t first, float gate,
                         std::int32_t* ids, float* values) {
  std::int64_t m = 0;
  if constexpr (std::is_same_v<T, float>) {
#ifdef SPECDEC_X86_COMPACT
    if (kSelective && use_x86_avx2()) {
      m = select_at_least_avx2(logits, count, gate, ids, first);
      for (std::int64_t j = 0; j < m; ++j) values[j] = logits[ids[j] - first];
      return m;
    }
#endif
    m = compact_between<true>(logits, nullptr, count, gate, std::numeric_limits<float>::infinity(),
                              ids, values);
    for (std::int64_t j = 0; j < m; ++j) ids[j] += first;
  } else {
    for (std::int64_t i = 0; i < count; ++i) {
      const float logit = to_float(logits[i]);
      ids[m] = first + static_cast<std::int32_t>(i);
      values[m] = logit;
      m += logit >= gate ? 1 : 0;
    }
  }
  return m;
}

/// The largest and smallest signed_order_key of `count` entries, into (best, worst).
template <class T>
SPECDEC_ENTRY_INLINE void key_range(const T* logits, std::int64_t count, std::int32_t& best,
                                    std::int32_t& worst) {
  std::int32_t hi = best, lo = worst;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int32_t key = signed_order_key(to_float(logits[i]));
    hi = key > hi ? key : hi;
    lo = key < lo ? key : lo;
  }
  best = hi;
  worst = lo;
}

/// key_range over a tile or a row (a row loop: compiled for the CPU's vector width).
template <class T>
SPECDEC_ROW_LOOP void add_key_range(const T* logits, std::int64_t count, std::int32_t& best,
                                    std::int32_t& worst) {
  key_range(logits, count, best, worst);
}

/// The extreme keys of the entries read (signed_order_key): the row's largest logit, and whether
/// it holds a NaN or +inf (a key above +inf's or, negative, below -inf's).
struct KeyRange {
  std::int32_t best = std::numeric_limits<std::int32_t>::min();
  std::int32_t worst = std::numeric_limits<std::int32_t>::max();

  template <class T>
  void add(const T* logits, std::int64_t count) {
    add_key_range(logits, count, best, worst);
  }
  /// A NaN or +inf was read.
  bool bad() const { return best >= kInfKey || worst < -kInfKey - 1; }
  /// A NaN or +inf was read, or no finite entry (the row's checks name the bad entry).
  bool invalid() const { return bad() || !(from_signed_order_key(best) > kNegInf); }
};

/// The ids (ascending) and logits of the entries whose logit is at least `gate`; returns their
/// count. With the row's `tiles` (tile_pass), tiles whose largest logit is below the gate are
/// skipped unread; with `range`, every tile's keys are added to it as the tile is read (one read
/// of the row checks and gathers). Every entry below m + kScratchSlack may be written.
template <bool kSelective = false, class T>
std::int64_t gather_at_least(const T* logits, std::int64_t n, float gate, std::int32_t* ids,
                             float* values, const TileSum* tiles = nullptr,
                             KeyRange* range = nullptr) {
  std::int64_t m = 0;
  for (std::int64_t b = 0, t = 0; b < n; b += kSumTile, ++t) {
    if (tiles != nullptr && !(tiles[t].max >= gate)) continue;
    const std::int64_t count = std::min(n - b, kSumTile);
    if (range != nullptr) range->add(logits + b, count);
    m += gather_tile<kSelective>(logits + b, count, static_cast<std::int32_t>(b), gate, ids + m,
                                 values + m);
  }
  return m;
}

/// One tile of a pass: its largest logit (and, into `bad`, whether a NaN or +inf is there), then
/// the tile rule's sum of exp((logit - tile max) * inv_t) and, with kAbove, the same sum over the
/// entries whose logit is at least `threshold`. A tile whose smallest exponent is at least the
/// exponential's floor (no -inf, a range of logits under 88 T) skips the clamp.
template <bool kAbove, bool kRough, class T>
SPECDEC_ENTRY_INLINE TileSum tile_sum(const T* x, std::int64_t count, float inv_t, float threshold,
                                      std::int32_t& bad) {
  // Integer keys with the floats' order: the reductions vectorise at any ISA level.
  KeyRange keys;
  key_range(x, count, keys.best, keys.worst);
  bad |= keys.bad() ? 1 : 0;
  const float max = from_signed_order_key(keys.best);
  if (!(max > kNegInf)) return {max, 0.0f, 0.0f};
  const float least = from_signed_order_key(keys.worst);
  const bool clamp = kRough ? !((least - max) * (inv_t * 1.44269504088896341f) >= -126.0f)
                            : !(scaled_exponent(least, max, inv_t) >= -88.0f);
  float lanes[kSumLanes] = {}, above[kSumLanes] = {};
  const bool with_above = kAbove && max >= threshold;
  if (with_above && clamp) {
    add_tile_terms<true, kRough, true>(x, count, max, inv_t, threshold, lanes, above);
  } else if (with_above) {
    add_tile_terms<true, kRough, false>(x, count, max, inv_t, threshold, lanes, above);
  } else if (clamp) {
    add_tile_terms<false, kRough, true>(x, count, max, inv_t, threshold, lanes, above);
  } else {
    add_tile_terms<false, kRough, false>(x, count, max, inv_t, threshold, lanes, above);
  }
  return {max, add_lanes(lanes), add_lanes(above)};
}

/// The statistics pass: one read of the row, a tile at a time while it is in the first-level
/// cache (tile_sum into tiles[t]). Returns false when the row holds a NaN or +inf.
template <bool kAbove = false, class T>
SPECDEC_ROW_LOOP bool tile_pass(const T* logits, std::int64_t n, float inv_t, TileSum* tiles,
                                float threshold = 0.0f) {
  std::int32_t bad = 0;
  for (std::int64_t b = 0, t = 0; b < n; b += kSumTile, ++t) {
    tiles[t] = tile_sum<kAbove, false>(logits + b, std::min(n - b, kSumTile), inv_t, threshold, bad);
  }
  return bad == 0;
}

/// tile_pass with rough_exp2 terms: sums within kRoughSum of the exact ones, in about half the
/// arithmetic.
template <bool kAbove = false, class T>
SPECDEC_BOUND_LOOP bool rough_tile_pass(const T* logits, std::int64_t n, float inv_t,
                                        TileSum* tiles, float threshold = 0.0f) {
  std::int32_t bad = 0;
  for (std::int64_t b = 0, t = 0; b < n; b += kSumTile, ++t) {
    tiles[t] = tile_sum<kAbove, true>(logits + b, std::min(n - b, kSumTile), inv_t, threshold, bad);
  }
  return bad == 0;
}

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

/// A warp's scratch (warp_scratch_words words at `base`), each array with kScratchSlack entries
/// of room past n.
struct WarpScratch {
  std::int32_t* ids;     // candidate ids
  std::int32_t* bucket;  // a bucket list, or a work area for the cut
  float* values;         // the candidates' logits or probabilities
  TileSum* tiles;        // tile_count(n) entries
};

inline WarpScratch warp_scratch(std::int32_t* base, std::int64_t n) {
  const std::int64_t stride = n + kScratchSlack;
  return {base, base + stride, reinterpret_cast<float*>(base + 2 * stride),
          reinterpret_cast<TileSum*>(base + 3 * stride)};
}

/// Top-k of z (the k largest, ties to the lowest id) in one read of the row that also checks it;
/// returns false (and cuts nothing) when the row holds a NaN or +inf or no finite entry, else
/// leaves the k kept ids sorted by id in ids[0, k). A long row is gathered behind a gate from a
/// sample of 32 runs spread over it (its 3k n / 2048-th largest value, so the gate keeps about
/// three times k) and
/// the gathered entries narrowed with nth_element; a row too short for that, or a gate that kept
/// fewer than k, is gathered behind a running threshold instead. `values` is scratch of
/// n + kScratchSlack floats.
template <class T>
bool top_k_cut(const T* logits, std::int64_t n, std::int64_t k, WarpStats& s, std::int32_t* ids,
               float* values) {
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
  s.top_k_last = ids[k - 1];
  s.top_k_value = z(ids[k - 1]);
  std::sort(ids, ids + k);
  return true;
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
  double kept = 0.0;  // in double, as keep_top_p (and nucleus_cut) sums the nucleus
  for (std::int64_t j = 0; j < m; ++j) {
    if (!below_cut(values[j], ids[j], s.top_p_value, s.top_p_last)) kept += values[j];
  }
  s.inv_top_p_kept = static_cast<float>(1.0 / kept);
  return true;
}

/// The nucleus cut over pruned candidates (ids ascending with their positive probabilities, at
/// least the prune bound), the same cut as top_p_cut without ordering them: a sample of 64 picks
/// a bracket around the estimated cut, one pass sums the mass above it and inside it (exactly,
/// masses_around), and the part holding the cut is compacted into `work` (room for
/// `capacity` ids and as many values); the last <= 96 entries are ordered by (value, -id). Returns
/// false when the candidates hold less than top_p (the caller widens them).
inline bool nucleus_cut(const std::int32_t* ids, const float* values, std::int64_t m, float top_p,
                        std::int32_t* work, std::int64_t capacity, std::int32_t* bucket,
                        WarpStats& s) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr int kSample = 64, kMargin = 3;
  constexpr std::int64_t kOrderAll = 96;
  const double target = static_cast<double>(top_p);
  // Invariant once the set's mass is known: above (the mass ranked before the set) < target <=
  // above + set_mass. Before that the set is every candidate and its mass about 1.
  double above = 0.0, set_mass = 1.0;
  bool mass_known = false;
  const float* set_values = values;
  const std::int32_t* set_ids = ids;
  std::int64_t count = m;
  std::int32_t* work_ids = work;
  float* work_values = reinterpret_cast<float*>(work + capacity);
  if (count <= kOrderAll) {
    const Masses all = masses_around(values, m, 0.0f, kInf);
    if (all.within < target) return false;
  }
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
      if (above + set_mass * (prefix / sample_mass) >= target) {
        at = k;
        break;
      }
    }
    const float hi = at >= kMargin ? sample[at - kMargin] : kInf;
    const float lo = at + kMargin < kSample ? sample[at + kMargin] : 0.0f;
    const Masses part = masses_around(set_values, count, lo, hi);
    if (!mass_known) {
      set_mass = part.below + part.within + part.above;
      if (set_mass < target) return false;
      mass_known = true;
    }
    float keep_lo = lo, keep_hi = hi;
    if (above + part.above >= target) {  // the cut is above the bracket
      keep_lo = std::nextafter(hi, kInf);
      keep_hi = kInf;
      set_mass = part.above;
    } else if (above + part.above + part.within < target) {  // below it
      keep_lo = 0.0f;
      keep_hi = std::nextafter(lo, 0.0f);
      above += part.above + part.within;
      set_mass = part.below;
    } else {
      above += part.above;
      set_mass = part.within;
    }
    const std::int64_t kept = compact_between<false>(set_values, set_ids, count, keep_lo, keep_hi,
                                                     work_ids, work_values);
    if (kept == count) break;  // ties everywhere: no progress, order what is left
    set_values = work_values;
    set_ids = work_ids;
    count = kept;
  }
  if (count > kOrderAll) return top_p_cut(ids, values, m, top_p, false, false, bucket, s);
  // (value bits, complement of the id): descending keys are the ranking, ties to the lowest id.
  std::uint64_t keys[kOrderAll];
  for (std::int64_t j = 0; j < count; ++j) {
    keys[j] = (static_cast<std::uint64_t>(std::bit_cast<std::uint32_t>(set_values[j])) << 32) |
              (0xffffffffu - static_cast<std::uint32_t>(set_ids[j]));
  }
  std::sort(keys, keys + count, [](std::uint64_t a, std::uint64_t b) { return a > b; });
  std::int64_t cut = count - 1;
  double running = above;
  for (std::int64_t j = 0; j < count; ++j) {
    running += static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(keys[j] >> 32)));
    if (running >= target) {
      cut = j;
      break;
    }
  }
  s.top_p_value = std::bit_cast<float>(static_cast<std::uint32_t>(keys[cut] >> 32));
  s.top_p_last = static_cast<std::int64_t>(0xffffffffu - static_cast<std::uint32_t>(keys[cut]));
  // The nucleus mass is the running sum at the cut (exact, as keep_top_p sums it in double).
  s.inv_top_p_kept = static_cast<float>(1.0 / running);
  return true;
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
    if (top_p && !small) bound = 0.5 * (1.0 - static_cast<double>(w.top_p)) / static_cast<double>(n);
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
        cut_found =
            m <= n / 2 &&
            nucleus_cut(ids, values, m, w.top_p, scratch.bucket, n / 2, scratch.bucket, s) &&
            s.top_p_value > exp_flush(scaled_exponent(estimate, max, inv_t)) * inv_sum;
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
    const bool complete = top_k || small;
    // Gated candidates: select the cut by mass; a work area of half the bucket list's ids holds
    // them and their values.
    const bool found =
        cut_found ||
        (!complete && m <= n / 2
             ? nucleus_cut(ids, values, m, w.top_p, scratch.bucket, n / 2, scratch.bucket, s)
             : top_p_cut(ids, values, m, w.top_p, small, complete, scratch.bucket, s));
    if (!found) {
      // Rounding left the candidates short of the mass: take every positive entry.
      m = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float p = exp_flush(scaled_exponent(to_float(logits[i]), max, inv_t)) * inv_sum;
        ids[m] = static_cast<std::int32_t>(i);
        values[m] = p;
        m += p > 0.0f ? 1 : 0;
      }
      top_p_cut(ids, values, m, w.top_p, small, true, scratch.bucket, s);
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

/// The statistics of warp `w` applied to a row of logits (valid: finite or -inf, one finite).
/// `invalid` is set (and nothing else computed) when the row holds a NaN or +inf or no finite
/// entry, for the caller to report. When the warp cuts (top-k, top-p or min-p) and `support` is
/// given, *support = m: every entry the warp keeps is among scratch.ids[0, m), ascending.
template <class T>
WarpStats warp_stats(const Warp& w, const T* logits, std::int64_t n, WarpScratch scratch,
                     bool& invalid, std::int64_t* support = nullptr) {
  WarpStats s;
  const bool top_k = !w.is_greedy() && w.top_k > 0 && w.top_k < n;
  if (w.is_greedy()) {
    // No exponentials: a read for validity, then the argmax.
    KeyRange keys;
    keys.add(logits, n);
    invalid = keys.invalid();
    if (!invalid) s.greedy = row_argmax(logits, n);
    return s;
  }
  s.inv_temperature = 1.0f / w.temperature;
  const float inv_t = s.inv_temperature;
  std::int64_t m = 0;  // top-k's candidates in scratch.ids, ascending
  if (top_k) {
    invalid = !top_k_cut(logits, n, w.top_k, s, scratch.ids, scratch.values);
    if (invalid) return s;
    m = w.top_k;
    const RowSum row = sparse_row_sum(logits, scratch.ids, m, inv_t, scratch.tiles);
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

/// How far a rough pass's sums may stray, relative, from the exact ones: its terms lie within
/// 1.2e-4 of exp_flush's (plus 2^-125, nothing against a sum of at least 1), each float sum within
/// 5e-6 of its terms' sum; the margin is eight times that.
inline constexpr double kRoughSum = 1e-3;

/// A row read once with rough exponentials, for a warp whose only cut is top-p: the largest logit
/// is exact, the softmax sum and the mass at or above a threshold within kRoughSum. That bounds an
/// entry's warped probability (warped_probability_bounds) closely enough to decide most
/// acceptances, in about half the arithmetic of the exact pass; the rest are decided exactly.
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
         std::isfinite(1.0f / w.temperature * 1.44269504088896341f);
}

/// The rough pass of a row for an entry whose logit is `logit`. With top-p, also the mass at or
/// above a threshold just below the logit: the margin (1e-3 in units of the exponent) covers the
/// rounding by which an entry of a lower logit can reach the entry's probability.
template <class T>
RoughRow rough_row(const Warp& w, const T* logits, std::int64_t n, float logit, TileSum* tiles) {
  RoughRow row;
  const float inv_t = 1.0f / w.temperature;
  row.inv_temperature = inv_t;
  const bool valid = w.top_p < 1.0f
                         ? rough_tile_pass<true>(logits, n, inv_t, tiles, logit - 1e-3f / inv_t)
                         : rough_tile_pass<false>(logits, n, inv_t, tiles);
  const RowSum sum = combine_tiles(tiles, tile_count(n), inv_t);
  row.invalid = !valid || !(sum.max > kNegInf);
  if (row.invalid) return row;
  row.max = sum.max;
  row.sum = sum.sum;
  row.above = sum.above / sum.sum;
  return row;
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
