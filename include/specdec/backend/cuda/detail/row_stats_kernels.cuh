// SPDX-License-Identifier: MIT
// The statistics of warped rows of logits, a row split over several blocks (the first launch of
// the chain step and of the warp): each block reads its whole 1024-entry tiles once and writes
// their TileStats; the last block of a row to finish (a fence, then a per-row counter) combines
// the tiles in tile order into the row's RowStats. A tile's sum keeps the CPU's 16 lanes and
// order (core/tile_sum.hpp) and the tiles combine as combine_tiles does, so the statistics are
// warp_stats's bits for a warp without a cut (temperature alone, or greedy), however many blocks
// share a row and in whatever order they run; with top-p the last block also estimates the gate
// of the row's nucleus, which nucleus_kernels.cuh then cuts.
// IWYU pragma: private
#pragma once

#include <cmath>
#include <cstdint>

#include "specdec/backend/cuda/detail/block_sweep.cuh"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/last_block.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/top_k_lists.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/backend/status.hpp"
#include "specdec/core/order_key.hpp"
#include "specdec/core/tile_combine.hpp"
#include "specdec/core/warp/cut_rules.hpp"
#include "specdec/core/warp/stats.hpp"

namespace specdec::backend::cuda_impl {

/// One tile of a row: its largest logit, the tile rule's sum of exp((logit - max) / T), the id
/// of its first largest entry, and whether it holds a NaN or +inf. 16 bytes.
struct TileStats {
  float max;
  float sum;
  std::int32_t argmax;
  std::int32_t bad;
};

/// A row's statistics in device memory: the CPU's WarpStats, and whether the row is invalid (a NaN
/// or +inf, or no finite entry).
struct RowStats : specdec::detail::WarpStats {
  std::int32_t invalid;
};

/// RowStats::invalid of a row whose warp is bad (the row's own faults leave another nonzero value).
inline constexpr std::int32_t kInvalidWarp = 2;

/// The status of a sequence stopped by a row whose RowStats::invalid is `invalid` (nonzero).
SPECDEC_HOST_DEVICE SequenceStatus row_status(std::int32_t invalid) {
  return invalid == kInvalidWarp ? SequenceStatus::kBadWarp : SequenceStatus::kBadRow;
}

namespace detail {

template <>
inline constexpr bool kDense<TileStats> = true;
static_assert(sizeof(TileStats) == 16, "TileStats has no padding");
template <>
inline constexpr bool kDense<RowStats> = true;
static_assert(sizeof(RowStats) == 48, "RowStats has no padding");

/// Threads per block of the statistics kernel: one warp per tile at a time.
inline constexpr int kStatsThreads = 256;
inline constexpr int kStatsWarps = kStatsThreads / 32;
inline constexpr int kTile = static_cast<int>(specdec::detail::kSumTile);
inline constexpr int kTileLanes = specdec::detail::kSumLanes;

/// The logit rows of one call: `target_rows` rows of `target`, then the rows of `draft` (row r of
/// the set is draft row r - target_rows).
template <class T>
struct LogitRowSet {
  Global<const T> target;
  std::int64_t target_stride;
  std::int64_t target_rows;
  Global<const T> draft;
  std::int64_t draft_stride;

  __device__ __forceinline__ Global<const T> row(std::int64_t r) const {
    return r < target_rows ? target + r * target_stride
                           : draft + (r - target_rows) * draft_stride;
  }
};

/// Which warp a row of the set takes: `shared` for every row, or warps[b] for the rows of
/// sequence b, where target row r belongs to the b with offsets[b] + b <= r < offsets[b + 1] + b
/// + 1 and draft row r to the b with offsets[b] <= r < offsets[b + 1] (a chain batch's layout).
/// With one row per sequence (a warp batch) offsets is null and row r takes warps[r].
struct RowWarps {
  DeviceWarp shared;
  Global<const DeviceWarp> warps;
  Global<const std::int32_t> offsets;  // B + 1, or null
  std::int64_t batch;
  std::int64_t target_rows;

