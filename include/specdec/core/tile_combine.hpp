// SPDX-License-Identifier: MIT
// The parts of the softmax sum's reduction rule (core/tile_sum.hpp) that the CUDA kernels share
// with the host: the tiles and lanes, a tile's result (TileSum), the combination of a row's tiles
// in tile order, and the rule over a sparse set of entries (a top-k row's). Nothing here formats
// or allocates, so nvcc compiles it for the device.
#pragma once

#include <bit>
#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/exponential.hpp"
#include "specdec/core/log_space.hpp"

namespace specdec::detail {

/// The softmax sum's tiles and lanes.
inline constexpr std::int64_t kSumTile = 1024;
inline constexpr int kSumLanes = 16;

/// The exponent of a logit's softmax term, (logit - max) / temperature. The one form every path
/// uses: a product feeding a subtraction could be fused into an FMA in one context and not in
/// another, a subtraction feeding a product cannot.
SPECDEC_ENTRY_INLINE float scaled_exponent(float logit, float max, float inv_temperature) {
  return (logit - max) * inv_temperature;
}

/// `value` when `keep`, else +0, by masking its bits.
SPECDEC_ENTRY_INLINE float keep_if(bool keep, float value) {
  return std::bit_cast<float>(std::bit_cast<std::int32_t>(value) &
                              -static_cast<std::int32_t>(keep));
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

/// A row's largest logit and its softmax sum: sum of exp((logit - max) * inv_t) over the row
/// (`above`: over the entries at or above the pass's threshold).
struct RowSum {
  float max = kNegInf;
  double sum = 0.0;
  double above = 0.0;
};

/// The factor a tile's sums take in the row's: exp((tile max - row max) * inv_t), in double (its
/// products with a float sum are exact).
SPECDEC_ENTRY_INLINE double tile_scale(float tile_max, float row_max, float inv_t) {
  return static_cast<double>(exp_flush(scaled_exponent(tile_max, row_max, inv_t)));
}

/// The row's sum from its tiles: each tile's sum times exp((tile max - max) * inv_t), the product
/// exact in double, added in double in tile order. A tile without a finite entry adds nothing.
/// `tiles[t]` gives tile t's TileSum: a pointer, or a CUDA kernel's view of global memory.
template <class Tiles>
SPECDEC_ENTRY_INLINE RowSum combine_tiles(const Tiles& tiles, std::int64_t count, float inv_t) {
  RowSum row;
  for (std::int64_t t = 0; t < count; ++t) {
    const float max = TileSum(tiles[t]).max;
    row.max = max > row.max ? max : row.max;
  }
  for (std::int64_t t = 0; t < count; ++t) {
    const TileSum tile = tiles[t];
    if (!(tile.max > kNegInf)) continue;
    const double scale = tile_scale(tile.max, row.max, inv_t);
    row.sum += static_cast<double>(tile.sum) * scale;
    row.above += static_cast<double>(tile.above) * scale;
  }
  return row;
}

/// The lanes added in order 0..kSumLanes-1: a tile's sum.
SPECDEC_ENTRY_INLINE float add_lanes(const float* lanes) {
  float sum = 0.0f;
  for (int j = 0; j < kSumLanes; ++j) sum += lanes[j];
  return sum;
}

/// The index of the lowest set bit of x != 0.
SPECDEC_ENTRY_INLINE int lowest_set_bit(std::uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __ffs(static_cast<int>(x)) - 1;
#else
  return std::countr_zero(x);
#endif
}

/// Whether candidate j of ids (ascending) is the first of its tile.
SPECDEC_ENTRY_INLINE bool opens_tile(const std::int32_t* ids, std::int64_t j) {
  return j == 0 || ids[j] / kSumTile != ids[j - 1] / kSumTile;
}

/// The TileSum of the candidates of the tile that candidate j opens (opens_tile), as the tile rule
/// sums that tile of the dense row: the others count as -inf, which adds +0. logit(i) is the logit
/// of entry ids[i]; `end` gets the first candidate past the tile.
template <class Logit>
SPECDEC_HOST_DEVICE TileSum sparse_tile_sum(const std::int32_t* ids, std::int64_t m, std::int64_t j,
                                            float inv_t, const Logit& logit, std::int64_t& end) {
  const std::int64_t tile = ids[j] / kSumTile;
  float max = kNegInf;
  for (end = j; end < m && ids[end] / kSumTile == tile; ++end) {
    const float x = logit(end);
    max = x > max ? x : max;
  }
  float lanes[kSumLanes] = {};
  std::uint32_t used = 0;  // the lanes holding an entry
  for (std::int64_t i = j; i < end; ++i) {
    const auto lane = static_cast<int>((ids[i] - tile * kSumTile) % kSumLanes);
    lanes[lane] += exp_flush(scaled_exponent(logit(i), max, inv_t));
    used |= 1u << lane;
  }
  // add_lanes over the lanes in use, in lane order: the others hold +0, which adds nothing.
  float sum = 0.0f;
  for (; used != 0u; used &= used - 1u) sum += lanes[lowest_set_bit(used)];
  return {max, sum, 0.0f};
}

/// The tile rule over the entries ids[0, m) (ascending) of a row, every other entry counting as
/// -inf: the tiles, lanes and order of that dense row, whose -inf entries would add +0. `tiles`
/// has room for tile_count(n) entries; logit(j) is the logit of entry ids[j] (the CUDA kernels
/// compute the tiles a thread each, then combine them).
template <class Logit>
SPECDEC_HOST_DEVICE RowSum sparse_row_sum(const std::int32_t* ids, std::int64_t m, float inv_t,
                                          TileSum* tiles, const Logit& logit) {
  std::int64_t count = 0;
  for (std::int64_t j = 0, end = 0; j < m; j = end) {
    tiles[count++] = sparse_tile_sum(ids, m, j, inv_t, logit, end);
  }
  return combine_tiles(tiles, count, inv_t);
}

}  // namespace specdec::detail
