// SPDX-License-Identifier: MIT
// The softmax sum of a row by a deterministic reduction rule (docs/backends.md): the sum is taken
// over tiles of kSumTile consecutive entries, each with its own largest logit m_t: lane j (of
// kSumLanes) adds exp((logit - m_t) / T) of the entries whose offset in the tile is j mod kSumLanes
// in increasing order, the lanes are added in order 0..kSumLanes-1 (the tile's sum s_t), and the
// row's sum is s_t * exp((m_t - max) / T) added in double in tile order. So the row is read once, a
// tile at a time while it is in the first-level cache. Entries outside a kept set add +0, so a
// sparse set (top-k) gives the bits of a row holding -inf elsewhere.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <numbers>

#include "specdec/core/exponential.hpp"
#include "specdec/core/key_range.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/row_loop.hpp"
#include "specdec/core/tile_combine.hpp"

namespace specdec::detail {

/// The tile rule's lane sums over `count` (at most kSumTile) entries of a tile: lane j adds
/// exp((logit - max) * inv_t) of the entries at offsets j mod kSumLanes in order (an entry past
/// the tile's end would add +0), into `lanes`; with kAbove, `above` gets the same sums over the
/// entries whose logit is at least `threshold`. The exponentials go straight into the lanes.
/// kClamp: some entry's exponent may be below exp_flush's floor. kRough: rough_exp2 terms instead.
template <bool kAbove, bool kRough, bool kClamp, class T>
SPECDEC_ENTRY_INLINE void add_tile_terms(const T* x, std::int64_t count, float max, float inv_t,
                                         float threshold, float* lanes, float* above) {
  const float rough_scale = inv_t * std::numbers::log2e_v<float>;
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

/// A tile's largest and smallest logits, by integer keys with the floats' order (the reductions
/// vectorise at any ISA level); into `bad`, whether a NaN or +inf is there.
struct TileRange {
  float max;
  float least;
};
template <class T>
SPECDEC_ENTRY_INLINE TileRange tile_range(const T* x, std::int64_t count, std::int32_t& bad) {
  KeyRange keys;
  key_range(x, count, keys.best, keys.worst);
  bad |= keys.bad() ? 1 : 0;
  return {from_signed_order_key(keys.best), from_signed_order_key(keys.worst)};
}

/// One tile of a pass: its largest logit (and, into `bad`, whether a NaN or +inf is there), then
/// the tile rule's sum of exp((logit - tile max) * inv_t) and, with kAbove, the same sum over the
/// entries whose logit is at least `threshold`. A tile whose smallest exponent is at least the
/// exponential's floor (no -inf, a range of logits under 88 T) skips the clamp.
template <bool kAbove, bool kRough, class T>
SPECDEC_ENTRY_INLINE TileSum tile_sum(const T* x, std::int64_t count, float inv_t, float threshold,
                                      std::int32_t& bad) {
  const TileRange range = tile_range(x, count, bad);
  const float max = range.max, least = range.least;
  if (!(max > kNegInf)) return {max, 0.0f, 0.0f};
  const float rough_scale = inv_t * std::numbers::log2e_v<float>;
  const bool clamp = kRough ? !((least - max) * rough_scale >= -126.0f)
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
    tiles[t] =
        tile_sum<kAbove, false>(logits + b, std::min(n - b, kSumTile), inv_t, threshold, bad);
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

/// A logit read through a packed mask word (xgrammar's layout): itself where bit j of `word` is
/// set, else -inf. A bit select, no branch per entry, so the loops over a word's 32 entries
/// vectorise.
SPECDEC_ENTRY_INLINE float masked_logit(float logit, std::uint32_t word, int j) {
  const std::uint32_t keep = 0u - ((word >> j) & 1u);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(logit) & keep) |
                              (std::bit_cast<std::uint32_t>(kNegInf) & ~keep));
}

/// Writes `count` entries of `logits` read through the packed mask `mask` (bit i of word i / 32)
/// into `out`: the entries masked_logit keeps, -inf elsewhere.
template <class T>
SPECDEC_ENTRY_INLINE void write_masked(const T* logits, const std::uint32_t* mask,
                                       std::int64_t count, float* out) {
  const std::int64_t words = count / 32;
  for (std::int64_t k = 0; k < words; ++k) {
    const std::uint32_t word = mask[k];
    for (int j = 0; j < 32; ++j) {
      out[32 * k + j] = masked_logit(to_float(logits[32 * k + j]), word, j);
    }
  }
  for (std::int64_t i = 32 * words; i < count; ++i) {
    out[i] = masked_logit(to_float(logits[i]), mask[words], static_cast<int>(i - 32 * words));
  }
}

/// write_masked over a whole row (a row loop: compiled for the CPU's vector width).
template <class T>
SPECDEC_ROW_LOOP void write_masked_row(const T* logits, const std::uint32_t* mask, std::int64_t n,
                                       float* out) {
  write_masked(logits, mask, n, out);
}

/// The rough terms of the entries of a tile of whole mask words that `mask` keeps, read in place,
/// into `lanes` (and `above`: those at or above `threshold`) by the tile rule's lanes, against
/// `max`, the largest logit of the tile, kept or not. An entry outside the mask adds +0: its term
/// is computed from its logit (finite) and its bits cleared.
template <bool kAbove, bool kClamp, class T>
SPECDEC_ENTRY_INLINE void add_masked_rough_terms(const T* x, const std::uint32_t* mask,
                                                 std::int64_t count, float max, float inv_t,
                                                 float threshold, float* lanes, float* above) {
  static_assert(kSumLanes == 16);  // two lane groups a mask word
  const float rough_scale = inv_t * std::numbers::log2e_v<float>;
  const float rough_floor = -126.0f / rough_scale;
  // `keep`: all ones where the entry's bit is set (the bit shifted to the sign, then spread).
  const auto add = [&](int j, float logit, std::int32_t keep) {
    const float d = logit - max;
    const float term =
        std::bit_cast<float>(std::bit_cast<std::int32_t>(rough_exp2(
                                 kClamp ? (d > rough_floor ? d : rough_floor) : d, rough_scale)) &
                             keep);
    lanes[j] += term;
    if constexpr (kAbove) above[j] += keep_if(logit >= threshold, term);
  };
  for (std::int64_t k = 0; k < count / 32; ++k) {  // a word: its two groups of lanes in turn
    const std::uint32_t word = mask[k];
    for (int j = 0; j < kSumLanes; ++j) {
      add(j, to_float(x[32 * k + j]), static_cast<std::int32_t>(word << (31 - j)) >> 31);
    }
    for (int j = 0; j < kSumLanes; ++j) {
      add(j, to_float(x[32 * k + 16 + j]), static_cast<std::int32_t>(word << (15 - j)) >> 31);
    }
  }
}

/// A mixed tile of whole mask words summed through its mask in place: its largest logit, kept or
/// not, as the tile's reference (any logit at or above the kept ones serves a rough pass's
/// bounds), then the rough sums of the kept entries (add_masked_rough_terms). `bad` when a NaN or
/// +inf was read, behind the mask or not.
template <bool kAbove, class T>
SPECDEC_ENTRY_INLINE TileSum masked_rough_tile_sum(const T* x, const std::uint32_t* mask,
                                                   std::int64_t count, float inv_t,
                                                   float threshold, std::int32_t& bad) {
  const TileRange range = tile_range(x, count, bad);
  const float max = range.max, least = range.least;
  if (!(max > kNegInf)) return {max, 0.0f, 0.0f};
  float lanes[kSumLanes] = {}, above[kSumLanes] = {};
  if ((least - max) * (inv_t * std::numbers::log2e_v<float>) >= -126.0f) {  // as tile_sum
    add_masked_rough_terms<kAbove, false>(x, mask, count, max, inv_t, threshold, lanes, above);
  } else {
    add_masked_rough_terms<kAbove, true>(x, mask, count, max, inv_t, threshold, lanes, above);
  }
  return {max, add_lanes(lanes), add_lanes(above)};
}

/// Bounds of rough_tile_pass for the row whose entries outside the packed mask `mask` are -inf,
/// without writing that row. A tile its mask words forbid whole is not read (a grammar's mask
/// inside a structure allows a few runs of ids: most of the row is never read), one they allow
/// whole is summed in place, and a mixed tile is summed through its mask in place
/// (masked_rough_tile_sum: its sums relative to its largest logit, masked or not). Where that
/// reference lies too far above the kept entries for the rough terms' floor (a kept sum under
/// 2^-40 of it), or a NaN or +inf lies in the tile, the tile is written masked into a buffer in
/// the first-level cache and summed from there, as the pass over the masked row sums it.
template <bool kAbove = false, class T>
SPECDEC_BOUND_LOOP bool masked_rough_tile_pass(const T* logits, const std::uint32_t* mask,
                                               std::int64_t n, float inv_t, TileSum* tiles,
                                               float threshold = 0.0f) {
  static_assert(kSumTile % 32 == 0);
  alignas(64) float tile[kSumTile];
  std::int32_t bad = 0;
  for (std::int64_t b = 0, t = 0; b < n; b += kSumTile, ++t) {
    const std::int64_t count = std::min(n - b, kSumTile);
    const std::uint32_t* words = mask + b / 32;
    std::uint32_t any = 0, all = ~0u;
    for (std::int64_t k = 0; k < count / 32; ++k) {
      any |= words[k];
      all &= words[k];
    }
    if (count % 32 == 0 && any == 0u) {
      tiles[t] = {kNegInf, 0.0f, 0.0f};  // tile_sum's answer for a tile of -inf
      continue;
    }
    if (count % 32 == 0 && all == ~0u) {
      tiles[t] = tile_sum<kAbove, true>(logits + b, count, inv_t, threshold, bad);
      continue;
    }
    if (count % 32 == 0) {
      std::int32_t read_bad = 0;
      const TileSum s =
          masked_rough_tile_sum<kAbove>(logits + b, words, count, inv_t, threshold, read_bad);
      if (read_bad == 0 && s.sum >= 0x1p-40f) {
        tiles[t] = s;
        continue;
      }
    }
    write_masked(logits + b, words, count, tile);
    tiles[t] = tile_sum<kAbove, true>(tile, count, inv_t, threshold, bad);
  }
  return bad == 0;
}

}  // namespace specdec::detail