  __device__ __forceinline__ DeviceWarp of(std::int64_t r) const {
    if (warps == nullptr) return shared;
    if (offsets == nullptr) return warps[r];
    const bool is_target = r < target_rows;
    const std::int64_t row = is_target ? r : r - target_rows;
    // The last b whose first row is at most `row` (binary search over the offsets).
    std::int64_t lo = 0, hi = batch - 1;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      const std::int64_t first = offsets[mid] + (is_target ? mid : 0);
      if (first <= row) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return warps[lo];
  }
};

/// Rows at most this long are cut by one thread exactly as the CPU's complete path (every
/// positive entry a candidate, the kept mass summed in id order): they need no gate.
inline constexpr std::int64_t kSmallNucleusRow = 64;

/// Whether warp w cuts rows of n by top-k (not greedy, 0 < k < n).
SPECDEC_HOST_DEVICE bool cuts_by_top_k(const DeviceWarp& w, std::int64_t n) {
  return w.temperature > 0.0f && w.top_k > 0 && w.top_k < n;
}

/// Whether the statistics path takes warp w for rows of n: any warp but a top-k above
/// kStatisticsTopK (the launchers choose the path by it; a warp read from device memory is
/// checked by it).
SPECDEC_HOST_DEVICE bool statistics_warp(const DeviceWarp& w, std::int64_t n) {
  return !cuts_by_top_k(w, n) || w.top_k <= kStatisticsTopK;
}

/// Whether a row's warp cuts it by a top-k the statistics path takes: its statistics are those
/// of its k best, which the statistics launch keeps per block (top_k_lists.cuh) in its one read.
SPECDEC_HOST_DEVICE bool top_k_statistics_row(const DeviceWarp& w, std::int64_t n) {
  return cuts_by_top_k(w, n) && w.top_k <= kStatisticsTopK;
}

/// Warp::validate's rules, for a warp the host has not seen (device-resident warps).
SPECDEC_HOST_DEVICE bool valid_warp(const DeviceWarp& w, std::int64_t n) {
  return w.temperature >= 0.0f && w.temperature <= 3.4e38f && w.top_k >= 0 && w.top_k <= n &&
         w.top_p > 0.0f && w.top_p <= 1.0f && w.min_p >= 0.0f && w.min_p <= 1.0f;
}

/// Whether a row's warp cuts by top-p without top-k: its nucleus is gathered from the row (a
/// min-p may follow it).
__device__ __forceinline__ bool top_p_row(const DeviceWarp& w, std::int64_t n) {
  return w.temperature > 0.0f && w.top_p < 1.0f && !cuts_by_top_k(w, n);
}

/// Whether a row's warp cuts by min-p without top-k (after its nucleus, with top-p).
__device__ __forceinline__ bool min_p_row(const DeviceWarp& w, std::int64_t n) {
  return w.temperature > 0.0f && w.min_p > 0.0f && !cuts_by_top_k(w, n);
}

/// Whether a row's warp cuts by min-p alone (no top-p, no top-k): the warp's write pass cuts it
/// (warp_min_p_write.cuh); the chain step lists its kept entries in the nucleus launch.
SPECDEC_HOST_DEVICE bool min_p_alone(const DeviceWarp& w, std::int64_t n) {
  return w.temperature > 0.0f && w.min_p > 0.0f && !(w.top_p < 1.0f) && !cuts_by_top_k(w, n);
}

/// The softmax probability of a logit under the row's statistics.
__device__ __forceinline__ float softmax_of(const RowStats& s, float logit) {
  return specdec::detail::exp_flush(specdec::detail::scaled_exponent(logit, s.max,
                                                                     s.inv_temperature)) *
         s.inv_sum;
}

/// Rows' histograms of their nucleus candidates in global memory: row r's kNucleusBuckets
/// masses (in units of 2^-53) and counts at r * kNucleusBuckets (nucleus_kernels.cuh fills them).
struct CandidateHistograms {
  Global<unsigned long long> units;
  Global<unsigned int> counts;
  /// Row r's buckets zeroed, by the whole block.
  __device__ void clear(std::int64_t r) const {
    for (std::int64_t b = threadIdx.x; b < kNucleusBuckets; b += blockDim.x) {
      units[r * kNucleusBuckets + b] = 0u;
      counts[r * kNucleusBuckets + b] = 0u;
    }
  }
};

/// The min-p threshold of a row cut by min-p alone: min_p times the row maximum's probability.
__device__ __forceinline__ float min_p_alone_threshold(float min_p, const RowStats& s) {
  return specdec::detail::min_p_threshold(min_p, softmax_of(s, s.max));
}

struct GateShared {
  float mass[128];  // an estimate: float atomics (the hardware's own) are precise enough
};

/// The gate of a top-p row, by the whole block: below it lies less than (1 - top_p) / 2 of the
/// mass, estimated from a sample of 1024 entries (bins of 0.25 in (logit - max) / T, two bins of
/// margin); short rows take the CPU's prune bound (1 - top_p) / (2 n), which never cuts the
/// nucleus. Only a guess for long rows: the cut is checked against it.
/// The CPU's prune bound as a gate: no entry below (1 - top_p) / (2 n) can be in the nucleus (all
/// of them hold less than 1 - top_p); a margin covers rounding.
__device__ __forceinline__ float prune_gate(std::int64_t n, float top_p, const RowStats& s) {
  const double bound = 0.5 * (1.0 - static_cast<double>(top_p)) / static_cast<double>(n);
  return static_cast<float>(static_cast<double>(s.max) +
                            (log(bound / static_cast<double>(s.inv_sum)) - 0.01) /
                                static_cast<double>(s.inv_temperature));
}

template <class T>
__device__ float nucleus_gate(Global<const T> row, std::int64_t n, float top_p,
                              const RowStats& s, GateShared& sh) {
  constexpr int kSample = 1024, kBins = 128;
  constexpr float kBinWidth = 0.25f;
  const float prune = prune_gate(n, top_p, s);
  if (n < 8 * kSample) return prune;
  for (int b = static_cast<int>(threadIdx.x); b < kBins; b += static_cast<int>(blockDim.x))
    sh.mass[b] = 0.0f;
  __syncthreads();
  // 32 runs of 32 neighbours spread over the row: a warp's sample loads are coalesced.
  const std::int64_t stride = n / 32;
  for (int k = static_cast<int>(threadIdx.x); k < kSample; k += static_cast<int>(blockDim.x)) {
    const std::int64_t at = (k / 32) * stride + k % 32;
    const float z = specdec::detail::scaled_exponent(specdec::detail::to_float(row[at]), s.max,
                                                     s.inv_temperature);
    const int bin = z > -kBins * kBinWidth ? static_cast<int>(-z / kBinWidth) : kBins - 1;
    atomicAdd(&sh.mass[bin], specdec::detail::exp_flush(z));
  }
  __syncthreads();
  const double weight = static_cast<double>(n) / kSample * static_cast<double>(s.inv_sum);
  const double allowance = 0.5 * (1.0 - static_cast<double>(top_p));
  double below = 0.0;
  for (int b = kBins - 1; b >= 1; --b) {
    below += weight * static_cast<double>(sh.mass[b]);
    if (below > allowance) {
      const float estimate = s.max - static_cast<float>(b + 2) * kBinWidth / s.inv_temperature;
      return b + 2 < kBins && estimate > prune ? estimate : prune;
    }
  }
  return prune;  // the sample saw the mass only at the top (a peaked row): it tells nothing
}

/// What the whole block finds over a row's cached tiles for its last block: combine_tiles's
/// largest logit (a NaN never taken) and the first tile holding it, whether any tile is bad.
struct TileMaximum {
  float max;
  std::int32_t first;
  std::int32_t bad;

