// SPDX-License-Identifier: MIT
// The write pass of the batched warp on the statistics path: after row_stats_kernel (and the
// nucleus launch, for a top-p or top-k) has left each row's RowStats, blocks split the rows as it
// did and write every entry's warped_probability, the CPU's bits, exactly once. A greedy row is
// written without reading its logits; a row with min-p alone is cut here (warp_min_p_write.cuh).
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/backend/cuda/detail/warp_min_p_write.cuh"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/core/warp/stats.hpp"

namespace specdec::backend::cuda_impl::detail {

struct WarpWriteShared {
  float tile[kTile];  // one tile's logits as floats, loaded 16 bytes at a time
  MinPWriteShared min_p;
  float maxima[kMaximaChunk];  // load_tile_maxima's
  RowStats stats;
  DeviceWarp warp;
  int last;
};

/// Entries [b, b + count) of a row (count <= kTile) by the whole block: out[i] =
/// warped_probability(s, logit_i, i), the tile read into shared memory first (load_tile); every
/// store is coalesced.
template <class T>
__device__ __forceinline__ void write_warped_tile(Global<const T> row, Global<float> out,
                                                  std::int64_t b, int count,
                                                  const specdec::detail::WarpStats& s, float* buf) {
  const int tid = static_cast<int>(threadIdx.x);
  if (s.greedy >= 0) {  // one-hot: the logits are not needed
    for (int i = tid; i < count; i += kStatsThreads) out[b + i] = b + i == s.greedy ? 1.0f : 0.0f;
    return;
  }
  load_tile(row, b, count, buf);
  for (int i = tid; i < count; i += kStatsThreads)
    out[b + i] = specdec::detail::warped_probability(s, buf[i], b + i);
  __syncthreads();  // buf is refilled by the next tile
}

/// Whether statistics `s` cut their row (top-k, top-p or min-p; not greedy): only then may a
/// tile warp to +0 throughout.
__device__ __forceinline__ bool cuts_row(const specdec::detail::WarpStats& s) {
  return s.greedy < 0 && (s.top_k_last >= 0 || s.top_p_last >= 0 || s.min_p_threshold > 0.0f);
}

/// Row r of the set is blockIdx.x; blockIdx.y writes split.tiles_per_block tiles of it:
/// out[r * out_stride + i] = warped_probability(stats[r], logit_i, i), or NaN
/// throughout a row whose statistics are invalid (its logits, or a device warp the statistics
/// path does not take). A row that is cut skips reading its tiles whose largest logit (`tiles`:
/// the statistics', or for a top-k row the largest of its k best) warps to +0 (cuts_all_up_to).
/// A row whose warp (`warps`) has min-p alone is cut here, with the row's list in `lists` and
/// counters[r] (0 at launch and after).
template <class T>
__global__ void __launch_bounds__(kStatsThreads)
    warp_write_kernel(LogitRowSet<T> rows, std::int64_t n, RowSplit split, RowWarps warps,
                      Global<const RowStats> stats, Global<const TileStats> tiles,
                      Global<std::uint64_t> lists, Global<unsigned int> counters, Global<float> out,
                      std::int64_t out_stride) {
  expect_block_threads(kStatsThreads);
  __shared__ WarpWriteShared sh;
  const std::int64_t r = blockIdx.x;
  if (threadIdx.x == 0) {  // one read of the row's statistics and warp per block
    sh.stats = stats[r];
    sh.warp = warps.of(r);
  }
  __syncthreads();
  const specdec::detail::WarpStats s = sh.stats;
  const Global<const T> row = rows.row(r);
  const Global<float> out_row = out + r * out_stride;
  const BlockTiles block = BlockTiles::of(split);
  const Global<const TileStats> row_tiles = tiles + r * split.tiles;
  if (sh.stats.invalid == 0 && min_p_alone(sh.warp, n)) {
    write_min_p_alone(row, n, split, sh.warp, sh.stats, row_tiles, lists + r * kNucleusListSize,
                      counters, out_row, sh);
    return;
  }
  const bool skips = cuts_row(s);
  for (std::int64_t t = block.first; t < block.end; ++t) {
    const std::int64_t b = t * kTile;
    const int count = tile_entries(n, t);
    if (sh.stats.invalid != 0) {
      for (int i = static_cast<int>(threadIdx.x); i < count; i += kStatsThreads)
        out_row[b + i] = specdec::detail::bits_float(0x7fc00000u);  // a quiet NaN
      continue;
    }
    if (skips && tile_cut_whole(s, row_tiles, t, block.first, block.end, sh.maxima)) {
      write_zeros(out_row, b, count);
      continue;
    }
    write_warped_tile(row, out_row, b, count, s, sh.tile);
  }
}

}  // namespace specdec::backend::cuda_impl::detail
