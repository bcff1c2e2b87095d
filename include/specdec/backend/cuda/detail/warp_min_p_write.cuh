// SPDX-License-Identifier: MIT
// Min-p alone in the warp's write pass, with no launch and no read of the row of its own. Its
// threshold (min_p times the row maximum's probability) follows from the statistics, so the write
// pass writes every entry below it as +0 and keeps the others, in id order, in its block's
// segment of the row's list; the last block of the row to finish adds them in id order
// (cut_statistics's kept mass: one chain of float additions, by one thread) and writes them. Each
// output is written once. Where a block kept more entries than its segment holds, the last block
// goes back to the row: it adds the kept entries tile by tile, then writes them (two more reads,
// only then). Tiles whose largest logit is below the threshold are written as zeros unread.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/last_block.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/core/warp/stats.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Entries of a tile each warp packs: consecutive, 32 side by side.
inline constexpr int kMinPSpan = kTile / kStatsWarps;

/// A tile's kept entries packed in id order, the warps' counts, and the last block's kept mass.
struct MinPWriteShared {
  float kept[kTile];
  std::int32_t ids[kTile];
  unsigned int warp_kept[kStatsWarps];
  float mass;
  int overflow;
};

/// The `count` entries of a tile from id b, as floats in shared memory, by the whole block: a
/// full aligned tile by 16-byte loads, else one by one. Ends with a barrier.
template <class T>
__device__ __forceinline__ void load_tile(Global<const T> row, std::int64_t b, int count,
                                          float* buf) {
  const int tid = static_cast<int>(threadIdx.x);
  constexpr int kVector = 16 / static_cast<int>(sizeof(T));
  if (count == kTile && row.vector_aligned(b)) {
    for (int v = tid; v < kTile / kVector; v += kStatsThreads) {
      const auto packed =
          row.template load_vec<kVector>(b + static_cast<std::int64_t>(v) * kVector);
      for (int j = 0; j < kVector; ++j)
        buf[v * kVector + j] = specdec::detail::to_float(packed.v[j]);
    }
  } else {
    for (int i = tid; i < count; i += kStatsThreads) buf[i] = specdec::detail::to_float(row[b + i]);
  }
  __syncthreads();
}

/// Entries [b, b + count) of a row written +0 by the whole block, without reading them.
__device__ __forceinline__ void write_zeros(Global<float> out, std::int64_t b, int count) {
  for (int i = static_cast<int>(threadIdx.x); i < count; i += kStatsThreads) out[b + i] = 0.0f;
}

/// Whether tile t of the tiles [first, end) a pass walks warps to +0 throughout under `s`: its
/// largest logit (`tiles`, loaded kMaximaChunk tiles at a time into maxima) is cut
/// (cuts_all_up_to). By the whole block, for every t in turn from `first`.
__device__ inline bool tile_cut_whole(const specdec::detail::WarpStats& s,
                                      Global<const TileStats> tiles, std::int64_t t,
                                      std::int64_t first, std::int64_t end, float* maxima) {
  const std::int64_t at = (t - first) % kMaximaChunk;
  if (at == 0) load_tile_maxima(tiles, t, end, maxima);
  return specdec::detail::cuts_all_up_to(s, maxima[at]);
}

/// The entries min-p alone keeps among the `count` of a tile in buf (ids from b): softmax
/// probability under `s` positive and at least `threshold`, packed in id order into sh.kept and
/// sh.ids; returns their number, in every thread. Unless `out` is null, writes +0 (a cut entry's
/// warped probability) at every other entry. By the whole block; ends with a barrier.
__device__ inline int pack_min_p_tile(const float* buf, int count, std::int64_t b,
                                      const specdec::detail::WarpStats& s, float threshold,
                                      Global<float> out, MinPWriteShared& sh) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  constexpr int kSteps = kMinPSpan / 32;
  float p[kSteps];
  unsigned int ballots[kSteps];
  unsigned int mine = 0;
  SPECDEC_UNROLL(4)
  for (int k = 0; k < kSteps; ++k) {
    const int i = warp * kMinPSpan + k * 32 + lane;
    p[k] = i < count ? specdec::detail::softmax_probability(s, buf[i], b + i) : 0.0f;
    const bool keep = p[k] > 0.0f && !(p[k] < threshold);
    if (out != nullptr && i < count && !keep) out[b + i] = 0.0f;
    ballots[k] = __ballot_sync(0xffffffffu, keep);
    mine += static_cast<unsigned int>(__popc(ballots[k]));
  }
  if (lane == 0) sh.warp_kept[warp] = mine;
  __syncthreads();
  unsigned int before = 0, total = 0;
  for (int w = 0; w < kStatsWarps; ++w) {
    before += w < warp ? sh.warp_kept[w] : 0u;
    total += sh.warp_kept[w];
  }
  SPECDEC_UNROLL(4)
  for (int k = 0; k < kSteps; ++k) {
    if ((ballots[k] >> lane) & 1u) {
      const unsigned int slot =
          before + static_cast<unsigned int>(__popc(ballots[k] & ((1u << lane) - 1u)));
      sh.kept[slot] = p[k];
      sh.ids[slot] = static_cast<std::int32_t>(b + warp * kMinPSpan + k * 32 + lane);
    }
    before += static_cast<unsigned int>(__popc(ballots[k]));
  }
  __syncthreads();
  return static_cast<int>(total);
}