  /// Whether tile t's largest logit v replaces this one: larger, or equal in an earlier tile (what
  /// combine_tiles's walk in order keeps, so the reduction's order does not matter).
  __device__ __forceinline__ bool taken_over_by(float v, std::int32_t t) const {
    return v > max || (v == max && t < first);
  }
};

/// The per-warp results of max_of_tiles (StatsShared).
struct TileMaximumShared {
  TileMaximum warp[kStatsWarps];
};

/// TileMaximum of tiles[0, count) in shared memory by the whole block: each thread its strided
/// tiles, then its warp by shuffles, then the warps in order. Ends with a barrier.
__device__ inline TileMaximum max_of_tiles(const TileStats* tiles, std::int64_t count,
                                           TileMaximumShared& sh) {
  TileMaximum m{specdec::kNegInf, 0x7fffffff, 0};
  for (std::int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    if (m.taken_over_by(tiles[t].max, static_cast<std::int32_t>(t))) {
      m.max = tiles[t].max;
      m.first = static_cast<std::int32_t>(t);
    }
    m.bad |= tiles[t].bad;
  }
  for (int mask = 16; mask > 0; mask /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, m.max, mask);
    const std::int32_t t = __shfl_xor_sync(0xffffffffu, m.first, mask);
    m.bad |= __shfl_xor_sync(0xffffffffu, m.bad, mask);
    if (m.taken_over_by(v, t)) {
      m.max = v;
      m.first = t;
    }
  }
  if (threadIdx.x % 32 == 0) sh.warp[threadIdx.x / 32] = m;
  __syncthreads();
  TileMaximum out = sh.warp[0];
  for (int w = 1; w < kStatsWarps; ++w) {
    const TileMaximum o = sh.warp[w];
    out.bad |= o.bad;
    if (out.taken_over_by(o.max, o.first)) {
      out.max = o.max;
      out.first = o.first;
    }
  }
  __syncthreads();  // sh is read before a later call writes it
  return out;
}

/// The statistics kernel's shared memory.
struct StatsShared {
  union {
    float tile[kStatsWarps][kTile];
    SplitTopKShared top_k;  // a top-k row's block list
  };
  GateShared gate;
  TileMaximumShared maximum;
  RowStats row;
  DeviceWarp warp;
  int last;
};

/// One tile (count <= kTile entries at `tile`) by one warp: the entries into buf, then the
/// CPU's tile rule (buf left holding the exponentials). Lane 0 returns the tile's TileStats.
template <class T>
__device__ __forceinline__ TileStats tile_stats(Global<const T> tile, int count, float inv_t,
                                                float* buf) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  constexpr int kVector = 16 / static_cast<int>(sizeof(T));
  std::int32_t best = specdec::detail::signed_order_key(specdec::kNegInf);
  std::int32_t bad = 0;
  const auto take = [&](int i, float x) {
    buf[i] = x;
    bad |= (x != x || x == -specdec::kNegInf) ? 1 : 0;
    const std::int32_t key = specdec::detail::signed_order_key(x);
    best = key > best ? key : best;
  };
  if (count == kTile && tile.vector_aligned(0)) {
    SPECDEC_UNROLL(8)
    for (int v = lane; v < kTile / kVector; v += 32) {  // 16-byte loads, coalesced
      const auto packed = tile.template load_vec<kVector>(static_cast<std::int64_t>(v) * kVector);
      for (int j = 0; j < kVector; ++j) take(v * kVector + j, specdec::detail::to_float(packed.v[j]));
    }
  } else {
    for (int i = lane; i < count; i += 32) take(i, specdec::detail::to_float(tile[i]));
  }
  for (int mask = 16; mask > 0; mask /= 2) {
    const std::int32_t other = __shfl_xor_sync(0xffffffffu, best, mask);
    best = other > best ? other : best;
    bad |= __shfl_xor_sync(0xffffffffu, bad, mask);
  }
  __syncwarp();
  const float max = specdec::detail::from_signed_order_key(best);
  // The first entry holding the largest key (row_argmax's: -0 and +0 equal).
  int first = kTile;
  for (int i = lane; i < count; i += 32) {
    if (specdec::detail::signed_order_key(buf[i] + 0.0f) ==
            specdec::detail::signed_order_key(max + 0.0f) &&
        i < first) {
      first = i;
    }
  }
  for (int mask = 16; mask > 0; mask /= 2) {
    const int other = __shfl_xor_sync(0xffffffffu, first, mask);
    first = other < first ? other : first;
  }
  // The exponentials by all 32 lanes, each rounded on its own as the CPU's are; then lane j < 16
  // adds those at offsets j mod 16 in order, as the CPU's lane j does (its one chain of sums).
  float sum = 0.0f;
  if (max > specdec::kNegInf) {
    SPECDEC_UNROLL(8)
    for (int i = lane; i < count; i += 32)
      buf[i] = specdec::detail::exp_flush(specdec::detail::scaled_exponent(buf[i], max, inv_t));
    __syncwarp();
    if (lane < kTileLanes) {
      SPECDEC_UNROLL(8)
      for (int i = lane; i < count; i += kTileLanes) sum = specdec::detail::add_rn(sum, buf[i]);
    }
  }
  // The lanes added in order 0..15 (add_lanes).
  float total = 0.0f;
  for (int j = 0; j < kTileLanes; ++j) {
    total = specdec::detail::add_rn(total, __shfl_sync(0xffffffffu, sum, j));
  }
  __syncwarp();
  return {max, total, first, bad};
}

