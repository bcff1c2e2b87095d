// SPDX-License-Identifier: MIT
// The top-k cut of rows on the statistics path (in the nucleus launch, for rows whose warp has a
// top-k of at most kStatisticsTopK), with the top-p and min-p that follow it. The statistics
// launch left each block's best k of its part of the row in the row's candidate list
// (top_k_lists.cuh); one block selects the k best of the lists (keep_largest_keys) and computes
// what core/warp/logit_stats.hpp computes from them: their softmax sum in the tile rule's order
// (core/tile_combine.hpp's sparse_row_sum, the same function), the nucleus among them, the min-p
// threshold. The row is then held as its kept entries, listed by id with their warped
// probabilities, as the CPU's draws hold it.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/nucleus_list.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/backend/cuda/detail/top_k_lists.cuh"
#include "specdec/core/tile_combine.hpp"
#include "specdec/core/warp/cut_rules.hpp"
#include "specdec/core/warp/stats.hpp"

namespace specdec::backend::cuda_impl::detail {

static_assert(kNucleusListSize >= 4 * kStatisticsTopK, "every row keeps at least 4 block lists");
static_assert(kStatisticsTopK <= kMaxDeviceTopK, "block_top_k keeps at most kMaxDeviceTopK");

/// Scratch of finish_top_k in the nucleus's shared keys, past the keys of the k best (k <=
/// kStatisticsTopK): the candidates' ids, logits and probabilities, and the tiles of their sum.
struct TopKScratch {
  std::int32_t* ids;
  float* logits;
  float* values;
  specdec::detail::TileSum* tiles;
  __device__ static TopKScratch in(NucleusShared& sh) {
    unsigned char* free = reinterpret_cast<unsigned char*>(&sh.keys[kStatisticsTopK]);
    constexpr std::size_t kFloats = kStatisticsTopK * sizeof(float);
    return {reinterpret_cast<std::int32_t*>(free), reinterpret_cast<float*>(free + kFloats),
            reinterpret_cast<float*>(free + 2 * kFloats),
            reinterpret_cast<specdec::detail::TileSum*>(free + 3 * kFloats)};
  }
};
static_assert(sizeof(std::uint64_t) * (kNucleusListSize - kStatisticsTopK) >=
                  kStatisticsTopK * (3 * sizeof(float) + sizeof(specdec::detail::TileSum)),
              "TopKScratch fits past the k best keys");

/// The last block of a top-k row: the k best of the `parts` block lists in `list` (their entries
/// of logit -inf left out: they would add nothing), and from them, by thread 0 as
/// cut_statistics does, the row's softmax statistics, its nucleus (top-p) and its min-p
/// threshold into `s`. With list.keep, the kept entries are written to the list as kept_keys (ids
/// ascending, their warped probabilities); their count goes to *list.kept. Unless `tiles` is null, each
/// of the row's `tile_count` tiles gets as its max the largest logit of the k best in it (-inf:
/// none), for the warp's write pass to skip the tiles that keep nothing. By the whole block.
template <class T>
__device__ void finish_top_k(Global<const T> row, std::int64_t n, const DeviceWarp& w, int parts,
                             const RowList& list, RowStats& s, NucleusShared& sh,
                             Global<TileStats> tiles, std::int64_t tile_count) {
  namespace sd = specdec::detail;
  const int k = w.top_k, count = parts * k;
  // The best k (less empty slots) into sh.keys, and the k-th.
  const std::uint64_t cut = keep_largest_keys(list.keys, count, k, sh.keys, sh.select);
  if (threadIdx.x == 0) {
    sh.kept = sh.select.count;
    // Fewer than k drawable entries: the CPU's cut is then an entry of logit -inf, which keeps
    // every finite one.
    // The cut's logit from its key (a zero as +0, which below_cut compares alike).
    const auto order = static_cast<std::uint32_t>(cut >> 32) ^ 0x80000000u;
    s.top_k_last = cut != 0u ? key_id(cut) : static_cast<std::int32_t>(n);
    s.top_k_value =
        cut != 0u ? sd::from_signed_order_key(static_cast<std::int32_t>(order)) : specdec::kNegInf;
  }
  __syncthreads();
  // The candidates by id (descending kept_keys): their ids and logits (one read each) into the
  // scratch.
  const int m = static_cast<int>(sh.kept);
  for (int j = static_cast<int>(threadIdx.x); j < m; j += static_cast<int>(blockDim.x))
    sh.keys[j] = kept_key(sh.keys[j]);
  sort_keys_descending(m, sh.keys);
  const TopKScratch scratch = TopKScratch::in(sh);
  for (int j = static_cast<int>(threadIdx.x); j < m; j += static_cast<int>(blockDim.x)) {
    const auto id =
        static_cast<std::int32_t>(0xffffffffu - static_cast<std::uint32_t>(sh.keys[j] >> 32));
    scratch.ids[j] = id;
    scratch.logits[j] = sd::to_float(row[id]);
  }
  __syncthreads();
  // cut_statistics's top-k branch: the softmax over the candidates, those of probability 0
  // dropped. Its sum is sparse_row_sum's: a thread a tile (slot j holds the tile candidate j
  // opens, -inf where it opens none, which combine_tiles skips), then the tiles combined in order.
  {
    const float* logits = scratch.logits;
    const auto logit = [logits](std::int64_t j) { return logits[j]; };
    for (int j = static_cast<int>(threadIdx.x); j < m; j += static_cast<int>(blockDim.x)) {
      std::int64_t end = 0;
      scratch.tiles[j] = sd::opens_tile(scratch.ids, j)
                             ? sd::sparse_tile_sum(scratch.ids, m, j, s.inv_temperature, logit, end)
                             : sd::TileSum{specdec::kNegInf, 0.0f, 0.0f};
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const sd::RowSum sum = sd::combine_tiles(scratch.tiles, m, s.inv_temperature);
    s.max = sum.max;
    s.inv_sum = 1.0f / static_cast<float>(sum.sum);
    sh.row = s;  // for the block
  }
  __syncthreads();
  const auto probability = [&sh](float logit) {
    return sd::mul_rn(sd::exp_flush(sd::scaled_exponent(logit, sh.row.max, sh.row.inv_temperature)),
                      sh.row.inv_sum);
  };
  for (int j = static_cast<int>(threadIdx.x); j < m; j += static_cast<int>(blockDim.x))
    scratch.values[j] = probability(scratch.logits[j]);
  __syncthreads();
  // The candidates of probability > 0, kept in id order: (id, logit bits) into the keys (free
  // now), then back with their probabilities.
  const int support = static_cast<int>(block_compact(
      m, [&](int j) { return scratch.values[j] > 0.0f; },
      [&](int j, unsigned int at) {
        sh.keys[at] = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(scratch.ids[j])) << 32) |
                      sd::float_bits(scratch.logits[j]);
      },
      sh.u));
  __syncthreads();
  for (int j = static_cast<int>(threadIdx.x); j < support; j += static_cast<int>(blockDim.x)) {
    scratch.ids[j] = static_cast<std::int32_t>(sh.keys[j] >> 32);
    scratch.logits[j] = sd::bits_float(static_cast<std::uint32_t>(sh.keys[j]));
    scratch.values[j] = probability(scratch.logits[j]);
  }
  __syncthreads();
  if (w.top_p < 1.0f) {
    // The nucleus among them: ranked by the block, walked by thread 0 (select_nucleus's cut),
    // its mass summed in id order (kept_mass).
    for (int j = static_cast<int>(threadIdx.x); j < support; j += static_cast<int>(blockDim.x))
      sh.keys[j] = nucleus_key(scratch.values[j], scratch.ids[j]);
    sort_keys_descending(support, sh.keys);
    if (threadIdx.x == 0) {
      const double top_p = static_cast<double>(w.top_p);
      double running = 0.0;
      for (int j = 0; j < support; ++j) {
        running += static_cast<double>(key_value(sh.keys[j]));
        if (!sd::reaches_nucleus(running, top_p)) continue;
        s.top_p_value = key_value(sh.keys[j]);
        s.top_p_last = key_id(sh.keys[j]);
        double mass = 0.0;
        for (int i = 0; i < support; ++i) {
          if (!sd::below_cut(scratch.values[i], scratch.ids[i], s.top_p_value, s.top_p_last))
            mass += static_cast<double>(scratch.values[i]);
        }
        s.inv_top_p_kept = static_cast<float>(1.0 / mass);
        break;
      }
    }
  }
  if (threadIdx.x == 0) {
    if (w.min_p > 0.0f) {
      // The min-p threshold on the probabilities after top-p, its kept mass in id order.
      const sd::WarpStats cuts = s;
      float top = 0.0f;
      for (int j = 0; j < support; ++j) {
        float& p = scratch.values[j];
        p = sd::nucleus_probability(cuts, p, scratch.ids[j]);
        top = p > top ? p : top;
      }
      const float threshold = sd::min_p_threshold(w.min_p, top);
      float mass = 0.0f;
      for (int j = 0; j < support; ++j) {
        if (!(scratch.values[j] < threshold)) mass = sd::add_rn(mass, scratch.values[j]);
      }
      s.min_p_threshold = threshold;
      s.inv_min_p_kept = 1.0f / mass;
    }
    sh.row = s;  // the cuts, for the block
  }
  __syncthreads();
  // The row as its kept entries (kept_candidates): ids ascending, warped probabilities, each
  // computed by a thread, listed in order by thread 0.
  if (list.keep) {
    const sd::WarpStats stats = sh.row;
    for (int j = static_cast<int>(threadIdx.x); j < support; j += static_cast<int>(blockDim.x))
      scratch.values[j] = sd::warped_probability(stats, scratch.logits[j], scratch.ids[j]);
  }
  __syncthreads();
  const unsigned int listed =
      list.keep ? block_compact(
                      support, [&](int j) { return scratch.values[j] > 0.0f; },
                      [&](int j, unsigned int at) {
                        list.keys[at] = kept_key(nucleus_key(scratch.values[j], scratch.ids[j]));
                      },
                      sh.u)
                : 0u;
  if (threadIdx.x == 0) *list.kept = listed;
  if (!(tiles == nullptr)) {
    // Tile t's candidates are consecutive (ids ascending): found by two searches, a thread a tile.
    const auto first_at_least = [&](std::int64_t id) {
      int lo = 0, hi = support;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        lo = scratch.ids[mid] < id ? mid + 1 : lo;
        hi = scratch.ids[mid] < id ? hi : mid;
      }
      return lo;
    };
    for (std::int64_t t = threadIdx.x; t < tile_count; t += blockDim.x) {
      float best = specdec::kNegInf;
      for (int j = first_at_least(t * kTile), e = first_at_least((t + 1) * kTile); j < e; ++j)
        best = scratch.logits[j] > best ? scratch.logits[j] : best;
      tiles[t] = TileStats{best, 0.0f, 0, 0};
    }
  }
  __syncthreads();
}

}  // namespace specdec::backend::cuda_impl::detail