/// A kept entry in a block's segment: its probability's bits above its id.
__device__ __forceinline__ std::uint64_t min_p_entry(float p, std::int32_t id) {
  return (static_cast<std::uint64_t>(specdec::detail::float_bits(p)) << 32) |
         static_cast<std::uint32_t>(id);
}
__device__ __forceinline__ float entry_probability(std::uint64_t e) {
  return specdec::detail::bits_float(static_cast<std::uint32_t>(e >> 32));
}
__device__ __forceinline__ std::int32_t entry_id(std::uint64_t e) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(e));
}

/// Block blockIdx.y's tiles of row r (statistics `st`, warp `w` with min-p alone) written: +0 at
/// every entry below the threshold, the kept ones into the block's segment of `list` (its count
/// first); then, in the last block of the row to finish (counters[r], 0 at launch and after), the
/// kept mass in id order and the kept entries' warped probabilities. By the whole block.
template <class T, class Shared>
__device__ void write_min_p_alone(Global<const T> row, std::int64_t n, const RowSplit& split,
                                  const DeviceWarp& w, const RowStats& st,
                                  Global<const TileStats> tiles, Global<std::uint64_t> list,
                                  Global<unsigned int> counters, Global<float> out, Shared& sh) {
  namespace sd = specdec::detail;
  sd::WarpStats s = st;
  const float threshold = min_p_alone_threshold(w.min_p, st);
  // Whether tile t of those in [first, end) keeps nothing: its largest logit is below the
  // threshold.
  sd::WarpStats below = s;
  below.min_p_threshold = threshold;
  const auto keeps_none = [&](std::int64_t t, std::int64_t first, std::int64_t end) {
    return tile_cut_whole(below, tiles, t, first, end, sh.maxima);
  };
  const std::int64_t segment = kNucleusListSize / split.blocks_per_row, room = segment - 1;
  const int tid = static_cast<int>(threadIdx.x);
  const BlockTiles block = BlockTiles::of(split);
  const Global<std::uint64_t> mine = list + blockIdx.y * segment;
  std::int64_t listed = 0;
  for (std::int64_t t = block.first; t < block.end; ++t) {
    if (keeps_none(t, block.first, block.end)) {
      write_zeros(out, t * kTile, tile_entries(n, t));
      continue;
    }
    load_tile(row, t * kTile, tile_entries(n, t), sh.tile);
    const int kept =
        pack_min_p_tile(sh.tile, tile_entries(n, t), t * kTile, s, threshold, out, sh.min_p);
    for (int j = tid; j < kept; j += kStatsThreads) {
      if (listed + j < room) mine[1 + listed + j] = min_p_entry(sh.min_p.kept[j], sh.min_p.ids[j]);
    }
    listed += kept;
  }
  if (tid == 0) mine[0] = static_cast<std::uint64_t>(listed);
  if (!last_block_of_row(counters, blockIdx.x, split.blocks_per_row, sh.last)) return;
  // The kept mass: the segments' entries in block order are the row's in id order. Their counts
  // go to sh.min_p.ids (free now; a row of more blocks than it holds is walked).
  if (tid == 0) {
    float mass = 0.0f;
    int overflow = split.blocks_per_row > kTile ? 1 : 0;
    for (std::int64_t y = 0; y < split.blocks_per_row && overflow == 0; ++y) {
      const std::uint64_t count = list[y * segment];
      overflow = count > static_cast<std::uint64_t>(room) ? 1 : 0;
      sh.min_p.ids[y] = static_cast<std::int32_t>(count);
      for (std::uint64_t j = 0; overflow == 0 && j < count; ++j)
        mass = sd::add_rn(mass, entry_probability(list[y * segment + 1 + j]));
    }
    sh.min_p.mass = mass;
    sh.min_p.overflow = overflow;
  }
  __syncthreads();
  const bool overflow = sh.min_p.overflow != 0;
  if (overflow) {  // the row again, tile by tile
    float mass = 0.0f;
    for (std::int64_t t = 0; t < split.tiles; ++t) {
      if (keeps_none(t, 0, split.tiles)) continue;
      load_tile(row, t * kTile, tile_entries(n, t), sh.tile);
      const int kept =
          pack_min_p_tile(sh.tile, tile_entries(n, t), t * kTile, s, threshold, nullptr, sh.min_p);
      if (tid == 0) {
        for (int j = 0; j < kept; ++j) mass = sd::add_rn(mass, sh.min_p.kept[j]);
      }
      __syncthreads();  // sh.min_p is read before the next tile refills it
    }
    if (tid == 0) sh.min_p.mass = mass;
    __syncthreads();
  }
  s.min_p_threshold = threshold;
  s.inv_min_p_kept = 1.0f / sh.min_p.mass;
  if (!overflow) {
    for (std::int64_t y = 0; y < split.blocks_per_row; ++y) {
      const Global<std::uint64_t> entries = list + y * segment;
      for (std::int64_t j = tid; j < sh.min_p.ids[y]; j += kStatsThreads) {
        const std::uint64_t e = entries[1 + j];
        out[entry_id(e)] = sd::cut_probability(s, entry_probability(e), entry_id(e));
      }
    }
    return;
  }
  for (std::int64_t t = 0; t < split.tiles; ++t) {
    if (keeps_none(t, 0, split.tiles)) continue;
    load_tile(row, t * kTile, tile_entries(n, t), sh.tile);
    const int kept =
        pack_min_p_tile(sh.tile, tile_entries(n, t), t * kTile, s, threshold, nullptr, sh.min_p);
    for (int j = tid; j < kept; j += kStatsThreads)
      out[sh.min_p.ids[j]] = sd::cut_probability(s, sh.min_p.kept[j], sh.min_p.ids[j]);
    __syncthreads();
  }
}

}  // namespace specdec::backend::cuda_impl::detail