/// The tiles [first, end) of a row that block blockIdx.y takes on the split.
struct BlockTiles {
  std::int64_t first, end;
  __device__ static BlockTiles of(const RowSplit& split) {
    const std::int64_t first = blockIdx.y * split.tiles_per_block;
    const std::int64_t end = first + split.tiles_per_block;
    return {first, end < split.tiles ? end : split.tiles};
  }
};

/// The entries of tile t of a row of n (kTile, or fewer in the last).
__device__ __forceinline__ int tile_entries(std::int64_t n, std::int64_t t) {
  return static_cast<int>(n - t * kTile < kTile ? n - t * kTile : kTile);
}

/// Tiles whose largest logits a pass holds in shared memory at a time (load_tile_maxima).
inline constexpr int kMaximaChunk = kStatsThreads;

/// The largest logits of tiles [first, min(first + kMaximaChunk, end)) of a row (their
/// TileStats in `tiles`) into maxima[0, ..), 16 bytes read per tile, by the whole block; ends with
/// a barrier. A pass that knows which entries it wants (at or above a gate, or not cut) skips the
/// tiles whose largest logit says they hold none.
__device__ inline void load_tile_maxima(Global<const TileStats> tiles, std::int64_t first,
                                        std::int64_t end, float* maxima) {
  __syncthreads();  // earlier readers of maxima are done
  const std::int64_t t = first + threadIdx.x;
  if (threadIdx.x < kMaximaChunk && t < end) maxima[threadIdx.x] = TileStats(tiles[t]).max;
  __syncthreads();
}

/// A row's tiles read as the TileSums combine_tiles takes.
struct TileSums {
  Global<const TileStats> tiles;
  __device__ __forceinline__ TileStats at(std::int64_t t) const { return tiles[t]; }
  __device__ __forceinline__ specdec::detail::TileSum operator[](std::int64_t t) const {
    const TileStats s = tiles[t];
    return {s.max, s.sum, 0.0f};
  }
};

/// How many tiles the statistics kernel's tile buffers hold with their terms (TileStats and a
/// double each: rows up to 1.3M entries).
inline constexpr std::int64_t kCachedTiles = static_cast<std::int64_t>(
    sizeof(float) * kStatsWarps * kTile / (sizeof(TileStats) + sizeof(double)));

/// A row's RowStats from its largest logit and sum (combine_tiles's), whether a tile holds a NaN
/// or +inf (`bad`), and for a greedy row the argmax of the first tile holding that logit.
template <class Argmax>
__device__ RowStats row_stats_of(const specdec::detail::RowSum& sum, std::int32_t bad, float inv_t,
                                 bool greedy, const Argmax& argmax) {
  RowStats out{specdec::detail::WarpStats::uncut(),
               bad != 0 || !(sum.max > specdec::kNegInf) ? 1 : 0};
  out.inv_temperature = inv_t;
  out.max = sum.max;
  out.inv_sum = 1.0f / static_cast<float>(sum.sum);
  if (greedy && out.invalid == 0) {
    out.greedy = argmax();
    out.inv_temperature = 1.0f;
    out.max = 0.0f;
    out.inv_sum = 1.0f;
  }
  return out;
}

/// A row's RowStats from its largest logit and sum (combine_tiles's) and its tiles.
template <class Tiles>
__device__ RowStats finish_row(const Tiles& tiles, std::int64_t count, float inv_t, bool greedy,
                               const specdec::detail::RowSum& sum) {
  std::int32_t bad = 0;
  for (std::int64_t t = 0; t < count; ++t) bad |= tiles.at(t).bad;
  return row_stats_of(sum, bad, inv_t, greedy, [&] {
    std::int32_t argmax = -1;
    for (std::int64_t t = 0; t < count; ++t) {
      const TileStats s = tiles.at(t);
      if (s.max == sum.max) {
        argmax = s.argmax;
        break;
      }
    }
    return argmax;
  });
}

/// A top-k row's part of the statistics launch, by each of its blocks: the block's best k of its
/// part of the row into the row's list (top_k_lists.cuh), and in its slot of `tiles` whether the
/// part holds a NaN or +inf and a drawable entry (max 0 or -inf); the last block of the row writes
/// its RowStats, valid or not, for the nucleus launch to finish from the lists (top_k_cut.cuh).
template <class T>
__device__ void top_k_row_stats(Global<const T> row, std::int64_t n, const RowSplit& split,
                                const DeviceWarp& w, Global<TileStats> tiles,
                                Global<unsigned int> counters, Global<RowStats> stats,
                                Global<std::uint64_t> list, StatsShared& sh) {
  const int parts = top_k_parts(split, w.top_k);
  const TopKPart part = keep_block_top_k(row, n, split, w.top_k, parts, list, sh.top_k);
  if (threadIdx.x == 0) {
    tiles[blockIdx.y] =
        TileStats{part.drawable ? 0.0f : specdec::kNegInf, 0.0f, 0, part.bad ? 1 : 0};
  }
  if (!last_block_of_row(counters, blockIdx.x, split.blocks_per_row, sh.last)) return;
  // The parts' flags read side by side and counted by the block (bad parts above bit 16).
  unsigned int flags = 0;
  for (std::int64_t b = threadIdx.x; b < split.blocks_per_row; b += blockDim.x) {
    const TileStats s = tiles[b];
    flags += (s.bad != 0 ? 0x10000u : 0u) + (s.max > specdec::kNegInf ? 1u : 0u);
  }
  flags = block_all_reduce(flags, Plus{}, sh.top_k.reduce.u);
  if (threadIdx.x != 0) return;
  const std::int32_t bad = valid_warp(w, n) && flags < 0x10000u ? 0 : 1;
  const bool drawable = (flags & 0xffffu) != 0;
  // max and inv_sum are those of the k best, found from the lists.
  RowStats out{specdec::detail::WarpStats::uncut(), bad != 0 || !drawable ? 1 : 0};
  out.inv_temperature = 1.0f / w.temperature;
  stats[0] = out;
}

/// Where the statistics launch writes (row_stats_kernel): the tiles' TileStats, the rows' block
/// counters, RowStats, nucleus gates (null: none) and top-k lists, and the candidate histograms.
struct RowStatsOutputs {
  Global<TileStats> tiles;
  Global<unsigned int> counters;
  Global<unsigned int> list_counts;  // zeroed here for the cut launch's lists
  Global<std::int32_t> failures;     // a status buffer's failure count, zeroed here (or null)
  Global<RowStats> stats;
  Global<float> gates;
  Global<std::uint64_t> lists;
  CandidateHistograms histograms;
};

/// The statistics of every row of `rows` (row r of the set is blockIdx.x), blockIdx.y taking
/// split.tiles_per_block tiles of it: TileStats into o.tiles[r * split.tiles ..], and from the
/// last block of the row RowStats into o.stats[r] and, for a warp cutting by top-p (not top-k),
/// the gate of its nucleus candidates into o.gates[r] (when o.gates is not null; the row's
/// candidate histogram is then zeroed). o.counters[r] must be 0 at launch; it is 0 again after.
/// o.list_counts[r] is zeroed for the cut launch, which counts the row's listed candidates there
/// (the previous call's draws, which read them, are done by now).
template <class T>
__global__ void __launch_bounds__(kStatsThreads)
    row_stats_kernel(LogitRowSet<T> rows, std::int64_t n, RowSplit split, RowWarps warps,
                     RowStatsOutputs o) {
  expect_block_threads(kStatsThreads);
  __shared__ StatsShared sh;
  const std::int64_t r = blockIdx.x;
  const Global<const T> row = rows.row(r);
  if (threadIdx.x == 0) sh.warp = warps.of(r);  // one read of a per-row warp, not one per thread
  __syncthreads();
  const DeviceWarp w = sh.warp;
  const bool greedy = w.temperature == 0.0f;
  const float inv_t = greedy ? 1.0f : 1.0f / w.temperature;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const BlockTiles block = BlockTiles::of(split);
  const Global<TileStats> row_tiles = o.tiles + r * split.tiles;
  if (blockIdx.y == 0 && threadIdx.x == 0) {
    o.list_counts[r] = 0u;
    if (r == 0 && o.failures != nullptr) o.failures[0] = 0;  // for the draws' launch to count
  }
  if (top_k_statistics_row(w, n)) {
    top_k_row_stats(row, n, split, w, row_tiles, o.counters, o.stats + r,
                    o.lists + r * kNucleusListSize, sh);
    return;
  }
  for (std::int64_t t = block.first + warp; t < block.end; t += kStatsWarps) {
    const std::int64_t b = t * kTile;
    TileStats s = tile_stats(row + b, tile_entries(n, t), inv_t, sh.tile[warp]);
    s.argmax += static_cast<std::int32_t>(b);
    if (lane == 0) row_tiles[t] = s;
  }
  // The last block of a row to finish combines its tiles: read side by side into shared memory
  // (the tile buffers are free now), then combined in tile order.
  if (!last_block_of_row(o.counters, r, split.blocks_per_row, sh.last)) return;
  if (split.tiles <= kCachedTiles) {
    // combine_tiles's sum, its largest logit found and its terms (exact products) computed by the
    // whole block, the terms added in tile order by one thread.
    TileStats* cached = reinterpret_cast<TileStats*>(&sh.tile[0][0]);
    double* terms = reinterpret_cast<double*>(cached + kCachedTiles);
    for (std::int64_t t = threadIdx.x; t < split.tiles; t += blockDim.x)
      cached[t] = TileStats(row_tiles[t]);
    __syncthreads();
    const TileMaximum maximum = max_of_tiles(cached, split.tiles, sh.maximum);
    const float max = maximum.max;
    for (std::int64_t t = threadIdx.x; t < split.tiles; t += blockDim.x) {
      const TileStats tile = cached[t];
      terms[t] = tile.max > specdec::kNegInf
                     ? static_cast<double>(tile.sum) * specdec::detail::tile_scale(tile.max, max, inv_t)
                     : 0.0;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      specdec::detail::RowSum sum;
      sum.max = max;
      for (std::int64_t t = 0; t < split.tiles; ++t) sum.sum += terms[t];
      RowStats out = row_stats_of(sum, maximum.bad, inv_t, greedy,
                                  [&] { return cached[maximum.first].argmax; });
      if (!valid_warp(w, n) || !statistics_warp(w, n)) out.invalid = kInvalidWarp;
      o.stats[r] = out;
      sh.row = out;
    }
  } else if (threadIdx.x == 0) {
    RowStats out =
        finish_row(TileSums{row_tiles}, split.tiles, inv_t, greedy,
                   specdec::detail::combine_tiles(TileSums{row_tiles}, split.tiles, inv_t));
    if (!valid_warp(w, n) || !statistics_warp(w, n)) out.invalid = kInvalidWarp;
    o.stats[r] = out;
    sh.row = out;
  }
  __syncthreads();
  if (o.gates == nullptr || !top_p_row(w, n) || sh.row.invalid != 0 || n <= kSmallNucleusRow)
    return;
  o.histograms.clear(r);
  const float gate = nucleus_gate(row, n, w.top_p, sh.row, sh.gate);
  if (threadIdx.x == 0) o.gates[r] = gate;
}

}  // namespace detail
}  // namespace specdec::backend::cuda_impl
